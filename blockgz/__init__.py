"""blockgz: seekable block-GZIP for Kafka records, and the plumbing sink and reader share.

Quick start::

    >>> import io, gzip
    >>> from blockgz import BlockGzipWriter
    >>> out = io.BytesIO()
    >>> with BlockGzipWriter(out, block_size=1024, threads=1) as w:
    ...     for n in range(1000):
    ...         w.write(b'{"n": %d}' % n, offset=n)
    >>> gzip.decompress(out.getvalue()).count(b"\\n")   # a plain gzip file
    1000
    >>> len(w.index.chunks) > 1                          # made of several blocks
    True

The entry points, each documented in its module:

* writing: :class:`BlockGzipWriter` (to any binary file), :class:`BlockGzipUpload` (an object
  plus its ``.index.json`` in a store), :func:`compress_file` (a local file);
* reading: :func:`open_indexed` (a path or URL) and :class:`IndexedReader`;
* stores: :func:`open_store` (``s3://bucket/prefix``, ``file:///dir`` or a path);
* the format's pieces: :class:`BlockIndex`, :class:`Chunk`, :class:`Compression`,
  :class:`Record`, :class:`Separated`, :class:`LengthPrefixed`; errors: :class:`BlockGzError`.

Names are imported on first use, so ``import blockgz.errors`` (and ``blockgz --help``) stay fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "BlockGzError": "blockgz.errors",
    "BlockGzipUpload": "blockgz.written.upload",
    "BlockGzipWriter": "blockgz.blocks.writer",
    "BlockIndex": "blockgz.blocks.index",
    "Chunk": "blockgz.blocks.index",
    "Compression": "blockgz.blocks.codecs.gzip_members",
    "IndexedReader": "blockgz.objects.indexed",
    "LengthPrefixed": "blockgz.blocks.framing",
    "Record": "blockgz.blocks.decode",
    "Separated": "blockgz.blocks.framing",
    "compress_file": "blockgz.objects.compress",
    "open_indexed": "blockgz.objects.indexed",
    "open_store": "blockgz.store",
}
__all__ = [
    "BlockGzError",
    "BlockGzipUpload",
    "BlockGzipWriter",
    "BlockIndex",
    "Chunk",
    "Compression",
    "IndexedReader",
    "LengthPrefixed",
    "Record",
    "Separated",
    "compress_file",
    "open_indexed",
    "open_store",
]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from blockgz.blocks.codecs.gzip_members import Compression
    from blockgz.blocks.decode import Record
    from blockgz.blocks.framing import LengthPrefixed, Separated
    from blockgz.blocks.index import BlockIndex, Chunk
    from blockgz.blocks.writer import BlockGzipWriter
    from blockgz.errors import BlockGzError
    from blockgz.objects.compress import compress_file
    from blockgz.objects.indexed import IndexedReader, open_indexed
    from blockgz.store import open_store
    from blockgz.written.upload import BlockGzipUpload


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'blockgz' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
