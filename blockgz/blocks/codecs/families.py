"""How the blocks of an indexed object are compressed: one :class:`BlockCodec` per family.

The index's ``codec`` field names the library that wrote the blocks (``isal``, ``zlib`` and
``libdeflate`` write gzip members; ``zstd`` writes zstd frames); readers ask
:func:`block_codec` for the family that decodes them, and a whole object is streamed by the
family its key's suffix names (:func:`codec_for_key`) or its first bytes show
(:func:`sniff`). Nothing else compares codec names or suffixes. Adding a codec is a module
with a :class:`BlockCodec` subclass plus a line in :data:`BLOCK_CODECS`.

    >>> block_codec("isal").name, block_codec(None).name, block_codec("zstd").name
    ('gzip', 'gzip', 'zstd')
    >>> codec_for_key("t+0+0000000000.json.zst").name, codec_for_key("t.json") is None
    ('zstd', True)
    >>> strip_suffix("t+0+0000000000.json.zst"), strip_suffix("a.json")
    ('t+0+0000000000.json', 'a.json')
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import BinaryIO, ClassVar

from blockgz.errors import CorruptIndexError

Frames = Iterator[tuple[int, int, bytes]]


class BlockCodec:
    """One compression family of indexed blocks (and of whole objects)."""

    #: The family's name (``gzip``, ``zstd``).
    name: ClassVar[str]
    #: The index ``codec`` values whose blocks this family decodes.
    codecs: ClassVar[tuple[str, ...]]
    #: The suffix its objects end with, and the bytes every object of it starts with.
    suffix: ClassVar[str]
    magic: ClassVar[bytes]
    #: The lowest index version that may describe its objects: a blockgz that reads only older
    #: versions refuses the index rather than decoding blocks it does not know.
    index_version: ClassVar[int] = 1

    def decompress(self, raw: bytes | memoryview, members: int = 1) -> bytes | bytearray:
        """One block's bytes, checked by the codec; ``members``: how many frames it holds."""
        raise NotImplementedError

    def trailer(self, frames: list[tuple[int, int, bytes]]) -> bytes:
        """What follows the last block, given ``(compressed, uncompressed, last 4 bytes)`` of
        every block written (zstd: the seek table); ``b""`` by default."""
        return b""

    def trailer_length(self, data: bytes | memoryview) -> int:
        """How many bytes at the end of a whole object are its trailer (0 by default)."""
        return 0

    def walk(self, view: memoryview, on_progress: Callable[[int], None] | None = None) -> Frames:
        """``(byte offset, byte length, decompressed)`` of each member/frame, in order."""
        raise NotImplementedError

    def open_stream(self, raw: BinaryIO) -> BinaryIO:
        """The decompressed bytes of a whole object read from ``raw``."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<block codec {self.name}>"


#: A gzip member of no data: mtime 0 (as every blockgz member), an empty final deflate block,
#: CRC-32 and length 0.
EMPTY_GZIP_MEMBER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff\x03\x00" + bytes(8)


class GzipBlocks(BlockCodec):
    """Block-GZIP: one gzip member per block (what ``zcat`` reads)."""

    name = "gzip"
    codecs = ("isal", "zlib", "libdeflate")
    suffix = ".gz"
    magic = b"\x1f\x8b"

    def decompress(self, raw: bytes | memoryview, members: int = 1) -> bytes | bytearray:
        from blockgz.blocks.codecs.gzip_members import decompress_member, decompress_members

        return decompress_member(raw) if members == 1 else decompress_members(raw)

    def trailer(self, frames: list[tuple[int, int, bytes]]) -> bytes:
        """Nothing after the blocks; an object of no block is one empty gzip member (a 0-byte
        file is no gzip file: ``gzip -t`` rejects it)."""
        return b"" if frames else EMPTY_GZIP_MEMBER

    def walk(self, view: memoryview, on_progress: Callable[[int], None] | None = None) -> Frames:
        from blockgz.blocks.codecs.gzip_members import walk_members

        return walk_members(view, on_progress)

    def open_stream(self, raw: BinaryIO) -> BinaryIO:
        from isal import igzip

        return igzip.IGzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]


class ZstdBlocks(BlockCodec):
    """Block-zstd: one zstd frame per block, then the seekable format's seek table
    (:mod:`blockgz.blocks.codecs.zstd`)."""

    name = "zstd"
    codecs = ("zstd",)
    suffix = ".zst"
    magic = b"\x28\xb5\x2f\xfd"
    index_version = 3

    def decompress(self, raw: bytes | memoryview, members: int = 1) -> bytes | bytearray:
        from blockgz.blocks.codecs import zstd

        return zstd.decompress_frame(raw) if members == 1 else zstd.decompress_frames(raw)

    def trailer(self, frames: list[tuple[int, int, bytes]]) -> bytes:
        from blockgz.blocks.codecs import zstd

        return zstd.seek_table(frames)

    def trailer_length(self, data: bytes | memoryview) -> int:
        from blockgz.blocks.codecs import zstd

        return zstd.seek_table_length(data)

    def walk(self, view: memoryview, on_progress: Callable[[int], None] | None = None) -> Frames:
        from blockgz.blocks.codecs import zstd

        return zstd.walk_frames(view, on_progress)

    def open_stream(self, raw: BinaryIO) -> BinaryIO:
        from blockgz.blocks.codecs import zstd

        return zstd.open_stream(raw)


#: Every family, gzip first (an index that names no codec is DeviantArt's: gzip).
BLOCK_CODECS: tuple[BlockCodec, ...] = (GzipBlocks(), ZstdBlocks())
GZIP = BLOCK_CODECS[0]
_BY_CODEC = {name: family for family in BLOCK_CODECS for name in family.codecs}


def block_codec(codec: str | None) -> BlockCodec:
    """The family that decodes blocks an index says ``codec`` wrote (``None``: gzip).

    >>> block_codec("lz4")
    Traceback (most recent call last):
    ...
    blockgz.errors.CorruptIndexError: index codec 'lz4' is not known; allowed: isal, zlib, ...
    """
    if codec is None:
        return GZIP
    found = _BY_CODEC.get(codec)
    if found is None:
        raise CorruptIndexError(
            f"index codec {codec!r} is not known; allowed: {', '.join(_BY_CODEC)} "
            "(written by a newer blockgz? upgrade to read it)"
        )
    return found


def codec_for_key(key: str) -> BlockCodec | None:
    """The family whose suffix ``key`` ends with; ``None`` for an uncompressed object."""
    for family in BLOCK_CODECS:
        if key.endswith(family.suffix):
            return family
    return None


def strip_suffix(key: str) -> str:
    """``key`` without a compression suffix (``.gz``, ``.zst``)."""
    family = codec_for_key(key)
    return key[: -len(family.suffix)] if family is not None else key


def sniff(head: bytes) -> BlockCodec | None:
    """The family whose magic number ``head`` (an object's first bytes) starts with."""
    for family in BLOCK_CODECS:
        if head.startswith(family.magic):
            return family
    return None
