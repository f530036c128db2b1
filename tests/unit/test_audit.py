"""``blockgz audit`` on local archives written by the sink's write task: each kind of damage
found and named precisely, what ``--repair`` mends, gaps against a stand-in broker, a running
export's batch left alone, and what a non-deep audit costs (SeaweedFS: the integration test)."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from blockgz.archive.layout import Layout
from blockgz.cli import main
from blockgz.commits.catalog import Catalog
from blockgz.commits.manifest_log import ManifestLog
from blockgz.commits.writer_lease import Lease
from blockgz.reader.audit.auditor import audit_job
from blockgz.reader.audit.findings import DAMAGE, NOTE, WARNING
from blockgz.sink.records import KafkaRecord
from blockgz.store import LocalStore
from blockgz.written.sidecars import sidecar_key
from testkit import damage
from testkit.archives import export_batches

DIR = "topics/ev/partition=0/"


def _key(start: int, partition: int = 0) -> str:
    return f"topics/ev/partition={partition}/ev+{partition}+{start:010d}.json.gz"


def records(count: int = 60, *, step=lambda n: 1) -> list[KafkaRecord]:
    out = []
    for p in (0, 1):
        offset = 0
        for n in range(count):
            out.append(KafkaRecord("ev", p, offset, 1_700_000_000_000 + n, None, b'{"n":%d}' % n))
            offset += step(n)
    return out


@pytest.fixture
def archive(tmp_path):
    """Two partitions of 60 contiguous offsets, in objects of 7 records (0, 7, 14, ...)."""
    root = tmp_path / "a"
    export_batches(str(root), records(), "default", batches=3, **{"flush.size": "7"})
    store = LocalStore(root)
    return store, ManifestLog(store, "", Layout(), "job")


def kinds(report) -> list[tuple[str, int, str | None]]:
    return [(f.kind, f.level, f.key) for f in report.findings]


def test_an_intact_archive_exits_0_and_reads_no_object(archive):
    store, log = archive
    report = audit_job(log)
    assert report.findings == [] and report.exit_code == 0
    assert [(p.partition, p.first_offset, p.committed, p.records) for p in report.partitions] == [
        (0, 0, 60, 60),
        (1, 0, 60, 60),
    ]
    objects = report.objects
    assert objects == 2 * 9  # 8 objects of 7 records, one of 4, per partition
    counts = store.requests
    assert counts.ranged_gets == 0  # no data read
    sidecars = objects
    manifests = 3
    assert sidecars <= counts.gets <= sidecars + manifests + 2  # + catalog root / segments
    assert counts.lists <= 4


def test_a_deleted_object_is_damage_naming_its_offsets(archive):
    store, log = archive
    store.delete(_key(7))
    report = audit_job(log)
    assert kinds(report) == [("missing_object", DAMAGE, _key(7))]
    finding = report.findings[0]
    assert (finding.topic, finding.partition, finding.first, finding.last) == ("ev", 0, 7, 13)
    assert report.exit_code == 2
    assert "a manifest committed it (7 records" in finding.line()


def test_a_manifest_naming_an_object_never_written(archive):
    store, log = archive
    store.delete(_key(14))
    store.delete(sidecar_key(_key(14)))
    report = audit_job(log)
    assert kinds(report) == [("missing_object", DAMAGE, _key(14))]


def test_a_truncated_object_is_damage(archive):
    store, log = archive
    damage.truncate(store, _key(20, 1))
    report = audit_job(log)
    assert kinds(report) == [("truncated_object", DAMAGE, _key(20, 1))]
    assert "the manifest committed" in report.findings[0].message
    assert report.findings[0].partition == 1


def test_a_corrupted_block_is_found_by_its_checksum_only_when_deep(archive):
    store, log = archive
    first, last = damage.flip_byte(store, _key(27))
    assert audit_job(log).exit_code == 0  # the sizes still agree
    report = audit_job(log, deep=True)
    assert kinds(report) == [("corrupt_block", DAMAGE, _key(27))]
    f = report.findings[0]
    assert (f.first, f.last) == (first, last)
    assert "CRC-32 of the stored bytes" in f.message
    assert report.bytes_read > 0


def test_an_old_index_without_checksums_still_audits_deep_by_decoding(archive):
    store, log = archive
    damage.forget_checksums(store, log.keys())
    damage.strip_checksums(store, _key(34))
    assert audit_job(log, deep=True).exit_code == 0
    damage.flip_byte(store, _key(34))
    report = audit_job(log, deep=True)
    assert kinds(report) == [("corrupt_block", DAMAGE, _key(34))]
    assert "CRC-32" not in report.findings[0].message  # the gzip decoder's words


def test_a_missing_sidecar_is_a_warning_and_repair_rebuilds_it(archive):
    store, log = archive
    store.delete(sidecar_key(_key(40)))
    report = audit_job(log)
    assert kinds(report) == [("missing_sidecar", WARNING, _key(40))]
    assert report.exit_code == 1
    repaired = audit_job(log, do_repair=True)
    assert repaired.findings[0].repair.startswith("repaired: rebuilt")
    assert repaired.exit_code == 0
    assert store.get(sidecar_key(_key(40)))
    again = audit_job(log, deep=True)
    assert again.findings == []


def test_a_stale_sidecar_is_named_and_rebuilt(archive, tmp_path):
    store, log = archive
    damage.stale_sidecar(store, _key(47), 47, records=3, tmp=tmp_path / "older")
    report = audit_job(log)
    assert kinds(report) == [("stale_sidecar", WARNING, _key(47))]
    assert "describes offsets 47..49 (3 records)" in report.findings[0].message
    audit_job(log, do_repair=True)
    assert audit_job(log, deep=True).findings == []


def test_strays_uncommitted_and_by_another_writer_are_removed_by_repair(archive):
    store, log = archive
    after, copy, alone = DIR + "ev+0+0000000060.json.gz", _key(3), _key(8)
    store.put(after, store.get(_key(0)))  # from the committed offset 60 on: a dead batch's
    damage.second_writer(store, copy, 3, 7)  # 3..9: every offset committed elsewhere too
    store.put(alone, store.get(_key(0)))  # no sidecar: what it holds is unknown
    store.put(DIR + "ev+0+0000000050.json.gz.bak", b"x")  # no data object's name
    report = audit_job(log)
    found = {f.key: f for f in report.findings}
    assert "at or after the committed offset 60" in found[after].message
    assert (
        "a second writer's copy: committed objects hold all of its offsets" in found[copy].message
    )
    assert (found[copy].first, found[copy].last) == (3, 9)
    assert "it may hold the only copy" in found[alone].message
    assert found[DIR + "ev+0+0000000050.json.gz.bak"].kind == "stray"
    assert {f.kind for f in report.findings} == {"uncommitted", "stray"}
    assert report.exit_code == 1
    repaired = audit_job(log, do_repair=True)
    assert sorted(r.rsplit("/", 1)[-1] for r in repaired.repaired) == [
        ".ev+0+0000000003.json.index.json",
        "ev+0+0000000003.json.gz",
        "ev+0+0000000060.json.gz",
    ]
    left = audit_job(log)
    assert [f.key for f in left.findings] == [DIR + "ev+0+0000000050.json.gz.bak", alone]


def test_a_running_exports_batch_is_left_alone_and_said_so(archive):
    store, log = archive
    older = DIR + "ev+0+0000000060.json.gz"
    store.put(older, store.get(_key(0)))
    os.utime(store.path(older), (1_000_000_000, 1_000_000_000))  # long before the lease
    lease = Lease(store, Layout().lease_key("", "job"), checkpoint="/ckpt")
    holder = lease.acquire()
    in_flight = DIR + "ev+0+0000000067.json.gz"
    store.put(in_flight, store.get(_key(0)))
    os.utime(store.path(in_flight), (holder.since + 1, holder.since + 1))
    report = audit_job(log, do_repair=True)
    found = {f.key: f for f in report.findings}
    assert found[in_flight].kind == "in_flight" and found[in_flight].level == NOTE
    assert "the export holding the lease" in found[in_flight].message
    assert found[in_flight].repair.startswith("left alone")
    assert found[older].repair.startswith("repaired: removed")
    assert store.get(in_flight)
    assert report.exit_code == 0
    lease.release()


def test_overlapping_objects_of_two_writers_are_a_warning(tmp_path):
    root = str(tmp_path / "o")
    for epoch, flush in (("e1", "5"), ("e2", "7")):  # a second run, other object boundaries
        export_batches(root, records(), "default", batches=3,
                       **{"flush.size": flush, "blockgz.epoch": epoch})  # fmt: skip
    report = audit_job(ManifestLog(LocalStore(root), "", Layout(), "job"))
    overlaps = [f for f in report.findings if f.kind == "overlap"]
    assert overlaps and all(f.level == WARNING for f in overlaps)
    assert overlaps[0].message.startswith(f"holds 2 of these offsets that {_key(0)} holds too")
    assert (overlaps[0].first, overlaps[0].last, overlaps[0].key) == (5, 6, _key(5))
    assert report.exit_code >= 1


def test_a_catalog_segment_gone_is_damage_and_no_committed_object_becomes_a_stray(tmp_path):
    root = str(tmp_path / "c")
    export_batches(root, records(), "default", batches=4, every=2, **{"flush.size": "7"})
    store = LocalStore(root)
    log = ManifestLog(store, "", Layout(), "job")
    newest = Catalog(log).latest_root()
    (segment,) = newest.segments["ev"][0]  # what the newest root reads for ev-0
    store.delete(segment.key)
    report = audit_job(log, do_repair=True)
    (finding,) = report.findings
    assert (finding.kind, finding.level, finding.partition) == ("catalog", DAMAGE, 0)
    assert "its files were taken from the manifests" in finding.message
    assert report.repaired == []  # nothing removed: every object is still known as committed
    assert report.partitions[0].records == 60


class FakeKafka:
    """A broker that holds nothing in any gap (compaction), from ``start`` on."""

    brokers = "fake:9092"

    def __init__(self, start: int = 0, holds: int | None = None):
        self.start, self.holds, self.asked = start, holds, []

    def log_start(self, topic, partition):
        return self.start

    def first_record(self, topic, partition, offset, end):
        self.asked.append((partition, offset, end))
        if self.holds is not None and offset <= self.holds < end:
            return self.holds, False
        return None


@pytest.fixture
def gapped(tmp_path):
    """Offsets with a gap of 3 after every 5th record: gaps inside and between objects."""
    root = str(tmp_path / "g")
    recs = records(40, step=lambda n: 4 if n % 5 == 4 else 1)
    export_batches(root, recs, "default", batches=2, **{"flush.size": "5"})
    return ManifestLog(LocalStore(root), "", Layout(), "job")


def test_gaps_between_objects_are_warnings_without_a_broker(gapped):
    report = audit_job(gapped)
    gaps = [f for f in report.findings if f.kind == "unexplained_gap"]
    assert gaps and all(f.level == WARNING and f.last - f.first == 2 for f in gaps)
    assert "--no-kafka" in gaps[0].message


def test_gaps_kafka_explains_are_a_note_each_saying_why(gapped):
    kafka = FakeKafka()
    report = audit_job(gapped, kafka=kafka)
    assert report.exit_code == 0 and kafka.asked
    assert {(f.kind, f.level) for f in report.findings} == {("gap", NOTE)}
    assert len(report.findings) == sum(p.gaps_explained for p in report.partitions)
    assert len(report.findings) == len(kafka.asked)
    assert "Kafka holds no record there now (compaction" in report.findings[0].message
    retention = FakeKafka(start=10**6)
    kept = audit_job(gapped, kafka=retention)
    assert kept.exit_code == 0 and not retention.asked
    assert "retention: Kafka's log of ev-0 starts at 1000000" in kept.findings[0].message


def test_a_record_kafka_holds_in_a_gap_is_damage(gapped):
    report = audit_job(gapped, kafka=FakeKafka(holds=6))
    (finding,) = [f for f in report.findings if f.partition == 0 and f.level > NOTE]
    assert (finding.kind, finding.level, finding.first, finding.last) == ("not_archived", 2, 5, 7)
    assert "Kafka holds offset 6 but no committed object does" in finding.message


def test_cli_lines_json_and_exit_codes(archive, tmp_path):
    store, _ = archive
    store.delete(_key(7))
    root = str(store.path(_key(0))).split("/topics/")[0]
    result = CliRunner().invoke(main, ["audit", root, "--topic", "ev"])
    assert result.exit_code == 2, result.output
    assert f"damage: ev-0 offsets 7..13 {_key(7)}: a manifest committed it" in result.stdout
    assert "ev-1: offsets 0..59, committed 60, 9 objects, 60 records" in result.stdout
    assert "1 damage" in result.stderr and "Traceback" not in result.output
    result = CliRunner().invoke(main, ["audit", root, "--output", "json", "--repair"])
    doc = json.loads(result.stdout)
    (job,) = doc["jobs"]
    assert doc["exit_code"] == 2 and job["status"] == "damage"
    assert job["findings"][0]["kind"] == "missing_object"
    assert "re-export offsets 7..13 of ev-0 from Kafka" in job["findings"][0]["repair"]


def test_a_topic_no_job_committed_is_an_error(archive):
    store, _ = archive
    root = str(store.path(_key(0))).split("/topics/")[0]
    result = CliRunner().invoke(main, ["audit", root, "--topic", "nope"])
    assert result.exit_code == 2
    assert "error: --topic nope: no export there committed anything of it (committed: ev)" in (
        result.output
    )


def test_cli_errors_are_one_line():
    result = CliRunner().invoke(main, ["audit", "/no/such/thing"])
    assert result.exit_code == 2
    assert "error: /no/such/thing: no such config file" in result.output
    assert "Traceback" not in result.output


def test_help_has_examples():
    result = CliRunner().invoke(main, ["audit", "--help"])
    assert result.exit_code == 0 and "blockgz audit s3-sink.properties --deep" in result.output


SCHEMA = {
    "type": "struct",
    "name": "N",
    "optional": False,
    "fields": [{"field": "n", "type": "int64", "optional": False}],
}


def test_an_avro_archive_audits_deep_and_a_flipped_byte_is_found(tmp_path):
    root = str(tmp_path / "avro")
    recs = [
        KafkaRecord("ev", 0, n, 1_700_000_000_000 + n, None,
                    json.dumps({"schema": SCHEMA, "payload": {"n": n}}).encode())
        for n in range(40)
    ]  # fmt: skip
    export_batches(root, recs, "default", batches=2, **{
        "flush.size": "10", "format.class": "avro", "s3.compression.type": "none",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    })  # fmt: skip
    store = LocalStore(root)
    log = ManifestLog(store, "", Layout(), "job")
    report = audit_job(log, deep=True)
    assert report.findings == [] and report.objects == 4
    key = "topics/ev/partition=0/ev+0+0000000010.avro"
    index = json.loads(store.get(sidecar_key(key)))
    data = bytearray(store.get(key))
    data[index["avro"]["header_length"] + 3] ^= 0x01  # inside the first block
    store.put(key, bytes(data))
    report = audit_job(log, deep=True)
    assert [(f.kind, f.level, f.key) for f in report.findings] == [("corrupt_block", DAMAGE, key)]
