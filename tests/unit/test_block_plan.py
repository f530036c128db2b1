"""The one block planner and the range merging of the readers (:mod:`blockgz.blocks.plan`),
and that a seek and an archive read fetch neighbouring blocks with one range read."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blockgz.blocks.index import BlockIndex, Chunk
from blockgz.blocks.plan import (
    BlockRead,
    Span,
    fetched,
    merge_plans,
    merge_ranges,
    plan_blocks,
)
from blockgz.errors import OffsetNotFoundError
from blockgz.objects.indexed import FileRanges, IndexedReader
from blockgz.reader import open_archive
from blockgz.store import LocalStore
from blockgz.written.upload import BlockGzipUpload
from testkit.ranges import CountingRanges


# -- a random index: blocks of records with gaps between offsets and between blocks' bytes -----
@st.composite
def indexes(draw) -> BlockIndex:
    chunks, offset, at = [], draw(st.integers(0, 50)), 0
    for _ in range(draw(st.integers(1, 8))):
        deltas = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=6)))
        length = draw(st.integers(1, 40))
        chunks.append(Chunk(offset, len(deltas) + 1, at, length, 99, offset_deltas=deltas))
        offset += sum(deltas) + draw(st.integers(1, 4))
        at += length
    return BlockIndex(chunks)


def planned_offsets(reads: list[BlockRead]) -> list[int]:
    return [o for r in reads for o in r.chunk.record_offsets()[r.start : r.stop]]


@given(indexes(), st.integers(0, 120), st.one_of(st.none(), st.integers(0, 30)))
def test_the_plan_gives_exactly_the_records_from_the_offset_on(index, begin, count):
    every = [o for c in index.chunks for o in c.record_offsets()]
    if begin > every[-1]:
        with pytest.raises(OffsetNotFoundError):
            plan_blocks(index, begin, count)
        return
    wanted = [o for o in every if o >= begin][:count]
    reads = plan_blocks(index, begin, count)
    assert planned_offsets(reads) == wanted
    assert sum(r.records for r in reads) == len(wanted)
    if count:  # never a block more than needed
        assert reads[-1].records > 0


@given(indexes(), st.integers(0, 120))
def test_a_refused_block_is_left_out_and_its_records_not_counted(index, begin):
    def keep(chunk: Chunk) -> bool:
        return chunk.first_record_offset % 2 == 0

    kept = [c for c in index.chunks if keep(c)]
    every = [o for c in kept for o in c.record_offsets() if o >= begin]
    if begin > index.last_offset:
        return
    reads = plan_blocks(index, begin, 5, keep=keep)
    assert planned_offsets(reads) == every[:5]


def test_an_offset_before_the_first_starts_at_the_first_block():
    index = BlockIndex([Chunk(10, 5, 0, 9, 9), Chunk(15, 5, 9, 9, 9)])
    assert [(r.block, r.start, r.stop) for r in plan_blocks(index, 3, 7)] == [(0, 0, 7), (1, 0, 2)]


@given(
    indexes(),
    st.integers(0, 60),
    st.one_of(st.none(), st.integers(1, 120)),
    st.booleans(),
    st.data(),
)
def test_merged_ranges_keep_the_order_and_obey_the_gap_and_the_limit(
    index, gap, limit, first_alone, data
):
    numbers = sorted(data.draw(st.sets(st.integers(0, len(index.chunks) - 1), min_size=1)))
    reads = [BlockRead(n, index.chunks[n]) for n in numbers]
    spans = merge_ranges(reads, gap=gap, limit=limit, first_alone=first_alone)
    assert [r for s in spans for r in s.reads] == reads
    for span in spans:
        assert span.start == span.reads[0].chunk.byte_offset
        assert span.end == span.reads[-1].chunk.byte_end
        assert limit is None or len(span.reads) == 1 or span.end - span.start <= limit
        for left, right in itertools.pairwise(span.reads):
            assert 0 <= right.chunk.byte_offset - left.chunk.byte_end <= gap
    if first_alone:
        assert len(spans[0].reads) == 1
    for before, after in itertools.pairwise(spans):  # no two could have been one
        joined = after.reads[0].chunk
        too_far = joined.byte_offset - before.end > gap
        too_big = limit is not None and joined.byte_end - before.start > limit
        assert too_far or too_big or (first_alone and before is spans[0])


def test_blocks_out_of_file_order_are_never_merged_backwards():
    chunks = [Chunk(n, 1, n * 10, 10, 10) for n in range(3)]
    reads = [BlockRead(2, chunks[2]), BlockRead(0, chunks[0]), BlockRead(1, chunks[1])]
    assert [(s.start, s.end) for s in merge_ranges(reads)] == [(20, 30), (0, 20)]


def test_each_block_gets_its_own_bytes_out_of_a_merged_range():
    chunks = [Chunk(n, 1, n * 3, 2, 2) for n in range(3)]  # one byte between blocks
    calls: list[tuple[int, int]] = []

    def read(start: int, end: int) -> bytes:
        calls.append((start, end))
        return b"aa.bb.cc"[start:end]

    spans = merge_ranges([BlockRead(0, chunks[0]), BlockRead(2, chunks[2])], gap=4)
    assert spans == [Span(0, 8, (BlockRead(0, chunks[0]), BlockRead(2, chunks[2])))]
    assert [raw for _, raw in fetched(read, spans)] == [b"aa", b"cc"]
    assert calls == [(0, 8)]


def test_plans_of_several_objects_merge_each_apart_and_only_the_first_block_alone():
    chunks = [Chunk(n, 1, n * 10, 10, 10) for n in range(3)]
    whole = [BlockRead(n, chunks[n]) for n in range(3)]
    plans = iter([("streamed", None), ("a", whole), ("b", whole)])
    got = merge_plans(plans, first_alone=True)
    assert next(got) == ("streamed", None)  # lazy: one object's plan at a time
    # The first object was streamed, so no block of a later one is fetched alone.
    assert [(obj, s.start, s.end) for obj, s in got] == [("a", 0, 30), ("b", 0, 30)]


# -- the readers use it --------------------------------------------------------------------------
@pytest.fixture
def small_blocks(tmp_path):
    store = LocalStore(tmp_path)
    key = "topics/t/partition=0/t+0+0000000000.json.gz"
    with BlockGzipUpload(store, key, block_size=64) as out:
        for n in range(200):
            out.write(b'{"n":%d}' % n)
    return store, key


def test_a_seek_with_a_count_reads_its_neighbouring_blocks_at_once(small_blocks):
    store, key = small_blocks
    with IndexedReader.open_object(store, key) as obj:
        obj.ranges = ranges = CountingRanges(FileRanges(store.path(key)))
        got = [r.offset for r in obj.seek(20, count=50)]
        first, last = obj.index.locate(20), obj.index.locate(69)
    assert got == list(range(20, 70))
    assert last - first >= 5  # many blocks ...
    chunks = obj.index.chunks
    assert ranges.reads == [(chunks[first].byte_offset, chunks[last].byte_end)]  # ... one read


def test_an_open_ended_seek_reads_the_first_block_alone(small_blocks):
    store, key = small_blocks
    with IndexedReader.open_object(store, key) as obj:
        obj.ranges = ranges = CountingRanges(FileRanges(store.path(key)))
        records = obj.seek(20)
        assert next(records).offset == 20
        chunk = obj.index.chunks[obj.index.locate(20)]
        assert ranges.reads == [(chunk.byte_offset, chunk.byte_end)]
        assert [r.offset for r in records] == list(range(21, 200))
        assert len(ranges.reads) == 2  # the rest of the object is one range
        assert ranges.reads[1] == (chunk.byte_end, obj.index.byte_length)


def test_an_archive_read_fetches_neighbouring_blocks_with_one_ranged_get(small_blocks):
    store, _ = small_blocks
    with open_archive(str(store.root)) as archive:
        archive.index(archive.objects("t", 0)[0])  # listing and sidecar, counted apart
        counts = archive.store.requests
        before = counts.ranged_gets
        got = [r.offset for r in archive.seek("t", 0, 20, count=100)]
        assert got == list(range(20, 120))
        assert counts.ranged_gets - before == 1
        before = counts.ranged_gets
        assert [r.offset for r in archive.seek("t", 0, 0)] == list(range(200))
        assert counts.ranged_gets - before == 2  # the first block alone, then the rest
