"""Block-zstd: one independent zstd frame per block, plus the zstd seekable format's seek table.

A block-zstd object is a valid zstd file: ``zstd -d`` (and every zstd stream reader) decodes the
frames one after another and skips the trailing skippable frame that holds the seek table
(facebook/zstd ``contrib/seekable_format``), so seekable-zstd readers can seek it without the
``.index.json`` sidecar, and blockgz can rebuild a lost sidecar from the table.

Each frame carries its content size and a checksum (the low 32 bits of XXH64 of the block, as
gzip carries a CRC), and the seek table repeats that checksum (its ``Checksum_Flag``). Frames
are compressed by python-zstandard (``zstandard``), whose C calls release the GIL, so the
writer's thread pool scales as it does for block-GZIP; each thread keeps its own compressor,
as a zstd context is not shared between threads.

    >>> frames = [compress_frame(b"a\\nb\\n", 1), compress_frame(b"c\\n", 1)]
    >>> table = seek_table([(len(f), n, f[-4:]) for f, n in zip(frames, (4, 2))])
    >>> data = b"".join(frames) + table
    >>> [(c, d) for c, d, _ in read_seek_table(data)]
    [(17, 4), (15, 2)]
    >>> bytes(decompress_frames(data))
    b'a\\nb\\nc\\n'
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, BinaryIO

from blockgz.blocks.codecs.one_frame import decode_one
from blockgz.errors import CorruptBlockError, MissingDependencyError

zstandard: ModuleType | None  # a hard dependency, but checked where used (_lib)
try:
    import zstandard
except ImportError:  # pragma: no cover - a hard dependency; named in the error below
    zstandard = None

#: The magic number at the start of every zstd frame (little-endian ``0xFD2FB528``).
FRAME_MAGIC = b"\x28\xb5\x2f\xfd"
#: Skippable frames use magic numbers ``0x184D2A50``-``0x184D2A5F``; the seek table takes ``…5E``.
_SKIPPABLE_LOW, _SKIPPABLE_HIGH = 0x184D2A50, 0x184D2A5F
SEEK_TABLE_MAGIC = 0x184D2A5E
SEEKABLE_MAGIC = 0x8F92EAB1
_FOOTER = struct.Struct("<IBI")  # Number_Of_Frames, Seek_Table_Descriptor, Seekable_Magic_Number
_HEADER = struct.Struct("<II")  # Skippable_Magic_Number, Frame_Size
_CHECKSUM_FLAG = 0x80
_RESERVED_BITS = 0x7C
#: The seek table stores sizes as 32-bit integers.
MAX_FRAME_SIZE = 2**32 - 1

_local = threading.local()


def _lib() -> Any:
    if zstandard is None:  # pragma: no cover
        raise MissingDependencyError("zstd needs the zstandard package: pip install zstandard")
    return zstandard


def compress_frame(data: bytes | memoryview, level: int) -> bytes:
    """One complete zstd frame holding ``data``, with its content size and checksum.

    The bytes depend only on ``data`` and ``level`` (one single-threaded context per thread).
    """
    cache = getattr(_local, "compressors", None)
    if cache is None:
        cache = _local.compressors = {}
    compressor = cache.get(level)
    if compressor is None:
        compressor = cache[level] = _lib().ZstdCompressor(
            level=level, write_checksum=True, write_content_size=True
        )
    return compressor.compress(data)


def frame_compressor(level: int) -> Callable[[bytes | memoryview], bytes]:
    """``compress_frame`` at ``level``, as the block writer takes a compressor."""
    return lambda data: compress_frame(data, level)


def _decompressor() -> Any:
    found = getattr(_local, "decompressor", None)
    if found is None:
        found = _local.decompressor = _lib().ZstdDecompressor()
    return found


def decompress_frame(data: bytes | memoryview) -> bytes:
    """Decompress exactly one zstd frame (checksum checked); :class:`CorruptBlockError` if it is
    damaged, truncated, or followed by other bytes."""
    lib = _lib()
    try:
        return _decompressor().decompress(data, allow_extra_data=False)
    except lib.ZstdError as exc:
        raise CorruptBlockError(f"zstd frame does not decompress ({exc})") from exc


def decompress_frames(data: bytes | memoryview) -> bytes:
    """Decompress a run of zstd frames (skippable frames, the seek table too, are skipped)."""
    return b"".join(out for _, _, out in walk_frames(memoryview(data)))


def walk_frames(
    view: memoryview, on_progress: Callable[[int], None] | None = None
) -> Iterator[tuple[int, int, bytes]]:
    """Yield ``(byte_offset, byte_length, decompressed)`` for each frame of ``view``: where a
    seek table ends ``view``, at the frames it lists; otherwise found by decoding, skippable
    frames stepped over without being yielded."""
    table = read_seek_table(view)
    if table is not None:
        pos = 0
        for compressed, _, _ in table:
            try:
                out = decompress_frame(view[pos : pos + compressed])
            except CorruptBlockError as exc:
                message = f"zstd frame at byte {pos}: {exc}"
                raise CorruptBlockError(message, byte_offset=pos) from exc
            yield pos, compressed, out
            pos += compressed
            if on_progress is not None:
                on_progress(compressed)
        return
    lib = _lib()
    pos, size = 0, len(view)
    while pos < size:
        if size - pos >= _HEADER.size:
            magic, length = _HEADER.unpack_from(view, pos)
            if _SKIPPABLE_LOW <= magic <= _SKIPPABLE_HIGH:
                if pos + _HEADER.size + length > size:
                    raise CorruptBlockError(
                        f"skippable zstd frame at byte {pos} is truncated", byte_offset=pos
                    )
                pos += _HEADER.size + length
                continue
        decoder = _decompressor().decompressobj(read_across_frames=False)
        consumed, data = decode_one(view, pos, decoder, "zstd frame", lib.ZstdError)
        yield pos, consumed, data
        pos += consumed
        if on_progress is not None:
            on_progress(consumed)


def seek_table(entries: list[tuple[int, int, bytes]]) -> bytes:
    """The seekable format's seek table frame for ``(compressed size, decompressed size,
    checksum)`` entries; ``checksum`` is a frame's last 4 bytes (its XXH64 low 32 bits)."""
    body = bytearray()
    for compressed, decompressed, checksum in entries:
        if compressed > MAX_FRAME_SIZE or decompressed > MAX_FRAME_SIZE:
            raise CorruptBlockError(
                f"a zstd frame of {compressed} bytes holding {decompressed} does not fit the "
                "seek table's 32-bit sizes; use smaller blocks"
            )
        body += struct.pack("<II", compressed, decompressed) + bytes(checksum)
    body += _FOOTER.pack(len(entries), _CHECKSUM_FLAG, SEEKABLE_MAGIC)
    return _HEADER.pack(SEEK_TABLE_MAGIC, len(body)) + bytes(body)


def read_seek_table(data: bytes | memoryview) -> list[tuple[int, int, bytes | None]] | None:
    """The entries of the seek table that ends ``data`` (``None`` when there is none):
    ``(compressed size, decompressed size, checksum or None)``. Raises
    :class:`CorruptBlockError` when the table is damaged or does not tile the bytes before it."""
    view = memoryview(data)
    if len(view) < _FOOTER.size:
        return None
    frames, descriptor, magic = _FOOTER.unpack_from(view, len(view) - _FOOTER.size)
    if magic != SEEKABLE_MAGIC:
        return None
    if descriptor & _RESERVED_BITS:
        raise CorruptBlockError(f"zstd seek table descriptor {descriptor:#x} sets reserved bits")
    width = 12 if descriptor & _CHECKSUM_FLAG else 8
    body = frames * width + _FOOTER.size
    start = len(view) - body - _HEADER.size
    if start < 0:
        raise CorruptBlockError(f"zstd seek table of {frames} frames is longer than the data")
    magic, length = _HEADER.unpack_from(view, start)
    if magic != SEEK_TABLE_MAGIC or length != body:
        raise CorruptBlockError("zstd seek table footer found but its frame header is wrong")
    entries: list[tuple[int, int, bytes | None]] = []
    pos = start + _HEADER.size
    for _ in range(frames):
        compressed, decompressed = struct.unpack_from("<II", view, pos)
        checksum = bytes(view[pos + 8 : pos + 12]) if width == 12 else None
        entries.append((compressed, decompressed, checksum))
        pos += width
    if sum(e[0] for e in entries) != start:
        raise CorruptBlockError(
            f"zstd seek table frames add up to {sum(e[0] for e in entries)} bytes, "
            f"but {start} bytes precede the table"
        )
    return entries


def seek_table_length(data: bytes | memoryview) -> int:
    """How many bytes the seek table at the end of ``data`` takes (0: none)."""
    entries = read_seek_table(data)
    if entries is None:
        return 0
    return len(data) - sum(e[0] for e in entries)


def open_stream(raw: BinaryIO) -> BinaryIO:
    """A readable file of the decompressed bytes of ``raw``: every frame, skippable frames
    (the seek table) skipped, as ``zstd -d`` reads it."""
    import io

    reader = _lib().ZstdDecompressor().stream_reader(raw, read_across_frames=True)
    return io.BufferedReader(reader, 1024 * 1024)
