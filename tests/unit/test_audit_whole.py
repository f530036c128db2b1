"""Issue 41, "one audit": a deleted manifest, a foreign object, a swapped object, a tampered
sidecar, each one line, on local archives written by the sink's write task; ``--repair``
re-commits what a deleted manifest committed, when the objects prove themselves."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from blockgz.archive.layout import Layout
from blockgz.cli import main
from blockgz.commits.catalog import Catalog
from blockgz.commits.manifest_log import ManifestLog
from blockgz.commits.manifest_sequence import missing_manifests
from blockgz.errors import ArchiveIntegrityError, MissingCommitError
from blockgz.reader import open_archive
from blockgz.reader.audit.auditor import audit_job
from blockgz.reader.audit.findings import DAMAGE, WARNING
from blockgz.sink.records import KafkaRecord
from blockgz.store import LocalStore
from blockgz.written.sidecars import sidecar_key
from testkit.archives import build_partition, export_batches


def _key(start: int, partition: int = 0, topic: str = "ev") -> str:
    return f"topics/{topic}/partition={partition}/{topic}+{partition}+{start:010d}.json.gz"


def _records(topic: str = "ev", count: int = 60) -> list[KafkaRecord]:
    return [
        KafkaRecord(topic, p, n, 1_700_000_000_000 + n, None, b'{"n":%d,"p":%d}' % (n, p))
        for p in (0, 1)
        for n in range(count)
    ]


def _archive(root, **extra) -> tuple[LocalStore, ManifestLog]:
    export_batches(str(root), _records(), "default", batches=3, **{"flush.size": "7", **extra})
    store = LocalStore(root)
    return store, ManifestLog(store, "", Layout(), "job")


@pytest.fixture
def archive(tmp_path):
    """ev-0 and ev-1, offsets 0..59, 3 batches (manifests 0, 1, 2) of 20 offsets each."""
    return _archive(tmp_path / "a")


def kinds(report) -> list[tuple[str, int, str | None]]:
    return [(f.kind, f.level, f.key) for f in report.findings]


# -- the manifest sequence ---------------------------------------------------------------------
def _keys(*batches, epoch: str = "") -> list[str]:
    return [Layout().manifest_key("", "j", b, epoch=epoch) for b in batches]


@pytest.mark.parametrize(
    ("keys", "missing"),
    [
        (_keys(0, 1, 2), []),
        (_keys(1, 2), _keys(0)),  # the first batch deleted
        (_keys(0, 2, 5), _keys(1, 3, 4)),
        (_keys(0, 1, epoch="e1") + _keys(0, 1, epoch="e2"), []),  # a lost checkpoint
        (_keys(0, 1, epoch="e1") + _keys(2, 3, epoch="e2"), []),  # e2 continues e1's numbers
        (_keys(0, 1, epoch="e1") + _keys(3, 4, epoch="e2"), _keys(0, 1, 2, epoch="e2")),
        ([*_keys(0, 2), Layout().manifest_key("", "j", "batch-ab12")], _keys(1)),
    ],
    ids=["whole", "first", "middle", "new epoch", "continued", "not continued", "batch ids"],
)
def test_missing_manifests_in_a_sequence(keys, missing):
    assert missing_manifests(sorted(keys), Layout(), "", "j") == missing


def test_after_a_root_only_the_tail_is_asked_about():
    keys = _keys(5, 7, epoch="e1")
    assert missing_manifests(keys, Layout(), "", "j", after=_keys(3, epoch="e1")[0]) == _keys(
        4, 6, epoch="e1"
    )


# -- a deleted manifest --------------------------------------------------------------------------
def test_a_deleted_manifest_is_one_line_naming_it_and_repair_recommits(archive):
    store, log = archive
    gone = log.key(1)
    store.delete(gone)
    report = audit_job(log)
    assert report.exit_code == 2
    assert kinds(report) == [("missing_manifest", DAMAGE, gone)]  # not one line per object
    line = report.findings[0].line()
    assert line.startswith(f"damage: {gone}: the manifest is gone from the job's sequence")
    assert "6 objects (ev-0 offsets 20..39, ev-1 offsets 20..39)" in line

    with open_archive(str(store.root)) as reader:  # readers: an error naming it, no silent loss
        with pytest.raises(MissingCommitError, match=f"{gone}: this manifest of export 'job'"):
            list(reader.seek("ev", 0, 0))
        with pytest.raises(MissingCommitError, match="the archive has a missing commit"):
            list(reader.records("ev"))

    repaired = audit_job(log, do_repair=True)
    assert repaired.findings[0].repair == "repaired: re-committed 6 files that prove themselves"
    with open_archive(str(store.root)) as reader:
        assert sorted((p, r.offset) for p, r in reader.records("ev")) == [
            (p, n) for p in (0, 1) for n in range(60)
        ]
    assert repaired.exit_code == 0
    again = audit_job(log, deep=True)
    assert (again.exit_code, again.findings) == (0, [])
    files = Catalog(log).view().files("ev", 0)
    assert [f.first_offset for f in files] == [0, 7, 14, 20, 27, 34, 40, 47, 54]
    assert all(f.crc32 is not None for f in files)


def test_a_deleted_manifest_whose_objects_do_not_prove_themselves_is_not_recommitted(archive):
    store, log = archive
    store.delete(log.key(1))
    key = _key(27)
    data = bytearray(store.get(key))
    data[len(data) // 2] ^= 0x10  # same size, other bytes: its sidecar's CRC-32 no longer fits
    store.put(key, bytes(data))
    report = audit_job(log, do_repair=True)
    assert report.findings[0].kind == "missing_manifest"
    assert "left out " + key in report.findings[0].repair
    committed = {f.key for f in Catalog(log).view().files("ev", 0)}
    assert key not in committed and _key(20) in committed
    assert audit_job(log).exit_code == 1  # the one left out is now an uncommitted object


def test_a_manifest_gone_after_the_catalog_folded_it_is_a_warning(tmp_path):
    store, log = _archive(tmp_path / "a", **{"blockgz.catalog.every": "3"})
    assert Catalog(log).latest_root() is not None
    store.delete(log.key(1))
    report = audit_job(log)
    assert kinds(report) == [("missing_manifest", WARNING, log.key(1))]
    assert "still committed through the catalog" in report.findings[0].message


# -- objects that are not what was committed ------------------------------------------------------
def test_another_topics_object_in_the_folder_is_damage(archive, tmp_path):
    store, log = archive
    other = LocalStore(tmp_path / "b")
    export_batches(str(tmp_path / "b"), _records("pay"), "default", batches=1)
    foreign = "topics/ev/partition=0/pay+0+0000000000.json.gz"
    store.put(foreign, other.get(_key(0, topic="pay")))
    store.put(sidecar_key(foreign), other.get(sidecar_key(_key(0, topic="pay"))))
    report = audit_job(log)
    assert kinds(report) == [("foreign_object", DAMAGE, foreign)]
    assert "is pay-0's object (by its name) in topics/ev/partition=0/" in report.findings[0].line()


def test_another_partitions_object_in_the_folder_is_damage(archive):
    store, log = archive
    misplaced = "topics/ev/partition=0/ev+1+0000000100.json.gz"
    store.put(misplaced, store.get(_key(0, 1)))
    report = audit_job(log)
    assert kinds(report) == [("foreign_object", DAMAGE, misplaced)]
    assert report.findings[0].partition == 0


def test_a_swapped_object_and_sidecar_are_caught_without_reading_data(archive):
    store, log = archive
    store.put(_key(20), store.get(_key(20, 1)))  # same offsets and size, the other partition's
    store.put(sidecar_key(_key(20)), store.get(sidecar_key(_key(20, 1))))
    report = audit_job(log)
    assert kinds(report) == [("sidecar_mismatch", DAMAGE, _key(20))]
    assert f"names key {_key(20, 1)}" in report.findings[0].message
    deep = audit_job(log, deep=True)
    assert kinds(deep) == [
        ("sidecar_mismatch", DAMAGE, _key(20)),
        ("checksum_mismatch", DAMAGE, _key(20)),
    ]


def test_a_swapped_object_alone_is_caught_by_a_deep_audit(archive):
    store, log = archive
    store.put(_key(27), store.get(_key(27, 1)))
    assert audit_job(log).exit_code == 0  # same size; this store keeps no checksums
    deep = audit_job(log, deep=True)  # its blocks' CRC-32s are not those its sidecar says
    assert deep.exit_code == 2 and {k for k in kinds(deep)} == {("corrupt_block", 2, _key(27))}
    assert "CRC-32 of the stored bytes" in deep.findings[0].message


def test_a_tampered_sidecar_is_damage_and_repair_rebuilds_it(archive):
    store, log = archive
    doc = json.loads(store.get(sidecar_key(_key(14))))
    doc["chunks"][0]["min_timestamp"] -= 1000  # records of a time window would be skipped
    store.put(sidecar_key(_key(14)), json.dumps(doc).encode())
    report = audit_job(log)
    assert kinds(report) == [("sidecar_mismatch", DAMAGE, _key(14))]
    assert "is not the one committed: it is " in report.findings[0].message
    with open_archive(str(store.root)) as reader, pytest.raises(ArchiveIntegrityError):
        list(reader.seek("ev", 0, 14))
    repaired = audit_job(log, do_repair=True)
    assert repaired.findings[0].repair.startswith("repaired: rebuilt")
    assert audit_job(log, deep=True).findings == []
    with open_archive(str(store.root)) as reader:  # the rebuilt sidecar names its object
        assert [r.offset for r in reader.seek("ev", 0, 14)][:6] == list(range(14, 20))


# -- verify --topic: the same engine ---------------------------------------------------------------
def _verify(store: LocalStore) -> tuple[int, list[str]]:
    result = CliRunner().invoke(main, ["verify", "--topic", "ev", str(store.root)])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.stderr.splitlines()


def test_verify_names_a_deleted_object_every_bad_sidecar_and_a_companion(tmp_path):
    store, log = _archive(tmp_path / "a", **{"store.kafka.keys": "true"})
    assert _verify(store)[0] == 0
    stamps = [f.key for f in log.committed_files() if f.role == "keys"]
    assert len(stamps) == 18  # one beside each value object (timestamps: in its sidecar)
    assert not [f for f in log.committed_files() if f.role == "timestamps"]
    store.delete(_key(7))
    store.delete(stamps[-1])
    for start in (14, 40):  # two sidecars that are not the committed ones
        doc = json.loads(store.get(sidecar_key(_key(start, 1))))
        doc["chunks"][0]["min_timestamp"] -= 1000
        store.put(sidecar_key(_key(start, 1)), json.dumps(doc).encode())
    code, lines = _verify(store)
    assert code == 2
    damage = [line for line in lines if line.startswith("damage: ")]
    assert len(damage) == 4, lines
    assert any(_key(7) in line and "it is gone" in line for line in damage)
    assert any(stamps[-1] in line and "it is gone" in line for line in damage)
    for start in (14, 40):
        assert any(_key(start, 1) in line and "sidecar" in line for line in damage)


def test_verify_names_another_topics_object_and_a_deleted_manifest(archive, tmp_path):
    store, log = archive
    store.put("topics/ev/partition=1/pay+1+0000000000.json.gz", store.get(_key(0, 1)))
    store.delete(log.key(1))
    code, lines = _verify(store)
    assert code == 2
    assert any(line.startswith(f"damage: {log.key(1)}: the manifest is gone") for line in lines)
    assert any("pay+1+0000000000.json.gz" in line and "pay-1's object" in line for line in lines)


def test_a_manifest_lost_before_the_catalog_folded_past_it_is_damage(archive):
    store, log = archive
    store.delete(log.key(1))
    Catalog(log).compact()  # folds 0 and 2: the root never saw 1
    report = audit_job(log, do_repair=True)
    assert kinds(report)[0] == ("missing_manifest", DAMAGE, log.key(1))
    assert "the catalog (root 0) folded past it" in report.findings[0].repair
    assert store.get(log.key(1))  # re-committed in its place all the same


def test_a_repair_of_one_topic_leaves_a_deleted_manifest_for_a_whole_audit(archive):
    store, log = archive
    store.delete(log.key(1))
    report = audit_job(log, topics=["ev"], do_repair=True)
    assert report.findings[0].repair.startswith("not repaired: --topic audits part of the job")
    assert kinds(audit_job(log)) == [("missing_manifest", DAMAGE, log.key(1))]


def test_verify_without_manifests_names_every_bad_sidecar(tmp_path):
    """An archive no export committed (another writer's): each object against its sidecar; a
    sidecar that cannot be used is one line and the others are still checked."""
    store = LocalStore(tmp_path)
    build_partition(store, objects=3, records_per_object=20)
    keys = [f"topics/orders/partition=0/orders+0+{n:010d}.json.gz" for n in (0, 20, 40)]
    for key in keys[:2]:
        store.put(sidecar_key(key), b"{not json")
    result = CliRunner().invoke(main, ["verify", "--topic", "orders", str(tmp_path)])
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    for key in keys[:2]:
        assert any(key in line and "its sidecar cannot be used" in line for line in lines)
    assert any(keys[2] in line and ": ok, " in line for line in lines)
