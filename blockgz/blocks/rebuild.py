"""Rebuild an index for any multi-member gzip, or any multi-frame zstd file, by walking its
member (frame) boundaries.

Works on files from ``pigz``, ``bgzip``, Python's ``gzip`` or another block-GZIP
writer, and on block-zstd or other zstd files (a seekable-format seek table at the end is kept
and described by the index). Members whose data does not end on a record boundary (``bgzip``
cuts every 64 KiB regardless of lines) are grouped with the following ones until it does, so
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

from blockgz.blocks.checksum import block_crc32
from blockgz.blocks.codecs.families import GZIP, BlockCodec, sniff
from blockgz.blocks.framing import NEWLINE, Framing, Separated
from blockgz.blocks.index import BlockIndex, Chunk
from blockgz.errors import CorruptBlockError


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
    """Read the whole gzip (or zstd) file once and return an index of record-aligned chunks;
    which of the two, its first bytes say."""
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
    family: BlockCodec = sniff(bytes(view[:4])) or GZIP
    trailer = family.trailer_length(view)
    chunks: list[Chunk] = []
    offset = first_offset
    start = length = members = 0
    pending: list[bytes] = []
    for byte_offset, byte_length, data in family.walk(view, on_progress):
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
        else:  # only empty members (an empty input compressed): the object's trailer
            trailer += length
    codec = None if family is GZIP else family.codecs[0]
    return BlockIndex(chunks, framing=framing, codec=codec, trailer_length=trailer)
