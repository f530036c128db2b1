"""The metrics of ``blockgz export`` on the standalone cluster, scraped through an S3 fault and a
restart, and checked against the archive, Kafka and the S3 requests the fault proxy saw.

The export is a real ``blockgz export`` process (its own driver JVM) on the ``spark_cluster``
master; its tasks write through the fault proxy in front of SeaweedFS, which throttles three
data PUTs and resets one. The records are days old (their Kafka timestamps), and
``maxOffsetsPerTrigger`` makes the backlog last several batches, so the lag in seconds is seen
while it shrinks. The process is then stopped (SIGTERM, as an operator restarts it) and started
again on the same checkpoint and port: the committed offsets are right at once, the counters
start again at zero, and count exactly what the second run archived.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import defaultdict
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from blockgz.local_servers import fake_aws_env
from blockgz.local_servers.ports import free_ports
from blockgz.sink.write.config import SinkSettings
from blockgz.store import open_store
from testkit.kafka_data import HOUR_MS, T0, produce_numbered, read_exported
from testkit.s3 import s3_options

pytestmark = pytest.mark.crash

BLOCKGZ = str(Path(sys.executable).with_name("blockgz"))
PARTITIONS, FIRST, SECOND = 2, 24, 10
Labels = frozenset[tuple[str, str]]


def scrape(url: str) -> dict[str, dict[Labels, float]] | None:
    """``{sample name: {labels but job: value}}``, or ``None`` while nothing listens."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None
    out: dict[str, dict[Labels, float]] = defaultdict(dict)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if "le" not in s.labels:
                labels = frozenset((k, v) for k, v in s.labels.items() if k != "job")
                out[s.name][labels] = s.value
    return out


def per_partition(figures, name: str) -> dict[int, float]:
    return {int(dict(k)["partition"]): v for k, v in figures.get(name, {}).items()}


def s3_total(figures, outcome: str, operations=("PutObject", "UploadPart")) -> float:
    return sum(
        v
        for k, v in figures.get("blockgz_s3_requests_total", {}).items()
        if dict(k)["outcome"] == outcome and dict(k)["operation"] in operations
    )


def record_age(offset: int, now: float) -> float:
    """How old record ``offset`` is (the test data's timestamps step five hours per offset)."""
    return now - (T0 + offset * 5 * HOUR_MS) / 1000


class Export:
    """One ``blockgz export`` process on the cluster, its output in files."""

    def __init__(self, command: list[str], cwd: Path, name: str):
        self.out = (cwd / f"{name}.out").open("w")
        self.err_path = cwd / f"{name}.err"
        self.process = subprocess.Popen(
            command, cwd=cwd, stdout=self.out, stderr=self.err_path.open("w"),
            env={**os.environ, **fake_aws_env()},
        )  # fmt: skip

    def alive(self) -> None:
        assert self.process.poll() is None, self.err_path.read_text()[-3000:]

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(120)


def poll(url: str, export: Export, done, what: str, timeout_s: float = 240):
    """Scrape until ``done(figures)`` holds; every scrape is handed to ``done``."""
    deadline = time.monotonic() + timeout_s
    while True:
        export.alive()
        figures = scrape(url)
        if figures is not None and done(figures):
            return figures
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s} s: {figures}"
        time.sleep(0.2)  # a scrape interval, not synchronisation: `done` decides


def test_figures_hold_on_the_cluster_through_an_s3_fault_and_a_restart(
    spark_cluster, kafka, s3_server, s3_proxy, bucket, tmp_path
):
    topic = "metrics-cl-" + bucket[-8:]
    kafka.create_topic(topic, partitions=PARTITIONS)
    produce_numbered(kafka.bootstrap_servers, topic, PARTITIONS, FIRST)  # days-old timestamps
    (port,) = free_ports("127.0.0.1", 1)
    url = f"http://127.0.0.1:{port}/metrics"
    settings = {
        "name": "metrics-cluster",
        "topics": topic,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": bucket,
        **s3_options(s3_proxy.endpoint_url),
        "s3.part.retries": "10",
        "s3.compression.type": "blockgzip",
        "flush.size": "4",
        "maxOffsetsPerTrigger": "6",  # a backlog that lasts several batches
        "blockgz.trigger.interval": "1 second",
        "blockgz.metrics.port": str(port),
    }
    config = tmp_path / "job.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    command = [BLOCKGZ, "export", str(config), "--master", spark_cluster.master_url]
    command += ["--checkpoint", str(tmp_path / "ckpt")]
    data = f"/{bucket}/topics/"
    s3_proxy.inject("503", times=3, method="PUT", path_contains=data)
    s3_proxy.inject("reset", times=1, method="PUT", path_contains=data)

    # -- run 1: a backlog, an S3 fault ----------------------------------------------------------
    first = Export(command, tmp_path, "run1")
    lag_seen: list[tuple[int, float, float]] = []  # (committed offset, lag seconds, scrape time)

    def caught_up(figures) -> bool:
        committed = per_partition(figures, "blockgz_committed_offset")
        lag = per_partition(figures, "blockgz_lag_seconds")
        waiting = per_partition(figures, "blockgz_lag_records")
        for p, offset in committed.items():
            if waiting.get(p, 0) > 0 and lag.get(p, 0) > 0:
                lag_seen.append((int(offset), lag[p], time.time()))
        return committed == {p: FIRST for p in range(PARTITIONS)}

    figures = poll(url, first, caught_up, "run 1 caught up")
    faulted = [r for r in s3_proxy.requests if r.faulted]
    assert [r.fault for r in faulted].count("503") == 3 and len(faulted) == 4
    # Each fault the proxy dealt is counted once, by the task that met it, and retried.
    assert s3_total(figures, "server_error") == 3
    assert s3_total(figures, "connection_error") == 1
    retries = figures["blockgz_s3_retries_total"]
    assert (
        sum(v for k, v in retries.items() if dict(k)["operation"] in ("PutObject", "UploadPart"))
        == 4
    )
    data_puts = [r for r in s3_proxy.requests if r.method == "PUT" and data in r.path]
    assert s3_total(figures, "ok") >= sum(r.status == 200 for r in data_puts)
    # The lag in seconds was the age of the record at the committed offset while it waited.
    assert lag_seen, "the backlog was never seen with a lag in seconds"
    # Right after a commit, until the new oldest record's timestamp is read, the figure is the
    # previous one: an upper bound, never below the truth.
    exact = [abs(lag - record_age(offset, at)) < 30 for offset, lag, at in lag_seen]
    assert any(exact), lag_seen
    for offset, lag, at in lag_seen:
        assert record_age(offset, at) - 30 <= lag <= record_age(0, at) + 30, (offset, lag)
    assert per_partition(figures, "blockgz_lag_seconds") == {p: 0 for p in range(PARTITIONS)}
    assert per_partition(figures, "blockgz_records_written_total") == {
        p: FIRST for p in range(PARTITIONS)
    }
    assert first.stop() == 0, first.err_path.read_text()[-3000:]

    # -- run 2: restarted on the same checkpoint and port --------------------------------------
    produce_numbered(kafka.bootstrap_servers, topic, PARTITIONS, SECOND, start=FIRST)
    second = Export(command, tmp_path, "run2")
    restarted = poll(url, second, lambda f: per_partition(f, "blockgz_end_offset"), "run 2 serving")
    # Right at once: the committed offsets are the manifests' (run 1's plus what this run has
    # written by then), not this process's count from zero.
    written = per_partition(restarted, "blockgz_records_written_total")
    committed_at_start = per_partition(restarted, "blockgz_committed_offset")
    assert committed_at_start == {p: FIRST + written.get(p, 0) for p in range(PARTITIONS)}
    assert per_partition(restarted, "blockgz_end_offset") == {
        p: FIRST + SECOND for p in range(PARTITIONS)
    }
    done = {p: FIRST + SECOND for p in range(PARTITIONS)}
    figures = poll(
        url, second, lambda f: per_partition(f, "blockgz_committed_offset") == done,
        "run 2 caught up",
    )  # fmt: skip
    assert second.stop() == 0, second.err_path.read_text()[-3000:]

    # -- against the archive -------------------------------------------------------------------
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    read_exported(store, prefix).assert_exactly_once(PARTITIONS, FIRST + SECOND)
    log = SinkSettings.from_options({"s3.bucket.name": bucket, "name": "metrics-cluster"})
    manifests = log.manifest_log(store, prefix)
    run2_files = [f for f in manifests.committed_files() if f.first_offset >= FIRST]
    # Counters count what this process saw: the second run's records and objects only.
    assert per_partition(figures, "blockgz_records_written_total") == {
        p: SECOND for p in range(PARTITIONS)
    }
    for p in range(PARTITIONS):
        mine = [f for f in run2_files if f.partition == p]
        labels = frozenset({("topic", topic), ("partition", str(p))})
        assert figures["blockgz_objects_committed_total"][labels] == len(mine)
        assert figures["blockgz_bytes_stored_total"][labels] == sum(
            store.head(prefix + f.key).size for f in mine
        )
    assert per_partition(figures, "blockgz_lag_records") == {p: 0 for p in range(PARTITIONS)}
    assert s3_total(figures, "server_error") == 0, "run 2 met no fault: its counters say so"
