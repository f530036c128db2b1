"""Turn the compressed bytes of one indexed block back into records, checking everything.

Shared by the local-file reader and the object-store reader: both fetch a chunk's
byte range, then call :func:`chunk_records`.

    >>> from blockgz.codec import Compression
    >>> from blockgz.index import Chunk
    >>> raw = Compression().compress(b"a\\nb\\n")
    >>> chunk_records(raw, Chunk(7, 2, 0, len(raw), 4))
    [Record(offset=7, value=b'a'), Record(offset=8, value=b'b')]
"""

from __future__ import annotations

from typing import NamedTuple

from blockgz.codec import decompress_member, decompress_members
from blockgz.errors import CorruptBlockError
from blockgz.framing import NEWLINE, Framing
from blockgz.index import Chunk


class Record(NamedTuple):
    """One record read back: its Kafka offset and its bytes."""

    offset: int
    value: bytes


def inflate_chunk(
    raw: bytes | memoryview, chunk: Chunk, *, block: int = 0, source: str = ""
) -> bytes:
    """Decompress a chunk's bytes and check their size against the index."""
    where = f"{source}: block {block} (bytes {chunk.byte_offset}-{chunk.byte_end - 1})"
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
