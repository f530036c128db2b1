"""``s3.compression.type``: how a framed object is compressed, one class each.

* ``none``: the records as they are.
* ``gzip``: one gzip member, as Confluent's ``GZIPOutputStream`` writes it (zlib level 6 by
  default: deterministic bytes).
* ``blockgzip``: blockgz's seekable block-GZIP (one gzip member per block, ISA-L level 1 by
  default) with its ``.index.json`` sidecar.
* ``zstd``: one zstd frame per object, as ``gzip`` is one gzip stream (what Aiven's S3 sink
  writes; Confluent users ask for it in their issue #727). Level 3 by default, as the ``zstd``
  command line.
* ``blockzstd``: one independent zstd frame per block, the ``.index.json`` sidecar, and the zstd
  seekable format's seek table in a trailing skippable frame (:mod:`blockgz.blocks.codecs.zstd`), so
  ``zstd -d`` decompresses the whole object and seekable-zstd readers can seek it. Level 1 by
  default: zstd's fastest positive level, which on Kafka JSON already beats ``gzip -6``'s ratio
  (``benchmarks/README.md``).

Both zstd types end with ``.zst``, as Aiven's S3 sink names zstd objects, and take
``s3.compression.level`` as the zstd level itself (1-22; ``-1``: the default above).

Formats that compress inside their objects (Avro) take none of them.

>>> COMPRESSIONS.names()
('none', 'gzip', 'blockgzip', 'zstd', 'blockzstd')
>>> [(c.name, c.suffix, c.indexed) for c in COMPRESSIONS][:3]
[('none', '', False), ('gzip', '.gz', False), ('blockgzip', '.gz', True)]
>>> COMPRESSIONS.get("gzip").codec(-1)
Compression(codec='zlib', level=6)
>>> COMPRESSIONS.get("zstd").suffix, COMPRESSIONS.get("blockzstd").codec(-1)
('.zst', Compression(codec='zstd', level=1))
"""

from __future__ import annotations

import zlib
from typing import Any, ClassVar

from blockgz.blocks.codecs.gzip_members import CODEC_LEVELS, Compression
from blockgz.errors import ConfigError
from blockgz.named import Registry


class CompressionType:
    """One ``s3.compression.type``."""

    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    #: What it adds to an object's extension.
    suffix: ClassVar[str] = ".gz"
    #: Whether it compresses at all (``none`` does not).
    compresses: ClassVar[bool] = True
    #: Whether objects are written in blocks with an index sidecar (seekable by offset).
    indexed: ClassVar[bool] = False

    def codec(self, level: int) -> Compression:
        """The codec and level of its blocks (or stream) for ``s3.compression.level``
        (-1: default)."""
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


#: ``zstd``'s default, as the zstd command line's.
ZSTD_DEFAULT_LEVEL = 3
#: ``blockzstd``'s default: zstd's fastest positive level.
BLOCKZSTD_DEFAULT_LEVEL = 1


def _level(level: int, default: int, name: str) -> Compression:
    if level < 0:
        return Compression("zstd", default)
    allowed = CODEC_LEVELS["zstd"]
    if level not in allowed:
        raise ConfigError(
            f"s3.compression.level={level} is not valid for s3.compression.type={name}; "
            f"allowed: -1 (default, {default}) or {allowed.start}-{allowed.stop - 1}"
        )
    return Compression("zstd", level)


class ZstdCompression(CompressionType):
    name = "zstd"
    suffix = ".zst"

    def codec(self, level: int) -> Compression:
        return _level(level, ZSTD_DEFAULT_LEVEL, self.name)

    def deflater(self, codec: Compression) -> Any:
        import zstandard

        # One frame with its checksum; no content size (the object is streamed).
        compressor = zstandard.ZstdCompressor(level=codec.level, write_checksum=True)
        return compressor.compressobj()


class BlockZstdCompression(CompressionType):
    name = "blockzstd"
    suffix = ".zst"
    indexed = True

    def codec(self, level: int) -> Compression:
        return _level(level, BLOCKZSTD_DEFAULT_LEVEL, self.name)


#: ``s3.compression.type``.
COMPRESSIONS: Registry[CompressionType] = Registry("s3.compression.type")
for _type in (
    NoCompression(),
    GzipCompression(),
    BlockGzipCompression(),
    ZstdCompression(),
    BlockZstdCompression(),
):
    COMPRESSIONS.register(_type)
