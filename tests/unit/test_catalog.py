"""The catalog: a compacted manifest log, exact and bounded in requests however long the history."""

from __future__ import annotations

import logging

import pytest

from blockgz.archive.layout import Layout
from blockgz.archive.partition_offsets import Offsets, merge_offsets
from blockgz.commits import catalog as catalog_module
from blockgz.commits.catalog import KEEP_ROOTS, Catalog, compact_every
from blockgz.commits.manifest_log import ManifestLog
from blockgz.store import LocalStore
from blockgz.written.files import WrittenFile

PARTITIONS = 3


def file_of(topic: str, partition: int, first: int, last: int, encoded: str = "") -> WrittenFile:
    encoded = encoded or f"partition={partition}"
    key = f"topics/{topic}/{encoded}/{topic}+{partition}+{first:010d}.json"
    return WrittenFile(key, topic, partition, encoded, first, last, last - first + 1, 10, 10)


def write_history(log: ManifestLog, batches: int, *, every: int, start: int = 0) -> None:
    """``batches`` manifests of 3 partitions x 10 records, compacting as the export does."""
    for batch in range(start, start + batches):
        files, offsets = [], {}
        for p in range(PARTITIONS):
            first = batch * 10
            files.append(file_of("t", p, first, first + 9))
            offsets[p] = first + 10
        log.write(batch, files=files, offsets={"t": offsets}, skipped_nulls=1)
        compact_every(log, batch, every)


@pytest.fixture
def log(tmp_path) -> ManifestLog:
    return ManifestLog(LocalStore(tmp_path), "", Layout(), "job")


def brute_force(log: ManifestLog) -> tuple[Offsets, dict[tuple[str, int], list[WrittenFile]]]:
    offsets: Offsets = {}
    files: dict[tuple[str, int], dict[str, WrittenFile]] = {}
    for manifest in log.manifests():
        merge_offsets(offsets, manifest.offsets)
        for f in manifest.files:
            files.setdefault((f.topic, f.partition), {})[f.key] = f
    return offsets, {
        tp: sorted(found.values(), key=lambda f: (f.first_offset, f.key))
        for tp, found in files.items()
    }


def test_a_long_history_is_read_in_a_bounded_number_of_requests(log):
    write_history(log, 2_050, every=100)
    store = log.store
    before = (store.requests.lists, store.requests.gets)
    offsets = log.committed_offsets()
    lists, gets = store.requests.lists - before[0], store.requests.gets - before[1]
    # 1 LIST of roots, 1 GET of the newest, 1 LIST of the manifests after it, 50 GETs of those
    assert (lists, gets) == (2, 1 + 50)
    assert offsets == {"t": {p: 20_500 for p in range(PARTITIONS)}}
    view = Catalog(log).view()
    assert view.root is not None and view.root.manifests == 2_000 and len(view.tail) == 50
    assert view.root.skipped_nulls == 2_000


def test_the_view_says_exactly_what_the_manifests_say(log, monkeypatch):
    monkeypatch.setattr(catalog_module, "SEGMENT_FILES", 64)  # many segments per partition
    write_history(log, 700, every=50)
    # A lost checkpoint: a later batch writes an object again under its deterministic key.
    log.write(700, files=[file_of("t", 0, 3330, 3339)], offsets={"t": {0: 3340}})
    expected_offsets, expected_files = brute_force(log)
    view = Catalog(log).view()
    assert view.offsets == expected_offsets
    for p in range(PARTITIONS):
        assert view.files("t", p) == expected_files[("t", p)]
    assert view.partitions() == [("t", p) for p in range(PARTITIONS)]


def test_finding_an_offset_reads_only_the_segments_that_reach_it(log, monkeypatch):
    monkeypatch.setattr(catalog_module, "SEGMENT_FILES", 64)
    write_history(log, 1_000, every=100)
    view = Catalog(log).view()
    assert view.root is not None and len(view.root.segments["t"][0]) == 1_000 // 64 + 1
    store = log.store
    gets = store.requests.gets
    files = view.files("t", 0, from_offset=9_985)
    assert [f.first_offset for f in files] == [9_980, 9_990]
    assert store.requests.gets - gets == 1  # the last segment only


def test_old_roots_and_the_segments_only_they_used_are_deleted(log, monkeypatch, tmp_path):
    monkeypatch.setattr(catalog_module, "SEGMENT_FILES", 16)
    write_history(log, 400, every=20)
    catalog = Catalog(log)
    roots = catalog.root_keys()
    assert len(roots) == KEEP_ROOTS
    in_use = set().union(*(catalog._read_root(k).segment_keys() for k in roots))
    on_disk = {info.key for info in log.store.list(catalog.segments_prefix)}
    assert on_disk == in_use


def test_compacting_again_with_nothing_new_writes_nothing(log, tmp_path):
    write_history(log, 30, every=0)
    catalog = Catalog(log)
    first = catalog.compact()
    objects = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert catalog.compact() == first
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == objects


def test_a_failed_compaction_is_logged_and_the_manifests_still_answer(log, monkeypatch, caplog):
    write_history(log, 9, every=0)

    def broken(self):
        raise OSError("disk full")

    monkeypatch.setattr(Catalog, "compact", broken)
    with caplog.at_level(logging.WARNING, logger="blockgz.commits.catalog"):
        assert compact_every(log, 9, 10) is None
    assert "compaction after batch 9 failed (disk full)" in caplog.text
    assert log.committed_offsets() == {"t": {p: 90 for p in range(PARTITIONS)}}


def test_compaction_runs_only_at_the_end_of_an_interval(log):
    write_history(log, 3, every=0)
    assert compact_every(log, 1, 3) is None and Catalog(log).root_keys() == []
    assert compact_every(log, 2, 3) is not None and len(Catalog(log).root_keys()) == 1
    assert compact_every(log, "batch-abc", 3) is None  # a batch write's id: never
