"""One writer per archive (issue 24, situation 2): a restarted export with a new checkpoint
resumes from what the archive committed; a second export of the same job is fenced by the
job's lease; another job archiving the same topics in the same layout is refused.

The lease's conditional writes are checked against each S3 server the suite has (SeaweedFS,
moto, and radosgw where it installs); the exports are real ``blockgz export`` processes
(``test_export_crash.ExportProcess``) against Tansu and SeaweedFS, the race on the standalone
cluster.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from blockgz.archive.layout import Layout
from blockgz.commits.manifest_log import ManifestLog
from blockgz.commits.writer_lease import Holder, Lease
from blockgz.errors import LeaseHeldError, PreconditionFailedError, PreflightError
from blockgz.local_servers import fake_aws_env
from blockgz.sink.export.preflight import check_other_jobs
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.sink.write.config import SinkSettings
from blockgz.store import open_store
from testkit.kafka_data import manifest_keys_of, produce_numbered
from testkit.s3 import s3_options
from tests.integration.test_export_crash import (
    BLOCKGZ,
    PARTITIONS,
    PER_PARTITION,
    ROOT,
    ExportProcess,
    check_exactly_once,
    killed_at,
    orphans,
    write_config,
)

pytestmark = pytest.mark.slow


# -- the store's conditional writes, at each server ---------------------------------------------
@pytest.mark.parametrize("server", ["seaweed", "moto", "ceph"])
def test_conditional_puts_are_honoured(server, request):
    """``If-None-Match: *`` refuses a second create and ``If-Match`` a stale ETag (412)."""
    from blockgz.store.s3 import S3Store
    from blockgz.store.settings import S3Settings

    fixture = {"seaweed": "seaweed_s3", "moto": "moto_s3", "ceph": "ceph_s3"}[server]
    s3 = request.getfixturevalue(fixture)
    name = f"lease-{server}-{os.getpid()}"
    s3.client().create_bucket(Bucket=name)
    store = S3Store(
        S3Settings.from_options({"s3.bucket.name": name, **s3_options(s3.endpoint_url)})
    )
    first = store.put_if("_blockgz/j/lease.json", b"one", if_none_match=True)
    with pytest.raises(PreconditionFailedError):
        store.put_if("_blockgz/j/lease.json", b"two", if_none_match=True)
    second = store.put_if("_blockgz/j/lease.json", b"three", if_match=first)
    with pytest.raises(PreconditionFailedError):
        store.put_if("_blockgz/j/lease.json", b"four", if_match=first)  # stale
    with pytest.raises(PreconditionFailedError):
        store.put_if("_blockgz/j/missing.json", b"five", if_match=first)
    assert store.get_versioned("_blockgz/j/lease.json") == (b"three", second)
    # The lease over the same store: a second taker is refused, the holder renews.
    lease = Lease(store, "_blockgz/k/lease.json", checkpoint="/ckpt/1")
    lease.acquire()
    with pytest.raises(LeaseHeldError, match="/ckpt/1"):
        Lease(store, "_blockgz/k/lease.json", host="elsewhere").acquire()
    lease.renew()
    lease.release()


# -- (a) a new checkpoint resumes from the archive -------------------------------------------
@pytest.mark.crash
def test_a_new_checkpoint_resumes_where_the_archive_committed(kafka, s3_server, bucket, tmp_path):
    """The same config, run with another --checkpoint after the first died mid-way (its lease
    still held by a dead process on this host): no startingOffsets=s3 needed, every record
    archived once, no overlapping objects."""
    topic = "one_writer_resume"
    kafka.create_topic(topic, partitions=PARTITIONS)
    produce_numbered(kafka.bootstrap_servers, topic, PARTITIONS, PER_PARTITION)
    killed_at("pause-after-files:2:1:{marker}", tmp_path, kafka, s3_server, bucket, topic)
    assert orphans(s3_server, bucket), "batch 1 should have left uncommitted objects"
    # Another checkpoint and another flush.size: the keys of the second run differ from the
    # first run's, so only a resume (not an overwrite) can give exactly once.
    again = write_config(
        tmp_path / "job2.properties", kafka, s3_server, bucket, topic, **{"flush.size": "5"}
    )
    log = tmp_path / "export2.log"
    ExportProcess(again, tmp_path / "ckpt2", log).finish()
    check_exactly_once(s3_server, bucket, again)
    assert_no_overlaps(s3_server, bucket)
    text = log.read_text()
    assert re.search(r"resuming from the archive's manifests \(.*\): .*@20", text), text[-3000:]
    assert "its process" in text and "is gone" in text  # the dead holder's lease, taken at once
    # A third run with yet another checkpoint finds nothing left to do and writes nothing.
    before = set(keys_of(s3_server, bucket))
    ExportProcess(again, tmp_path / "ckpt3", tmp_path / "export3.log").finish()
    assert set(keys_of(s3_server, bucket)) == before
    # blockgz.resume=checkpoint-only starts at startingOffsets: refused by no one, documented.
    assert ExportSettings.from_file(again, {"blockgz.resume": "checkpoint-only"}).resume == (
        "checkpoint-only"
    )


def keys_of(s3_server, bucket) -> list[str]:
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    return [o.key for o in store.list(f"{prefix}topics/")]


def assert_no_overlaps(s3_server, bucket) -> None:
    """No two committed objects of a partition hold a common offset."""
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    log = SinkSettings.from_options({"s3.bucket.name": bucket, "name": "crash-test"}).manifest_log(
        store, prefix
    )
    spans: dict[tuple[str, int], list[tuple[int, int]]] = {}
    for f in log.committed_files():
        if f.role != "value":  # the timestamps file beside each holds the same offsets
            continue
        spans.setdefault((f.topic, f.partition), []).append((f.first_offset, f.last_offset))
    for where, ranges in spans.items():
        ranges.sort()
        for (_, last), (first, _) in itertools.pairwise(ranges):
            assert first > last, f"{where}: overlapping objects {ranges}"


# -- (b) two exports of one job racing on the standalone cluster ------------------------------
def test_two_exports_of_one_job_race_on_the_cluster(
    kafka, s3_server, bucket, tmp_path, spark_cluster
):
    """Both start at once: one takes the lease and runs, the other exits non-zero in one
    line naming the holder; after the winner stops, every record is archived once."""
    topic = "one_writer_race"
    kafka.create_topic(topic, partitions=PARTITIONS)
    produce_numbered(kafka.bootstrap_servers, topic, PARTITIONS, PER_PARTITION)
    config = write_config(
        tmp_path / "job.properties",
        kafka,
        s3_server,
        bucket,
        topic,
        **{
            "blockgz.trigger.interval": "1 second",
            "spark.executorEnv.PYTHONPATH": str(ROOT),
            "spark.cores.max": "1",
        },
    )
    master = spark_cluster.master_url
    runs = [
        ClusterExport(config, tmp_path / f"ckpt{i}", tmp_path / f"export{i}.log", master)
        for i in range(2)
    ]
    try:
        deadline = time.monotonic() + 120
        while all(r.proc.poll() is None for r in runs):
            assert time.monotonic() < deadline, "neither export was refused within 120 s"
            time.sleep(0.2)  # polling the processes with a deadline
        loser = next(r for r in runs if r.proc.poll() is not None)
        winner = next(r for r in runs if r is not loser)
        assert loser.proc.returncode != 0, loser.log.read_text()[-3000:]
        lines = [ln for ln in loser.log.read_text().splitlines() if "holds" in ln]
        assert len(lines) == 1, loser.log.read_text()[-3000:]
        assert str(winner.checkpoint.resolve()) in lines[0] and "pid" in lines[0], lines[0]
        assert "Traceback" not in loser.log.read_text()
        # The winner drains the topic, then stops cleanly on SIGTERM.
        sink_config = SinkSettings.from_options({"s3.bucket.name": bucket, "name": "crash-test"})
        store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
        log = sink_config.manifest_log(store, prefix)
        want = {p: PER_PARTITION for p in range(PARTITIONS)}
        deadline = time.monotonic() + 240
        while log.committed_offsets().get(topic) != want:
            assert winner.proc.poll() is None, winner.log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the winner did not drain the topic in 240 s"
            time.sleep(0.5)  # polling S3 with a deadline
        winner.proc.send_signal(signal.SIGTERM)
        assert winner.proc.wait(90) == 0, winner.log.read_text()[-3000:]
    finally:
        for run in runs:
            run.kill()
    check_exactly_once(s3_server, bucket, config)
    lease = json.loads(store.get(f"{prefix}_blockgz/crash-test/lease.json"))
    assert lease["released"], lease


class ClusterExport(ExportProcess):
    """``blockgz export`` (running, not ``--once``) with the standalone cluster as master."""

    def __init__(self, config: Path, checkpoint: Path, log: Path, master: str):
        super().__init__(config, checkpoint, log, once=False, master=master)
        self.checkpoint = checkpoint


# -- a held lease, refused before Spark starts --------------------------------------------------
def test_a_live_holder_elsewhere_makes_the_export_refuse_in_one_line(
    kafka, s3_server, bucket, tmp_path
):
    topic = "one_writer_held"
    kafka.create_topic(topic, partitions=1)
    config = write_config(tmp_path / "job.properties", kafka, s3_server, bucket, topic)
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    now = time.time()
    held = Holder("node-7", 4242, "/var/lib/blockgz/crash-test", now, "t0", now + 600)
    store.put(f"{prefix}_blockgz/crash-test/lease.json", held.to_json())
    proc = subprocess.run(
        [BLOCKGZ, "export", str(config), "--checkpoint", str(tmp_path / "ckpt"), "--once"],
        capture_output=True,
        text=True,
        env={**os.environ, **fake_aws_env()},
        timeout=120,
    )
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 or "holds" in lines[-1], proc.stderr
    line = next(ln for ln in lines if "holds" in ln)
    for part in ("node-7", "pid 4242", "/var/lib/blockgz/crash-test", "since", "takeover"):
        assert part in line, line
    assert not (tmp_path / "ckpt" / "offsets").exists()


# -- (d) another job, same topics, same layout ------------------------------------------------
def test_another_job_archiving_the_same_topics_is_refused(kafka, s3_server, bucket, tmp_path):
    topic = "one_writer_other_job"
    kafka.create_topic(topic, partitions=1)
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    ManifestLog(store, prefix, Layout(), "first-job").write(0, files=[], offsets={topic: {0: 9}})
    base = {
        "name": "second-job",
        "topics": topic,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": bucket,
        **s3_options(s3_server.endpoint_url),
    }
    with pytest.raises(PreflightError) as caught:
        check_other_jobs(ExportSettings.from_mapping(base))
    message = str(caught.value)
    assert "\n" not in message
    assert "'first-job'" in message and topic in message and "name=first-job" in message
    assert "blockgz.share.topics=true" in message
    check_other_jobs(ExportSettings.from_mapping({**base, "blockgz.share.topics": "true"}))
    check_other_jobs(ExportSettings.from_mapping({**base, "topics.dir": "elsewhere"}))
    check_other_jobs(ExportSettings.from_mapping({**base, "name": "first-job"}))
    # The CLI says it in one line and exits non-zero before Spark starts.
    config = tmp_path / "job.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in base.items()))
    proc = subprocess.run(
        [BLOCKGZ, "export", str(config), "--checkpoint", str(tmp_path / "ckpt"), "--once"],
        capture_output=True,
        text=True,
        env={**os.environ, **fake_aws_env()},
        timeout=120,
    )
    assert proc.returncode != 0 and "already archives" in proc.stderr, proc.stderr
    assert not (tmp_path / "ckpt" / "offsets").exists()
    shutil.rmtree(tmp_path / "ckpt", ignore_errors=True)
    assert manifest_keys_of(store, prefix, SinkSettings.from_options(base)) == set()


# -- an export paused past its lease's expiry stops before its next commit ---------------------
@pytest.mark.crash
def test_a_writer_paused_past_its_expiry_stops_before_its_next_commit(
    kafka, s3_server, bucket, tmp_path
):
    """A runs; it is frozen (SIGSTOP) until its lease expires; B (same job, new checkpoint)
    takes the expired lease, resumes from the archive and drains the topic; A, thawed, finds
    the lease gone at its renewal or its commit and exits non-zero in one line naming B.
    Every offset is committed exactly once."""
    import psutil

    topic = "one_writer_paused"
    kafka.create_topic(topic, partitions=PARTITIONS)
    produce_numbered(kafka.bootstrap_servers, topic, PARTITIONS, PER_PARTITION)
    config = write_config(
        tmp_path / "job.properties",
        kafka,
        s3_server,
        bucket,
        topic,
        **{
            "blockgz.trigger.interval": "1 second",
            "maxOffsetsPerTrigger": "15",
            "blockgz.lease.ttl.ms": "3000",
        },
    )
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    log = SinkSettings.from_options({"s3.bucket.name": bucket, "name": "crash-test"}).manifest_log(
        store, prefix
    )
    first = ExportProcess(config, tmp_path / "ckptA", tmp_path / "exportA.log", once=False)
    frozen: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 150
        while not log.keys():  # A committed its first batch
            assert first.proc.poll() is None, first.log.read_text()[-3000:]
            assert time.monotonic() < deadline, "A committed nothing in 150 s"
            time.sleep(0.2)  # polling S3 with a deadline
        for p in psutil.process_iter():
            try:
                if p.environ().get("BLOCKGZ_TEST_RUN") == first.tag:
                    p.suspend()
                    frozen.append(p)
            except (psutil.Error, OSError):
                continue
        assert frozen, "no process of A found to freeze"
        lease_at = f"{prefix}_blockgz/crash-test/lease.json"
        deadline = time.monotonic() + 30
        while json.loads(store.get(lease_at))["expires"] > time.time():
            assert time.monotonic() < deadline, "A's lease did not expire"
            time.sleep(0.2)  # polling the lease with a deadline
        second_log = tmp_path / "exportB.log"
        ExportProcess(config, tmp_path / "ckptB", second_log).finish()
        text = second_log.read_text()
        assert "took over the lease" in text and "it expired" in text, text[-3000:]
        assert "resuming from the archive's manifests" in text, text[-3000:]
        for p in frozen:
            with contextlib.suppress(psutil.Error):
                p.resume()
        frozen.clear()
        code = first.proc.wait(120)
        assert code != 0, first.log.read_text()[-3000:]
        errors = [ln for ln in first.log.read_text().splitlines() if ln.startswith("error:")]
        assert len(errors) == 1 and "lost its lease to host" in errors[0], errors
        assert str((tmp_path / "ckptB").resolve()) in errors[0], errors[0]
    finally:
        for p in frozen:
            with contextlib.suppress(psutil.Error):
                p.resume()
        first.kill()
    committed = Counter()
    for f in log.committed_files():
        if f.role == "value":
            for doc in read_object(store, f.key):
                committed[(doc["p"], doc["i"])] += 1
    expected = {(p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION)}
    assert set(committed) == expected and max(committed.values()) == 1
    assert_no_overlaps(s3_server, bucket)


def read_object(store, key: str) -> list[dict]:
    import gzip

    data = store.get(key)
    if key.endswith(".gz"):
        data = gzip.decompress(data)
    return [json.loads(line) for line in data.splitlines() if line]
