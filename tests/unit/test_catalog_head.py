"""The catalog head (:mod:`blockgz.commits.head`): written at every manifest, it says what the
catalog view says, in one document."""

from __future__ import annotations

import pytest

from blockgz.archive.layout import Layout
from blockgz.commits import head as heads
from blockgz.commits.catalog import Catalog
from blockgz.commits.head import head_key, read_head, read_heads
from blockgz.commits.manifest_log import ManifestLog
from blockgz.reader.reading.catalog_source import find_jobs
from blockgz.store import LocalStore
from blockgz.written.files import WrittenFile


def _file(batch: int, records: int = 10) -> WrittenFile:
    start = batch * records
    key = f"topics/t/partition=0/t+0+{start:010d}.json"
    return WrittenFile(key, "t", 0, "partition=0", start, start + records - 1, records, 100, 100)


@pytest.fixture
def log(tmp_path) -> ManifestLog:
    return ManifestLog(LocalStore(tmp_path), "", Layout(), "job")


def _write(log: ManifestLog, batch: int) -> str:
    return log.write(batch, files=[_file(batch)], offsets={"t": {0: batch * 10 + 10}})


def _same(log: ManifestLog) -> None:
    """The head's root and manifests say what the catalog view (by listing) says."""
    head, view = read_head(log), Catalog(log).view()
    assert head is not None and head.through == log.keys()[-1]
    assert head.tail_keys == [i.key for i in view.tail_listed]
    assert [m.to_json() for m in head.manifests(log)] == [m.to_json() for m in view.tail]
    root_key = Catalog(log).root_keys()[-1] if view.root else ""
    assert head.root_key == root_key
    assert head.root_through == (view.root.through if view.root else "")


def test_the_head_follows_every_manifest_and_each_compaction(log):
    for batch in range(5):
        _write(log, batch)
        _same(log)
    Catalog(log).compact()
    _same(log)
    assert read_head(log).tail == () and read_head(log).root_json is not None  # root inline
    _write(log, 5)
    _write(log, 5)  # a replayed batch: the same key once
    _same(log)


def test_a_job_without_a_head_gets_one_that_holds_its_whole_history(log):
    for batch in range(3):
        _write(log, batch)
    Catalog(log).compact()
    _write(log, 3)
    log.store.delete(head_key(log))  # as written before heads existed
    _write(log, 4)
    _same(log)
    assert len(read_head(log).tail) == 2  # the two manifests after the root


def test_manifests_beyond_the_inline_budget_are_named_and_read(log, monkeypatch):
    monkeypatch.setattr(heads, "INLINE_BYTES", 1500)
    for batch in range(4):
        _write(log, batch)
    head = read_head(log)
    named = [key for key, body in head.tail if body is None]
    assert named and len(named) < len(head.tail)  # the oldest inline, the rest by key
    _same(log)


def test_a_head_is_not_built_from_a_history_longer_than_the_limit(log, monkeypatch):
    monkeypatch.setattr(heads, "BUILD_LIMIT", 2)
    for batch in range(3):
        _write(log, batch)
    log.store.delete(head_key(log))
    _write(log, 3)  # 4 manifests, no root: readers list them
    assert read_head(log) is None


def test_a_head_that_missed_a_manifest_is_rebuilt_not_extended_with_a_hole(log, monkeypatch):
    _write(log, 0)
    with monkeypatch.context() as m:  # batch 1's head write fails (a process killed, a 503)
        m.setattr(heads, "_put", _fail)
        _write(log, 1)
    assert read_head(log).through == log.key(0)
    _write(log, 2)
    _same(log)  # batches 0, 1 and 2
    log.write("batch-ab12", files=[], offsets={})  # a one-off batch write: no sequence
    _write(log, 3)
    _same(log)


def _fail(*_: object) -> None:
    raise OSError("no head this time")


@pytest.mark.parametrize("options", [{}, {"name": "job"}], ids=["every job", "named"])
def test_a_corrupt_head_is_passed_over_for_the_listing(tmp_path, options, caplog):
    from blockgz.reader import open_archive
    from testkit.archives import export_batches, input_records

    records = [r for r in input_records(40, partitions=1)]
    config = export_batches(str(tmp_path), records, "default", batches=3, every=100)
    log = config.manifest_log()
    log.store.put(head_key(log), b"{not json")
    with open_archive(str(tmp_path), options) as reader:
        got = [(r.offset, r.value) for r in reader.seek("ev", 0, records[10].offset)]
    assert got == [(r.offset, r.value) for r in records[10:]]
    assert "catalog heads not used" in caplog.text


def test_a_manifest_rewritten_since_the_head_is_read_by_a_reader_that_lists(log):
    from blockgz.commits.manifests import Manifest

    for batch in range(2):
        _write(log, batch)
    fewer = Manifest("job", "", "1", {"t": {0: 20}}, (), layout=Layout().to_dict())
    log.store.put(log.key(1), fewer.to_json())  # rewritten behind the head's back
    head, listed = read_head(log), log.listed()
    assert [len(m.files) for m in head.manifests(log, listed)] == [1, 0]  # the store's bytes
    assert [len(m.files) for m in head.manifests(log)] == [1, 1]  # the head's own copy


# -- the prefix's heads document: every job, each with its head -----------------------------------
def test_two_jobs_writing_in_turn_keep_both_heads(log, monkeypatch):
    other = ManifestLog(log.store, "", Layout(), "job2")
    seen: dict[str, dict] = {"job": {}, "job2": {}}  # two processes: each its own versions
    for batch in range(3):  # each write finds the version its process last saw replaced
        for job in (log, other):
            monkeypatch.setattr(heads, "_SEEN", seen[job.name])
            _write(job, batch)
    document = read_heads(log.store, "", Layout())
    assert sorted(document.jobs) == ["job", "job2"]
    _same(log)
    _same(other)
    assert [j.export.name for j in find_jobs(log.store, "")] == ["job", "job2"]


def test_the_heads_document_names_the_jobs_it_finds_there(log):
    from blockgz.commits.manifests import Manifests

    older = Manifests(log.store, "", Layout(), "older")  # written by a version without heads
    older.write(0, files=[_file(0)], offsets={"t": {0: 10}})
    _write(log, 0)
    document = read_heads(log.store, "", Layout())
    assert document.jobs["older"] is None and document.jobs["job"] is not None  # older: by listing
    found = {j.export.name: j for j in find_jobs(log.store, "")}
    assert sorted(found) == ["job", "older"]
    assert found["older"].behind is None and found["job"].behind == log.key(0)


def test_a_job_is_named_in_the_heads_document_before_its_first_manifest(log, monkeypatch):
    _write(ManifestLog(log.store, "", Layout(), "job2"), 0)  # the document names job2
    monkeypatch.setattr(heads, "_put", _fail)
    with pytest.raises(OSError, match="no head this time"):
        _write(log, 0)
    assert log.keys() == []  # not committed unseen by the readers that trust the document


@pytest.mark.parametrize("options", [{}, {"name": "job"}], ids=["every job", "named"])
def test_a_manifest_the_head_names_that_is_gone_is_refused_when_the_read_goes_past_it(
    tmp_path, options
):
    from blockgz.errors import MissingCommitError
    from blockgz.reader import open_archive
    from testkit.archives import export_batches, input_records

    records = list(input_records(40, partitions=1))
    config = export_batches(str(tmp_path), records, "default", batches=3, every=100)
    log = config.manifest_log()
    gone = log.keys()[-1]
    log.store.delete(gone)  # the newest: no hole in the sequence left behind it
    with open_archive(str(tmp_path), options) as reader:
        first = records[0].offset
        assert next(reader.seek("ev", 0, first, count=1)).offset == first  # inside the head
        with pytest.raises(MissingCommitError, match=gone.rsplit("/", 1)[1]):
            list(reader.seek("ev", 0, first))  # to the partition's end: listed, checked
