"""A repeat plan of a partition starts the index GET beside the listing (``index_hints``), and
the plan is still the fresh listing's."""

from __future__ import annotations

import threading
import time

import pytest

from blockgz.reader import open_archive
from blockgz.reader.reading import index_hints
from blockgz.reader.spark.scan_plan import ScanFilter, plan_scan
from blockgz.store.local import LocalStore
from blockgz.written.upload import BlockGzipUpload

LIST_S = 0.2


class SlowListing(LocalStore):
    """A local store whose listings take ``LIST_S`` (a round trip), logging each request."""

    def __init__(self, root):
        super().__init__(root)
        self.log: list[tuple[str, str, float]] = []
        self.lock = threading.Lock()

    def _note(self, what: str, key: str) -> None:
        with self.lock:
            self.log.append((what, key, time.monotonic()))

    def list(self, prefix, **kwargs):
        self._note("list", prefix)
        found = list(super().list(prefix, **kwargs))
        time.sleep(LIST_S)
        self._note("listed", prefix)
        return iter(found)

    def get(self, key):
        self._note("get", key)
        return super().get(key)


def _write(root, start: int, count: int) -> None:
    key = f"topics/ev/partition=0/ev+0+{start:010d}.json.gz"
    with BlockGzipUpload(LocalStore(root), key, block_size=4096, first_offset=start) as out:
        for i in range(count):
            out.write(b'{"n":%d,"pad":"%s"}' % (start + i, b"x" * 200), start + i)


def _plan(root, low: int, high: int):
    store = SlowListing(root)
    with open_archive(str(root)) as archive:
        archive.locator.store = store
        splits = plan_scan(archive, ScanFilter().with_range("offset", low=low, high=high),
                           topics=["ev"])  # fmt: skip
    pieces = [(p.ref.key, tuple(n for n, _ in p.chunks)) for s in splits for p in s.pieces]
    return pieces, store.log


def _index_get_before_listing_ended(log) -> bool:
    listed = min(t for what, _, t in log if what == "listed")
    return any(what == "get" and key.endswith(".index.json") and t < listed for what, key, t in log)


@pytest.fixture(autouse=True)
def fresh_hints(monkeypatch):
    monkeypatch.setattr(index_hints, "HINTS", index_hints.IndexHints())


def test_a_repeat_plan_fetches_the_index_while_the_listing_runs(tmp_path):
    _write(tmp_path, 0, 400)
    _write(tmp_path, 400, 400)
    first, log = _plan(tmp_path, 500, 509)
    assert not _index_get_before_listing_ended(log), "no hint yet: listing, then the index"
    again, log = _plan(tmp_path, 500, 509)
    assert again == first and first[0][0].endswith("ev+0+0000000400.json.gz")
    assert _index_get_before_listing_ended(log)
    assert sum(key.endswith(".index.json") for what, key, _ in log if what == "get") == 1


def test_a_wrong_hint_costs_a_get_but_the_plan_follows_the_fresh_listing(tmp_path):
    _write(tmp_path, 0, 400)
    _write(tmp_path, 400, 400)
    _plan(tmp_path, 500, 509)  # remembers 400 as the object holding 500
    _write(tmp_path, 450, 400)  # a later listing also finds an object starting at 450
    got, log = _plan(tmp_path, 500, 509)
    assert got[0][0].endswith("ev+0+0000000450.json.gz")
    index_gets = [key for what, key, _ in log if what == "get" and key.endswith(".index.json")]
    assert len(index_gets) == 2 and "0000000400" in index_gets[0]  # the guess, then the right one
    index_hints.HINTS = index_hints.IndexHints()  # no hint: the plan is the same
    assert _plan(tmp_path, 500, 509)[0] == got


def test_a_local_directory_gets_no_speculation(tmp_path):
    _write(tmp_path, 0, 400)
    with open_archive(str(tmp_path)) as archive:
        index_hints.HINTS.remember(archive.store.url(archive.prefix), "ev", 0,
                                   archive.objects("ev", 0))  # fmt: skip
        assert index_hints.speculate(archive, "ev", 0, 10) is None


def _gets(log, suffix: str) -> list[tuple[str, float]]:
    return [(key, t) for what, key, t in log if what == "get_range" and key.endswith(suffix)]


class SlowListingRanges(SlowListing):
    """:class:`SlowListing` that also logs ranged GETs."""

    def get_range(self, key, start, end):
        self._note("get_range", key)
        return super().get_range(key, start, end)


def _plan_and_read(root, low: int, high: int):
    from blockgz.reader.spark.scan_read import split_batches

    store = SlowListingRanges(root)
    with open_archive(str(root)) as archive:
        archive.locator.store = store
        scan = ScanFilter().with_range("offset", low=low, high=high)
        splits = plan_scan(archive, scan, topics=["ev"])
        planned = list(store.log)
        offsets = [
            o
            for s in splits
            for batch in split_batches(archive, s, scan.offsets)
            for o in batch.column("offset").to_pylist()
        ]
    return splits, planned, store.log[len(planned) :], offsets


def test_a_repeat_plan_fetches_the_blocks_while_the_listing_runs_and_the_task_reads_none(tmp_path):
    _write(tmp_path, 0, 400)
    _write(tmp_path, 400, 400)
    first, planned, read, offsets = _plan_and_read(tmp_path, 500, 509)
    assert offsets == list(range(500, 510))
    assert not first[0].pieces[0].prefetched and _gets(read, ".json.gz"), "no hint: the task GETs"
    again, planned, read, offsets = _plan_and_read(tmp_path, 500, 509)
    assert offsets == list(range(500, 510))
    piece = again[0].pieces[0]
    listed = min(t for what, _, t in planned if what == "listed")
    assert [t < listed for _, t in _gets(planned, ".json.gz")] == [True]  # beside the listing
    assert _gets(read, ".json.gz") == []  # the task reads the bytes the plan carries
    first_chunk = piece.chunks[0][1]
    assert piece.prefetched_at == first_chunk.byte_offset
    assert piece.prefetched == LocalStore(tmp_path).get_range(
        piece.ref.key, first_chunk.byte_offset, piece.chunks[-1][1].byte_end
    )


def test_blocks_fetched_on_a_stale_hint_are_dropped_and_the_task_reads_the_fresh_object(tmp_path):
    _write(tmp_path, 0, 400)
    _write(tmp_path, 400, 400)
    _plan_and_read(tmp_path, 500, 509)  # remembers what 500..509 read
    _write(tmp_path, 400, 300)  # the object is rewritten: other size, other blocks
    again, _, read, offsets = _plan_and_read(tmp_path, 500, 509)
    assert offsets == list(range(500, 510))
    assert not again[0].pieces[0].prefetched and _gets(read, ".json.gz")


def test_a_cut_piece_carries_no_prefetched_bytes():
    from blockgz.blocks.index import Chunk
    from blockgz.reader.spark.scan_plan import Piece, _cut

    ref = index_hints._Ref("k", 0)
    chunks = tuple((n, Chunk(n * 10, 10, n * 100, 100, 400)) for n in range(4))
    piece = Piece(ref, "t", 0, chunks, prefetched=b"x" * 400)  # type: ignore[arg-type]
    parts = _cut(piece, 250)
    assert len(parts) == 2 and all(p.prefetched == b"" for p in parts)
