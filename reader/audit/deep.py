"""``blockgz audit --deep``: every block of one object read once and checked.

A block whose index chunk has a ``crc32`` (:mod:`blockgz.blocks.checksum`) is checked by the
CRC-32 of its stored bytes: one pass at memory speed, no decompression, and it catches any
changed byte, even one that still inflates. A block without it (an index written before the
checksum, DeviantArt's) is decompressed: its gzip trailer's CRC-32 and length, the size the
index promises and its record count are checked; an Avro block is decoded alone (count and
sync marker). An Avro file's header must also match the index's Avro section.

The object is read in merged byte ranges of up to :data:`SPAN_BYTES` each, in order: the archive
is read once, one ranged GET per span. Given an executor, the blocks of a span are checked on
its threads (every codec and the CRC release the GIL) while the next span is fetched.

>>> import tempfile
>>> from blockgz.written.upload import BlockGzipUpload
>>> from blockgz.store import LocalStore
>>> store = LocalStore(tempfile.mkdtemp())
>>> with BlockGzipUpload(store, "t+0+0000000000.json.gz", block_size=64) as out:
...     for n in range(50):
...         out.write(b'{"n":%d}' % n)
>>> index = out.index
>>> check_blocks(store, "t+0+0000000000.json.gz", index)
[]
>>> data = bytearray(store.get("t+0+0000000000.json.gz")); data[100] ^= 1
>>> store.put("t+0+0000000000.json.gz", bytes(data))
>>> [(chunk.first_record_offset, problem[:41]) for chunk, problem in check_blocks(
...     store, "t+0+0000000000.json.gz", index)]
[(15, 'block 2 (bytes 97..145): CRC-32 of the st')]
"""

from __future__ import annotations

import zlib
from concurrent.futures import Executor

from blockgz.blocks.avro.block_read import avro_block_bytes, header_problems, read_avro_header
from blockgz.blocks.checksum import block_crc32
from blockgz.blocks.decode import inflate_chunk
from blockgz.blocks.framing import Separated
from blockgz.blocks.index import BlockIndex, Chunk
from blockgz.blocks.plan import BlockRead, fetched, merge_ranges, prefetched
from blockgz.errors import BlockGzError
from blockgz.store.base import ObjectStore

#: The most bytes one ranged GET of a deep audit asks for.
SPAN_BYTES = 8 * 1024 * 1024
#: Blocks checked at once (on the executor) ahead of the one reported.
WINDOW = 8


def check_blocks(
    store: ObjectStore,
    key: str,
    index: BlockIndex,
    executor: Executor | None = None,
    *,
    crcs: dict[int, int] | None = None,
) -> list[tuple[Chunk | None, str]]:
    """Read every block of ``key`` once and check it; each bad block's chunk (``None``: the
    Avro header) and one line saying what is wrong with it (empty: every block is intact).
    ``crcs``: filled with each block's CRC-32 by block number (the whole object's CRC is
    made of them: :func:`blockgz.reader.audit.integrity.whole_crc`)."""
    problems: list[tuple[Chunk | None, str]] = []
    if index.avro is not None:
        try:
            header = read_avro_header(store.get_range(key, 0, index.avro.header_length))
            problems += [(None, f"Avro header: {p}") for p in header_problems(header, index.avro)]
        except BlockGzError as exc:
            problems.append((None, f"Avro header: {exc}"))
    reads = [BlockRead(n, chunk) for n, chunk in enumerate(index.chunks)]
    spans = merge_ranges(reads, gap=0, limit=SPAN_BYTES)
    blocks = fetched(lambda a, b: store.get_range(key, a, b), spans, executor=executor, ahead=1)

    def check(pair: tuple[BlockRead, bytes]) -> tuple[BlockRead, str | None]:
        read, raw = pair
        if crcs is not None:
            crcs[read.block] = block_crc32(raw)  # dict stores are atomic; one key per block
        return read, block_problem(raw, read.block, read.chunk, index)

    # A bounded window of blocks in flight: memory stays a few spans, whatever the object's size.
    checked = (result for _, result in prefetched(blocks, check, executor, WINDOW))
    for read, problem in checked:
        if problem is not None:
            problems.append(
                (read.chunk, f"block {read.block} (bytes {_bytes(read.chunk)}): {problem}")
            )
    return problems + stamp_problems(index, key)


def stamp_problems(index: BlockIndex, key: str) -> list[tuple[Chunk | None, str]]:
    """The chunks whose kept timestamps (issue 44, :mod:`blockgz.blocks.stamps`) do not hold
    one entry per record of the block, or fall outside its ``min/max_timestamp``; a chunk
    that keeps none (older sidecars) has nothing to check.

    >>> import numpy as np
    >>> from dataclasses import replace
    >>> idx = BlockIndex([Chunk(0, 2, 0, 9, 9, min_timestamp=5, max_timestamp=6)])
    >>> idx = idx.with_stamps(np.array([5, 6]), np.array([0, 0]), np.array([0, 1]))
    >>> stamp_problems(idx, "k")
    []
    >>> bad = BlockIndex([replace(idx.chunks[0], num_records=3)])
    >>> stamp_problems(bad, "k")[0][1]
    'block 0: k chunk 0: a chunk of 3 records keeps 2 timestamps and 3 timestamp types'
    """
    problems: list[tuple[Chunk | None, str]] = []
    for block, chunk in enumerate(index.chunks):
        if chunk.stamps is None:
            continue
        try:
            stamps, _ = index.block_stamps(block, source=key)
        except BlockGzError as exc:
            problems.append((chunk, f"block {block}: {exc}"))
            continue
        kept = stamps[stamps >= 0]
        if (
            chunk.min_timestamp is not None
            and kept.size
            and (int(kept.min()) != chunk.min_timestamp or int(kept.max()) != chunk.max_timestamp)
        ):
            problems.append(
                (
                    chunk,
                    f"block {block}: its timestamps run {int(kept.min())}..{int(kept.max())}, "
                    f"the chunk says {chunk.min_timestamp}..{chunk.max_timestamp}",
                )
            )
    return problems


def block_problem(
    raw: bytes | memoryview, block: int, chunk: Chunk, index: BlockIndex
) -> str | None:
    """What is wrong with one block's stored bytes ``raw``, or ``None``."""
    if len(raw) != chunk.byte_length:
        return f"read {len(raw)} bytes, the index promises {chunk.byte_length} (truncated?)"
    if chunk.crc32 is not None:
        got = block_crc32(raw)
        if got != chunk.crc32:
            return f"CRC-32 of the stored bytes is {got:#010x}, the index says {chunk.crc32:#010x}"
        return None  # the bytes are those written: nothing more to learn by decoding
    try:
        if index.avro is not None:
            avro_block_bytes(raw, chunk, index.avro, block=block)
            return None
        data = inflate_chunk(raw, chunk, block=block)
    except (BlockGzError, zlib.error, EOFError, ValueError) as exc:
        text = str(exc)  # "<source>: block N (offsets, bytes): what": keep what
        return text.partition("): ")[2] or text
    if chunk.num_records:
        framing = index.framing
        if isinstance(framing, Separated) and data.endswith(framing.separator):
            count = framing.count_terminated(data)  # numpy, GIL released
        else:
            count = framing.count(data)
        if count != chunk.num_records:
            return f"holds {count} records, the index says {chunk.num_records}"
    return None


def _bytes(chunk: Chunk) -> str:
    return f"{chunk.byte_offset}..{chunk.byte_end - 1}"
