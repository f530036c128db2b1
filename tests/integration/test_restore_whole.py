"""A restore gives everything back, exactly once (issue 41, situations 2 and 3), on Apache Kafka +
SeaweedFS: a compacted topic's tombstones come back as tombstones (key + null value) in their
places, the dry run counts them, an archive that cannot tell a tombstone from the JSON text
``null`` is refused per partition unless ``--json-null`` says; and a restore killed mid-way,
with foreign records written to the target before the rerun, ends with every source record
exactly once beside the foreign ones."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from click.testing import CliRunner

from blockgz.cli import main
from blockgz.sink.export.job import run_export
from blockgz.sink.jobconfig.config import ExportSettings
from testkit.s3 import s3_options
from tests.integration.test_restore import read_all

pytestmark = pytest.mark.slow

COMPACT = {"cleanup.policy": "compact"}


def source_records(partition: int, count: int) -> list[tuple[bytes, bytes | None]]:
    """``(key, value)`` of a compacted topic's partition: ten keys updated in turn, and every
    seventh record a tombstone (null value) of its key."""
    out: list[tuple[bytes, bytes | None]] = []
    for n in range(count):
        key = b"p%d-k%d" % (partition, n % 10)
        value = None if n % 7 == 6 else b'{"p":%d,"n":%d}' % (partition, n)
        out.append((key, value))
    return out


def export(spark, kafka, seaweed_s3, bucket: str, topic: str, tmp_path, **extra: str) -> None:
    """Archive ``topic`` once (the export's own snapshot records its configs)."""
    job = ExportSettings.from_mapping(
        {
            "name": f"whole-{topic}",
            "topics": topic,
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": bucket,
            "flush.size": "30",
            "s3.compression.type": "blockgzip",
            "s3.compression.block.records": "10",
            "behavior.on.null.values": "write",
            **s3_options(seaweed_s3.endpoint_url),
            **extra,
        }
    )
    run_export(
        job, checkpoint=tmp_path / f"ckpt-{topic}", once=True, spark=spark,
        install_signal_handlers=False,
    )  # fmt: skip


def flags(seaweed_s3) -> list[str]:
    return [a for k, v in s3_options(seaweed_s3.endpoint_url).items() for a in ("-O", f"{k}={v}")]


def restore(*args: str):
    result = CliRunner().invoke(main, ["restore", *args])
    assert "Traceback" not in result.output, result.output
    return result


def produced(kafka, topic: str, partitions: int, count: int) -> dict[int, list]:
    kafka.create_topic(topic, partitions=partitions, config=COMPACT)
    sent = {p: source_records(p, count) for p in range(partitions)}
    for p, records in sent.items():
        kafka.produce(topic, records, partition=p)
    return sent


# -- 2: tombstones come back as tombstones ---------------------------------------------------
def test_tombstones_kept_as_keys_come_back_as_tombstones_in_their_places(
    spark, kafka, seaweed_s3, weed_bucket, tmp_path
):
    """``behavior.on.null.values=write`` with ``store.kafka.keys``: the tombstones sit as keys
    files under ``tombstone/``, which the restore used to never read (a deleted key came back
    alive on the restored compacted topic, and the dry run's counts left them out)."""
    topic = f"tomb_{uuid.uuid4().hex[:6]}"
    sent = produced(kafka, topic, 2, 70)  # 10 tombstones per partition
    export(spark, kafka, seaweed_s3, weed_bucket, topic, tmp_path, **{"store.kafka.keys": "true"})
    url, target = f"s3://{weed_bucket}", f"{topic}_r"

    plan = restore(
        url, topic, "--suffix", "_r", "--dry-run", "--output", "json", *flags(seaweed_s3)
    )
    assert plan.exit_code == 0, plan.output
    doc = json.loads(plan.stdout)
    assert doc["records"] == 140
    windows = {w["partition"]: w for w in doc["topics"][0]["windows"]}
    assert [(windows[p]["records"], windows[p]["tombstones"]) for p in (0, 1)] == [(70, 10)] * 2
    assert doc["ambiguities"] == []

    done = restore(
        url, topic, "--suffix", "_r", "--bootstrap-servers", kafka.bootstrap_servers,
        *flags(seaweed_s3),
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert f"{topic} -> {target} (created): 140 records sent" in done.stderr
    got = read_all(kafka, target)
    for p in (0, 1):
        assert [(m.key(), m.value()) for m in got[p]] == sent[p]  # tombstones: key + None
    assert sum(m.value() is None for p in (0, 1) for m in got[p]) == 20


def test_nulls_kept_as_values_are_refused_per_partition_unless_told(
    spark, kafka, seaweed_s3, weed_bucket, tmp_path
):
    """Without ``store.kafka.keys`` (an envelope keeps the key), a tombstone is kept as
    ``"value": null`` under ``tombstone/``, read the same as a value that was the JSON text
    ``null``: the restore used to send it as the 4-byte value, exit 0. Now the plan names each
    partition and the restore exits 1; ``--json-null=tombstone`` sends key + null value."""
    topic = f"nulls_{uuid.uuid4().hex[:6]}"
    sent = produced(kafka, topic, 2, 30)  # 4 tombstones per partition
    export(
        spark, kafka, seaweed_s3, weed_bucket, topic, tmp_path,
        **{"format.json.envelope": "true"},
    )  # fmt: skip
    url, target = f"s3://{weed_bucket}", f"{topic}_r"
    common = [url, topic, "--suffix", "_r", *flags(seaweed_s3)]

    plan = restore(*common, "--dry-run")
    assert plan.exit_code == 1, plan.output
    for p in (0, 1):
        line = f"{topic}[{p}]: 4 records under tombstone/ hold a null kept as a value"
        assert line in plan.output
    refused = restore(*common, "--bootstrap-servers", kafka.bootstrap_servers)
    assert refused.exit_code == 1, refused.output
    assert "--json-null=tombstone" in refused.stderr
    assert kafka.partitions(target) == []  # refused before anything was created or sent

    told = restore(*common, "--json-null", "tombstone", "--dry-run", "--output", "json")
    assert told.exit_code == 0, told.output
    assert json.loads(told.stdout)["records"] == 60
    done = restore(*common, "--json-null", "tombstone", "--bootstrap-servers",
                   kafka.bootstrap_servers)  # fmt: skip
    assert done.exit_code == 0, done.output
    assert f"{topic} -> {target} (created): 60 records sent" in done.stderr
    got = read_all(kafka, target)
    for p in (0, 1):
        assert [(m.key(), m.value()) for m in got[p]] == sent[p]


# -- 3: a rerun resumes from what the restore itself recorded --------------------------------
@pytest.mark.crash
def test_a_killed_restore_rerun_after_foreign_writes_sends_each_record_once(
    spark, kafka, seaweed_s3, weed_bucket, tmp_path
):
    """The restore is killed mid-way; then 20 + 5 records from elsewhere land in the target's
    partitions; the rerun used to count them as restored ("725 there already") and skip as
    many source records. Now it resumes from the position its committed transactions recorded:
    every source record once, in order, beside the 25 foreign ones."""
    topic = f"resume_{uuid.uuid4().hex[:6]}"
    sent = produced(kafka, topic, 2, 300)
    export(spark, kafka, seaweed_s3, weed_bucket, topic, tmp_path, **{"store.kafka.keys": "true"})
    url, target = f"s3://{weed_bucket}", f"{topic}_r"
    command = [  # takes 150 records, then blocks: the kill always lands mid-way
        sys.executable, "-m", "testkit.capped_cli", "150",
        "restore", url, topic, "--suffix", "_r", "--transaction-records", "40",
        "--bootstrap-servers", kafka.bootstrap_servers, *flags(seaweed_s3),
        "-O", "kafka.batch.num.messages=1", "-O", "kafka.linger.ms=0",
        "-O", "kafka.queue.buffering.max.messages=10",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not kafka.partitions(target) or kafka.high_watermarks(target).get(0, 0) < 130:
        assert process.poll() is None, process.stderr.read().decode()
        assert time.monotonic() < deadline, "the restore delivered nothing in 120 s"
        time.sleep(0.05)  # polling the broker with a deadline
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()

    foreign = {0: [(b"x%d" % n, b"foreign-0-%d" % n) for n in range(20)],
               1: [(b"y%d" % n, b"foreign-1-%d" % n) for n in range(5)]}  # fmt: skip
    for p, records in foreign.items():
        kafka.produce(target, records, partition=p)

    again = restore(url, topic, "--suffix", "_r", "--bootstrap-servers", kafka.bootstrap_servers,
                    *flags(seaweed_s3))  # fmt: skip
    assert again.exit_code == 0, again.output
    assert "restored before (the recorded position)" in again.stderr, again.stderr
    got = read_all(kafka, target)
    for p in (0, 1):
        pairs = [(m.key(), m.value()) for m in got[p]]
        theirs = [pair for pair in pairs if pair[1] is not None and pair[1].startswith(b"foreign")]
        assert theirs == foreign[p]
        assert [pair for pair in pairs if pair not in theirs] == sent[p]  # each once, in order
