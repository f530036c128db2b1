"""``s3.compression.type``: how a framed object is compressed, one class each.

* ``none``: the records as they are.
* ``gzip``: one gzip member, as Confluent's ``GZIPOutputStream`` writes it (zlib level 6 by
  default: deterministic bytes).
* ``blockgzip``: blockgz's seekable block-GZIP (one gzip member per block, ISA-L level 1 by
  default) with its ``.index.json`` sidecar.

Formats that compress inside their objects (Avro) take none of them.

>>> COMPRESSIONS.names()
('none', 'gzip', 'blockgzip')
>>> [(c.name, c.suffix, c.indexed) for c in COMPRESSIONS]
[('none', '', False), ('gzip', '.gz', False), ('blockgzip', '.gz', True)]
>>> COMPRESSIONS.get("gzip").codec(-1)
Compression(codec='zlib', level=6)
"""

from __future__ import annotations

import zlib
from typing import Any, ClassVar

from blockgz.format.codec import Compression
from blockgz.named import Registry


class CompressionType:
    """One ``s3.compression.type``."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    #: What it adds to an object's extension.
    suffix: ClassVar[str] = ".gz"
    #: Whether it compresses at all (``none`` does not).
    compresses: ClassVar[bool] = True
    #: Whether objects are block-GZIP with an index sidecar (seekable by offset).
    indexed: ClassVar[bool] = False

    def codec(self, level: int) -> Compression:
        """The codec and level of its gzip members for ``s3.compression.level`` (-1: default)."""
        return Compression("zlib", 6 if level < 0 else level)

    def deflater(self, codec: Compression) -> Any:
        """A streaming compressor for a whole object (``None``: the bytes as they are)."""
        return None

    def __repr__(self) -> str:
        return f"<compression {self.name}>"


class NoCompression(CompressionType):
    name = "none"
    suffix = ""
    compresses = False


class GzipCompression(CompressionType):
    name = "gzip"

    def deflater(self, codec: Compression) -> Any:
        # One gzip member, as Confluent's GZIPOutputStream writes (zlib: deterministic).
        return zlib.compressobj(codec.level, zlib.DEFLATED, 31)


class BlockGzipCompression(CompressionType):
    name = "blockgzip"
    indexed = True

    def codec(self, level: int) -> Compression:
        return Compression() if level < 0 else Compression.from_level(level)


#: ``s3.compression.type``.
COMPRESSIONS: Registry[CompressionType] = Registry("s3.compression.type")
for _type in (NoCompression(), GzipCompression(), BlockGzipCompression()):
    COMPRESSIONS.register(_type)
