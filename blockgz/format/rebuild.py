"""Rebuild an index for any multi-member gzip by walking its member boundaries.

Works on files from ``pigz``, ``bgzip``, Python's ``gzip`` or another block-GZIP
writer. Members whose data does not end on a record boundary (``bgzip`` cuts every
64 KiB regardless of lines) are grouped with the following ones until it does, so
every chunk still holds whole records; a single-member file becomes a single chunk.

    >>> import gzip, io
    >>> data = gzip.compress(b"a\\nb\\n", mtime=0) + gzip.compress(b"c\\n", mtime=0)
    >>> [c.num_records for c in scan_members(io.BytesIO(data)).chunks]
    [2, 1]
"""

from __future__ import annotations

import mmap
from collections.abc import Callable
from typing import BinaryIO

from blockgz.errors import CorruptBlockError
from blockgz.format.checksum import block_crc32
from blockgz.format.codec import new_member_decoder
from blockgz.format.framing import NEWLINE, Framing, Separated
from blockgz.format.index import BlockIndex, Chunk

_FEED = 256 * 1024  # feed the decoder in slices so finding a member's end costs O(member)


def _members(view: memoryview, on_progress: Callable[[int], None] | None):
    """Yield ``(byte_offset, byte_length, uncompressed)`` for each gzip member."""
    pos, size = 0, len(view)
    while pos < size:
        decoder, consumed, parts = new_member_decoder(), 0, []
        while not decoder.eof:
            piece = view[pos + consumed : pos + consumed + _FEED]
            if not len(piece):
                raise CorruptBlockError(
                    f"gzip member at byte {pos} is truncated: the file ends inside it",
                    byte_offset=pos,
                )
            try:
                parts.append(decoder.decompress(piece))
            except Exception as exc:  # isal.IsalError or zlib.error
                raise CorruptBlockError(
                    f"gzip member at byte {pos} does not decompress ({exc})", byte_offset=pos
                ) from exc
            consumed += len(piece)
        consumed -= len(decoder.unused_data)
        yield pos, consumed, b"".join(parts)
        pos += consumed
        if on_progress is not None:
            on_progress(consumed)


def _ends_record(data: bytes, framing: Framing) -> bool:
    if isinstance(framing, Separated):
        return data.endswith(framing.separator)
    try:
        framing.split(data)
        return True
    except CorruptBlockError:
        return False


def scan_members(
    fileobj: BinaryIO,
    *,
    framing: Framing = NEWLINE,
    first_offset: int = 0,
    on_progress: Callable[[int], None] | None = None,
) -> BlockIndex:
    """Read the whole gzip stream once and return an index of record-aligned chunks."""
    try:
        mapped = mmap.mmap(fileobj.fileno(), 0, access=mmap.ACCESS_READ)
        view = memoryview(mapped)
    except (AttributeError, OSError, ValueError):  # not a real file, or empty
        mapped, view = None, memoryview(fileobj.read())
    try:
        return _scan(view, framing, first_offset, on_progress)
    finally:
        view.release()
        if mapped is not None:
            mapped.close()


def _scan(view, framing, first_offset, on_progress) -> BlockIndex:
    chunks: list[Chunk] = []
    offset = first_offset
    start = length = members = 0
    pending: list[bytes] = []
    for byte_offset, byte_length, data in _members(view, on_progress):
        if not members:
            start = byte_offset
        members += 1
        length += byte_length
        pending.append(data)
        if data and _ends_record(data, framing):
            block = b"".join(pending)
            count = framing.count(block)
            crc = block_crc32(view[start : start + length])
            chunks.append(Chunk(offset, count, start, length, len(block), None, members, crc32=crc))
            offset += count
            length = members = 0
            pending = []
    if members:  # tail: an unterminated last record, or empty members (a BGZF EOF marker)
        block = b"".join(pending)
        count = framing.count(block)
        if count:
            crc = block_crc32(view[start : start + length])
            chunks.append(Chunk(offset, count, start, length, len(block), None, members, crc32=crc))
        elif chunks:
            last = chunks.pop()
            chunks.append(
                Chunk(
                    last.first_record_offset,
                    last.num_records,
                    last.byte_offset,
                    last.byte_length + length,
                    last.byte_length_uncompressed,
                    None,
                    last.members + members,
                    crc32=block_crc32(view[last.byte_offset : start + length]),
                )
            )
    return BlockIndex(chunks, framing=framing)
