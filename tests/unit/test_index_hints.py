"""A repeat plan of a partition starts the index GET beside the listing (``index_hints``), and
the plan is still the fresh listing's."""

from __future__ import annotations

import threading
import time

import pytest

from blockgz.objects.upload import BlockGzipUpload
from blockgz.reader import index_hints, open_archive
from blockgz.reader.scan_plan import ScanFilter, plan_scan
from blockgz.store.local import LocalStore

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
