"""blockgz: seekable block-GZIP for Kafka records, and the plumbing shared by sink and reader.

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
"""

from blockgz.blockfile import BlockGzipFile
from blockgz.codec import Compression
from blockgz.decode import Record
from blockgz.errors import BlockGzError
from blockgz.files import compress_file
from blockgz.framing import NEWLINE, LengthPrefixed, Separated
from blockgz.index import BlockIndex, Chunk, sidecar_key
from blockgz.scan import scan_members
from blockgz.verify import verify_file
from blockgz.writer import BlockGzipWriter

__version__ = "0.1.0"
__all__ = [
    "NEWLINE",
    "BlockGzError",
    "BlockGzipFile",
    "BlockGzipWriter",
    "BlockIndex",
    "Chunk",
    "Compression",
    "LengthPrefixed",
    "Record",
    "Separated",
    "compress_file",
    "scan_members",
    "sidecar_key",
    "verify_file",
]
