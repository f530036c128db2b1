"""``blockgz audit`` on a real S3 server (SeaweedFS), through the command line: each kind of
damage named in one line with its topic-partition, offsets and key; what ``--repair`` mends;
what an audit costs, counted at the server by the logging proxy.

The archives are written by the sink's write task (``testkit.archives.export_batches``: real
objects, sidecars, manifests and catalog, no Spark). One test at the end runs a real export from
Apache Kafka with transactions and asks the broker about the gaps they leave.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from blockgz.cli import main
from blockgz.sink.records import KafkaRecord
from blockgz.store import open_store
from blockgz.written.sidecars import sidecar_key
from testkit import damage
from testkit.archives import export_batches
from testkit.s3 import s3_options


def _key(start: int, partition: int = 0) -> str:
    return f"topics/ev/partition={partition}/ev+{partition}+{start:010d}.json.gz"


def _records(count: int = 60) -> list[KafkaRecord]:
    return [
        KafkaRecord("ev", p, n, 1_700_000_000_000 + n, None, b'{"n":%d,"p":%d}' % (n, p))
        for p in (0, 1)
        for n in range(count)
    ]


class Bucket:
    """An archive in a fresh bucket: offsets 0..59 of ev-0 and ev-1 in objects starting at 0,
    7, 14, 20, 27, 34, 40, 47, 54 (3 batches of 20, ``flush.size=7``)."""

    def __init__(self, endpoint_url: str, bucket: str, **extra: str):
        self.options = s3_options(endpoint_url)
        self.url = f"s3://{bucket}"
        export_batches(self.url, _records(), "default", batches=3,
                       **{"flush.size": "7", **extra}, **self.options)  # fmt: skip
        self.store, _ = open_store(self.url, self.options)

    def audit(self, *args: str) -> tuple[int, dict, list[str]]:
        """``blockgz audit`` as JSON: exit code, the job's report, the finding lines."""
        flags = [a for k, v in self.options.items() for a in ("-O", f"{k}={v}")]
        result = CliRunner().invoke(main, ["audit", self.url, *flags, "--output", "json", *args])
        assert "Traceback" not in result.output, result.output
        doc = json.loads(result.stdout)
        (job,) = doc["jobs"]
        assert doc["exit_code"] == result.exit_code == job["exit_code"]
        return result.exit_code, job, [_line(f) for f in job["findings"]]

    def manifest_keys(self) -> list[str]:
        return [info.key for info in self.store.list("_blockgz/job/manifests/")]

    def lines(self, *args: str) -> tuple[int, str]:
        flags = [a for k, v in self.options.items() for a in ("-O", f"{k}={v}")]
        result = CliRunner().invoke(main, ["audit", self.url, *flags, *args])
        assert "Traceback" not in result.output, result.output
        return result.exit_code, result.stdout


def _line(f: dict) -> str:
    where = f"{f['topic']}-{f['partition']} {f['first']}..{f['last']}"
    return f"{f['level']} {f['kind']} {where} {f['key']}"


@pytest.fixture
def archive(seaweed_s3, weed_bucket):
    return Bucket(seaweed_s3.endpoint_url, weed_bucket)


def test_an_intact_archive_is_exit_0(archive):
    code, job, lines = archive.audit("--deep")
    assert (code, lines) == (0, [])
    assert [(p["partition"], p["first_offset"], p["committed"], p["objects"]) for p in
            job["partitions"]] == [(0, 0, 60, 9), (1, 0, 60, 9)]  # fmt: skip
    assert job["bytes_read"] == sum(p["bytes"] for p in job["partitions"])


def test_a_deleted_object(archive):
    archive.store.delete(_key(7))
    code, text = archive.lines()
    assert code == 2
    assert f"damage: ev-0 offsets 7..13 {_key(7)}: a manifest committed it (7 records, " in text
    assert "but it is gone" in text and text.count("damage:") == 1


def test_a_manifest_naming_an_object_that_is_gone(archive):
    """Object and sidecar both gone (a cleanup of the wrong prefix): one line, no stray."""
    archive.store.delete(_key(40, 1))
    archive.store.delete(sidecar_key(_key(40, 1)))
    code, job, lines = archive.audit("--repair")
    assert code == 2
    assert lines == [f"damage missing_object ev-1 40..46 {_key(40, 1)}"]
    assert job["findings"][0]["repair"] == (
        "cannot repair: re-export offsets 40..46 of ev-1 from Kafka if it still holds them"
    )


def test_a_truncated_object(archive):
    damage.truncate(archive.store, _key(20))
    code, job, lines = archive.audit()
    assert code == 2
    assert lines == [f"damage truncated_object ev-0 20..26 {_key(20)}"]
    assert "(truncated)" in job["findings"][0]["message"]


@pytest.mark.parametrize("index", ["with checksums", "before checksums"])
def test_a_corrupted_block_is_found_by_a_deep_audit(archive, index):
    if index == "before checksums":  # an archive written before content checksums
        damage.forget_checksums(archive.store, archive.manifest_keys())
        damage.strip_checksums(archive.store, _key(27, 1))
    first, last = damage.flip_byte(archive.store, _key(27, 1))
    code, _, lines = archive.audit()
    if index == "before checksums":
        assert code == 0  # sizes and sidecars agree: only reading finds it
    else:  # SeaweedFS keeps each object's CRC-32: a HEAD finds it without reading data
        assert (code, lines) == (2, [f"damage checksum_mismatch ev-1 27..33 {_key(27, 1)}"])
    code, job, lines = archive.audit("--deep", "--repair")
    assert code == 2
    assert lines == [f"damage corrupt_block ev-1 {first}..{last} {_key(27, 1)}"]
    message = job["findings"][0]["message"]
    assert message.startswith("block 0 (bytes 0..")
    assert ("CRC-32 of the stored bytes" in message) == (index == "with checksums")
    assert job["findings"][0]["repair"].startswith(f"cannot repair: re-export offsets {first}..")


def test_a_missing_sidecar_is_rebuilt_by_repair(archive):
    archive.store.delete(sidecar_key(_key(34)))
    code, job, lines = archive.audit()
    assert code == 1 and lines == [f"warning missing_sidecar ev-0 34..39 {_key(34)}"]
    code, job, _ = archive.audit("--repair")
    assert code == 0 and job["findings"][0]["repair"].startswith("repaired: rebuilt")
    assert archive.audit("--deep")[0] == 0


def test_a_stale_sidecar_is_named_and_rebuilt(archive, tmp_path):
    damage.stale_sidecar(archive.store, _key(47), 47, records=4, tmp=tmp_path)
    code, job, lines = archive.audit()
    assert code == 1 and lines == [f"warning stale_sidecar ev-0 47..53 {_key(47)}"]
    assert "describes offsets 47..50 (4 records)" in job["findings"][0]["message"]
    assert archive.audit("--repair")[0] == 0
    code, _, lines = archive.audit("--deep")
    assert (code, lines) == (0, [])


def test_strays_no_manifest_committed_are_removed_by_repair(archive):
    after, below = _key(60), _key(3)
    archive.store.put(after, archive.store.get(_key(0)))
    archive.store.put(sidecar_key(after), archive.store.get(sidecar_key(_key(0))))
    damage.second_writer(archive.store, below, 3, 10)  # 3..12, all committed elsewhere
    code, job, lines = archive.audit()
    assert code == 1
    assert lines == [
        f"warning uncommitted ev-0 3..12 {below}",
        f"warning uncommitted ev-0 60..None {after}",
    ]
    code, job, _ = archive.audit("--repair")
    assert code == 0
    assert sorted(job["repaired"]) == sorted(
        f"removed {archive.url}/{k}" for k in (below, sidecar_key(below), after, sidecar_key(after))
    )
    assert archive.audit()[2] == []


def test_objects_that_overlap(seaweed_s3, weed_bucket):
    """The same job run twice with other batch boundaries (a lost checkpoint)."""
    archive = Bucket(seaweed_s3.endpoint_url, weed_bucket, **{"blockgz.epoch": "e1"})
    export_batches(archive.url, _records(), "default", batches=2,
                   **{"flush.size": "5", "blockgz.epoch": "e2"}, **archive.options)  # fmt: skip
    code, job, _ = archive.audit("--repair")
    overlaps = [f for f in job["findings"] if f["kind"] == "overlap"]
    assert code == 1 and overlaps and len(overlaps) == len(job["findings"])
    first = overlaps[0]
    # e2's objects start at 0, 5, 10, ...: its 5..9 and e1's 7..13 share 7..9
    assert (first["partition"], first["first"], first["last"]) == (0, 7, 9)
    assert first["key"] == _key(7) and _key(5) in first["message"]
    assert first["repair"].startswith("not repaired: both objects are committed")


def test_a_plain_audit_lists_once_and_reads_only_sidecars(seaweed_s3, weed_proxy, weed_bucket):
    archive = Bucket(weed_proxy.endpoint_url, weed_bucket)
    weed_proxy.clear_log()
    assert archive.audit()[0] == 0
    requests = list(weed_proxy.requests)
    gets = [r for r in requests if r.method == "GET" and "list-type=2" not in r.query]
    lists = [r for r in requests if r.method == "GET" and "list-type=2" in r.query]
    assert not [r for r in requests if r.method not in ("GET", "HEAD")]
    assert not [r for r in gets if "range" in {h.lower() for h in r.headers}]  # no data read
    sidecars = [r for r in gets if ".index.json" in r.path]
    assert len(sidecars) == 18  # one per object
    # The rest is bookkeeping whose count grows with the manifests (3 here), not the objects:
    # finding the job and reading its catalog (the manifests after the newest root).
    bookkeeping = [r for r in gets if r not in sidecars]
    assert all(f"/{weed_bucket}/_blockgz/job/" in r.path for r in bookkeeping)
    assert len(bookkeeping) <= 4 * 3
    (topic_list,) = [r for r in lists if "prefix=topics%2Fev%2F" in r.query]
    assert all("prefix=_blockgz%2F" in r.query for r in lists if r is not topic_list)

    weed_proxy.clear_log()
    code, job, _ = archive.audit("--deep")
    data = [r for r in weed_proxy.requests if "range" in {h.lower() for h in r.headers}]
    assert code == 0 and len(data) == 18  # every object read once, one ranged GET each
    assert sum(r.response_bytes for r in data) == job["bytes_read"]
