"""Turn the compressed bytes of one indexed block back into records, checking everything.

Shared by the local-file reader and the object-store reader: both fetch a chunk's
byte range, then call :func:`chunk_records`.

    >>> from blockgz.codec import Compression
    >>> from blockgz.index import BlockIndex, Chunk
    >>> raw = Compression().compress(b"a\\nb\\n")
    >>> chunk_records(raw, Chunk(7, 2, 0, len(raw), 4))
    [Record(offset=7, value=b'a'), Record(offset=8, value=b'b')]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import NamedTuple

from blockgz.codec import decompress_member, decompress_members
from blockgz.errors import CorruptBlockError, OffsetNotFoundError
from blockgz.framing import NEWLINE, Framing
from blockgz.index import BlockIndex, Chunk


class Record(NamedTuple):
    """One record read back: its Kafka offset and its bytes."""

    offset: int
    value: bytes


def inflate_chunk(
    raw: bytes | memoryview, chunk: Chunk, *, block: int = 0, source: str = ""
) -> bytes:
    """Decompress a chunk's bytes and check their size against the index."""
    where = (
        f"{source}: block {block} (offsets {chunk.first_record_offset}-{chunk.last_record_offset},"
        f" bytes {chunk.byte_offset}-{chunk.byte_end - 1})"
    )
    if len(raw) != chunk.byte_length:
        raise CorruptBlockError(
            f"{where}: read {len(raw)} bytes, the index promises {chunk.byte_length} (truncated?)",
            block=block,
            byte_offset=chunk.byte_offset,
        )
    try:
        data = decompress_member(raw) if chunk.members == 1 else decompress_members(raw)
    except CorruptBlockError as exc:
        raise CorruptBlockError(
            f"{where}: {exc}", block=block, byte_offset=chunk.byte_offset
        ) from exc
    if len(data) != chunk.byte_length_uncompressed:
        raise CorruptBlockError(
            f"{where}: decompressed to {len(data)} bytes, the index promises "
            f"{chunk.byte_length_uncompressed}",
            block=block,
            byte_offset=chunk.byte_offset,
        )
    return data


def chunk_records(
    raw: bytes | memoryview,
    chunk: Chunk,
    framing: Framing = NEWLINE,
    *,
    block: int = 0,
    source: str = "",
) -> list[Record]:
    """The records of one chunk, with their offsets; the count must match the index."""
    values = framing.split(inflate_chunk(raw, chunk, block=block, source=source))
    if len(values) != chunk.num_records:
        raise CorruptBlockError(
            f"{source}: block {block} holds {len(values)} records, the index promises "
            f"{chunk.num_records}",
            block=block,
            byte_offset=chunk.byte_offset,
        )
    return [Record(o, v) for o, v in zip(chunk.record_offsets(), values, strict=True)]


def seek_records(
    index: BlockIndex,
    block_records: Callable[[int], list[Record]],
    offset: int,
    count: int | None = None,
    *,
    source: str = "",
) -> Iterator[Record]:
    """Records from ``offset`` on, reading blocks through ``block_records(n)`` one at a time.

    Checks the offset eagerly (before the first block is read): one before the first
    offset or past the last raises :class:`OffsetNotFoundError` naming ``source``; one
    compacted away starts at the next offset that exists.
    """
    first = index.first_offset
    if first is not None and offset < first:
        raise OffsetNotFoundError(f"{source}: offset {offset} is before the first offset {first}")
    try:
        start = index.locate(offset)
    except OffsetNotFoundError as exc:
        raise OffsetNotFoundError(f"{source}: {exc}") from None
    return _records_from(index, block_records, start, offset, count)


def _records_from(index, block_records, start: int, offset: int, count: int | None):
    remaining = count
    for block in range(start, len(index.chunks)):
        records = block_records(block)
        if block == start:
            records = records[index.chunks[block].position_of(offset) :]
        if remaining is not None:
            records = records[:remaining]
            remaining -= len(records)
        yield from records
        if remaining == 0:
            return
