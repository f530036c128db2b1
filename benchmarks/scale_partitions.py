"""One export over many partitions (issue #44, "Thousands of partitions"): what grows with N.

For each N (``--partitions 100,1000,10000``) this makes N/100 topics of 100 partitions on a
loopback Apache Kafka 4 (the tests' :class:`ApacheKafka`), ``RECORDS`` records per partition,
and runs ``blockgz export --once`` of them into SeaweedFS (the tests' :class:`SeaweedS3`) as a
subprocess, sampling its process tree with psutil. It reports:

* batch planning per batch: Spark's ``latestOffset`` + ``queryPlanning`` + ``getBatch`` from the
  export's ``batch`` events (``blockgz.log.format=json``), and the batch's whole time;
* peak RSS of the Python driver, the driver JVM and the Python workers (local mode: executors
  live in the driver JVM);
* the bytes of the job's manifests and of its catalog under ``_blockgz/<job>/``;
* the snapshot's time (the ``snapshot`` event);
* the wall time of ``blockgz status`` and ``blockgz audit`` of the job's config afterwards.

With ``--running SECONDS`` the export runs without ``--once`` for that long (its default
5-second trigger) while, after its first batch, a producer writes to one partition of every
topic each second, then is stopped with SIGTERM: the table then gives the first batch's
planning and the later batches' median and maximum (no ``initialOffset``; with
``--option rotate.interval.ms=…`` the hold clock too).

Run: ``.venv/bin/python -m benchmarks.scale_partitions --partitions 100,1000``. Not a test:
``make test`` never runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from blockgz.local_servers import fake_aws_env
from blockgz.local_servers.apache_kafka import ApacheKafka
from blockgz.local_servers.seaweed import SeaweedS3
from blockgz.store import open_store
from testkit.s3 import s3_options

BLOCKGZ = str(Path(sys.executable).with_name("blockgz"))
PER_TOPIC = 100
RECORDS = 3
CREATE_CHUNK = 20  # topics per CreateTopics request
PLANNING = ("latestOffset", "queryPlanning", "getBatch")
MiB = 1024 * 1024
JOB = "scale"


@dataclass
class Peaks:
    """Peak RSS (bytes) per role in the export's process tree, sampled every 0.2 s."""

    driver_python: int = 0
    driver_jvm: int = 0
    workers: int = 0
    tree: int = 0
    worker_count: int = 0
    #: CPU seconds (user + system) per process of the tree, the last seen (a process that
    #: ends between samples loses up to 0.2 s): on a loaded machine a steadier measure than
    #: wall time.
    cpu_s: dict[int, float] = field(default_factory=dict)


@dataclass
class Result:
    """What one N measured."""

    partitions: int
    setup_s: float = 0.0
    export_s: float = 0.0
    exit_code: int = 0
    load: tuple[float, float] = (0.0, 0.0)  # 1-minute load average before and after the export
    batches: list[dict[str, int]] = field(default_factory=list)
    snapshot_ms: list[int] = field(default_factory=list)
    peaks: Peaks = field(default_factory=Peaks)
    manifest_bytes: int = 0
    manifests: int = 0
    head_bytes: int = 0
    catalog_bytes: int = 0
    catalog_objects: int = 0
    compact_s: float = 0.0
    status_s: float = 0.0
    status_code: int = 0
    audit_s: float = 0.0
    audit_code: int = 0
    #: From the export's ``start`` line (just before Spark starts the query) to the end of its
    #: first batch (Spark's start of it + ``triggerExecution``); -1 if not seen.
    first_batch_done_s: float = -1.0


def make_topics(kafka: ApacheKafka, prefix: str, partitions: int) -> list[str]:
    """``partitions / PER_TOPIC`` topics created in chunks, each with ``RECORDS`` records per
    partition; waits until every partition's high watermark says so."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    count = max(1, partitions // PER_TOPIC)
    topics = [f"{prefix}-{n:04d}" for n in range(count)]
    admin = kafka.admin()
    for start in range(0, count, CREATE_CHUNK):
        chunk = topics[start : start + CREATE_CHUNK]
        futures = admin.create_topics(
            [NewTopic(t, PER_TOPIC, 1) for t in chunk], request_timeout=120
        )
        for future in futures.values():
            future.result(timeout=120)
    _wait_led(kafka, topics)
    producer = Producer(kafka.client_config({"linger.ms": 20}))
    for topic in topics:
        for partition in range(PER_TOPIC):
            for i in range(RECORDS):
                value = b'{"p":%d,"i":%d}' % (partition, i)
                _produce(producer, topic, value, partition)
    if producer.flush(300):
        raise TimeoutError("records left undelivered")
    return topics


def _produce(producer: Any, topic: str, value: bytes, partition: int) -> None:
    """One record, polling while librdkafka's queue is full."""
    while True:
        try:
            producer.produce(topic, value, partition=partition)
            return
        except BufferError:
            producer.poll(0.1)


def _wait_led(kafka: ApacheKafka, topics: list[str], timeout_s: float = 600.0) -> None:
    """Until every partition of ``topics`` has a leader in fresh metadata."""
    deadline = time.monotonic() + timeout_s
    wanted = set(topics)
    while True:
        metadata = kafka.admin().list_topics(timeout=60)
        led = sum(
            1
            for name in wanted
            if (meta := metadata.topics.get(name)) is not None
            and meta.error is None
            and len(meta.partitions) == PER_TOPIC
            and all(p.leader >= 0 and p.error is None for p in meta.partitions.values())
        )
        if led == len(wanted):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{led}/{len(wanted)} topics led after {timeout_s:.0f} s")
        time.sleep(0.5)  # polling the broker's metadata with a deadline


def _role(proc: psutil.Process) -> str:
    """``jvm``, ``worker`` or ``python`` for a process of the export's tree."""
    try:
        cmd = " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return "gone"
    if "java" in proc.name() or "/java" in cmd:
        return "jvm"
    if "pyspark.daemon" in cmd or "pyspark.worker" in cmd or "pyspark/daemon" in cmd:
        return "worker"
    return "python"


def sample_tree(pid: int, peaks: Peaks, stop: threading.Event) -> None:
    """Record the peak RSS per role of ``pid``'s tree until ``stop``."""
    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    while not stop.is_set():
        sums = {"jvm": 0, "worker": 0, "python": 0}
        workers = 0
        try:
            procs = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        for proc in procs:
            try:
                rss = proc.memory_info().rss
                times = proc.cpu_times()
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            peaks.cpu_s[proc.pid] = times.user + times.system
            role = "python" if proc.pid == pid else _role(proc)
            if role in sums:
                sums[role] += rss
                workers += role == "worker"
        peaks.driver_python = max(peaks.driver_python, sums["python"])
        peaks.driver_jvm = max(peaks.driver_jvm, sums["jvm"])
        peaks.workers = max(peaks.workers, sums["worker"])
        peaks.tree = max(peaks.tree, sum(sums.values()))
        peaks.worker_count = max(peaks.worker_count, workers)
        stop.wait(0.2)


def job_options(kafka: ApacheKafka, s3: SeaweedS3, bucket: str, prefix: str) -> dict[str, str]:
    """The export's config: every topic of this N by regex, JSON log lines."""
    return {
        "name": JOB,
        "topics.regex": f"{prefix}-.*",
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": bucket,
        **s3_options(s3.endpoint_url),
        "blockgz.log.format": "json",
    }


def run_export(
    workdir: Path, result: Result, *, running_s: float = 0.0, feed: Any = None
) -> list[str]:
    """``blockgz export --once`` with its tree sampled; returns its output lines. With
    ``running_s``, a running export instead, stopped with SIGTERM after that long while
    ``feed(stop_event)`` produces on a thread."""
    config = workdir / "job.properties"
    started = time.monotonic()
    once = [] if running_s else ["--once"]
    with (workdir / "out.log").open("w") as out:
        proc = subprocess.Popen(
            [BLOCKGZ, "export", str(config), *once, "--checkpoint", str(workdir / "ckpt")],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env={**os.environ, **fake_aws_env()},
        )
        stop = threading.Event()
        sampler = threading.Thread(target=sample_tree, args=(proc.pid, result.peaks, stop))
        sampler.start()
        feeder = threading.Thread(target=feed, args=(stop,)) if feed else None
        if feeder:
            feeder.start()
        try:
            if running_s:
                try:
                    result.exit_code = proc.wait(timeout=running_s)
                except subprocess.TimeoutExpired:
                    proc.send_signal(signal.SIGTERM)
                    result.exit_code = proc.wait(timeout=600)
            else:
                result.exit_code = proc.wait(timeout=3600)
        finally:
            stop.set()
            sampler.join()
            if feeder:
                feeder.join()
    result.export_s = time.monotonic() - started
    lines = (workdir / "out.log").read_text().splitlines()
    for path in workdir.rglob("*.log"):
        if path.name != "out.log":
            lines += path.read_text(errors="replace").splitlines()
    return lines


def feeder(kafka: ApacheKafka, topics: list[str], checkpoint: Path) -> Any:
    """A producer for a running export: once the first batch is committed (its backlog is
    every partition), each second one record to one partition of every topic (a different one
    each second), until its stop event is set. Later batches then plan over every partition
    and write a few hundred."""

    def feed(stop: threading.Event) -> None:
        from confluent_kafka import Producer

        first = checkpoint / "commits" / "0"
        while not first.exists():
            if stop.wait(0.5):  # polling Spark's commit log; the export may end first
                return
        producer = Producer(kafka.client_config({"linger.ms": 20}))
        tick = 0
        while not stop.wait(1.0):
            for topic in topics:
                _produce(producer, topic, b'{"live":%d}' % tick, tick % PER_TOPIC)
            producer.poll(0)
            tick += 1
        producer.flush(60)

    return feed


def parse_events(lines: list[str], result: Result) -> None:
    """The ``batch`` and ``snapshot`` events of the export's JSON log lines."""
    seen: set[int] = set()
    query_started: datetime | None = None
    for line in lines:
        start = line.find("{")
        if start < 0:
            continue
        try:
            record = json.loads(line[start:])
        except ValueError:
            continue
        event = record.get("event") if isinstance(record, dict) else None
        if not isinstance(event, dict):
            continue
        if event.get("kind") == "start" and "time" in record:
            query_started = datetime.fromisoformat(record["time"])
        elif event.get("kind") == "batch" and event.get("batch") not in seen:
            seen.add(event["batch"])
            durations = dict(event.get("duration_ms") or {})
            result.batches.append(durations)
            if len(seen) == 1 and query_started is not None and event.get("started"):
                began = datetime.fromisoformat(event["started"].replace("Z", "+00:00"))
                done = began.timestamp() + durations.get("triggerExecution", 0) / 1000
                result.first_batch_done_s = done - query_started.timestamp()
        elif event.get("kind") == "snapshot":
            result.snapshot_ms.append(int(event.get("ms", 0)))


def measure_store(s3: SeaweedS3, bucket: str, result: Result) -> None:
    """Bytes of the job's manifests and catalog head as the export left them, then of the
    catalog root and segments a compaction of them writes (what ``blockgz.catalog.every``
    batches would; one ``--once`` batch makes none)."""
    from blockgz.archive.layout import Layout
    from blockgz.commits.catalog import Catalog
    from blockgz.commits.manifests import Manifests

    store, prefix = open_store(f"s3://{bucket}", s3_options(s3.endpoint_url))
    for info in store.list("_blockgz/"):
        if "/manifests/" in info.key:
            result.manifest_bytes += info.size
            result.manifests += 1
        elif info.key.endswith(("catalog/head.json", "_blockgz/heads.json")):
            result.head_bytes += info.size  # the prefix's heads document since issue 44
    started = time.monotonic()
    Catalog(Manifests(store, prefix, Layout(), JOB)).compact()
    result.compact_s = time.monotonic() - started
    for info in store.list("_blockgz/"):
        if "/catalog/" in info.key and not info.key.endswith("head.json"):  # not heads.json
            result.catalog_bytes += info.size
            result.catalog_objects += 1


def timed_cli(workdir: Path, *args: str) -> tuple[float, int]:
    """Wall time and exit code of ``blockgz <args> job.properties``."""
    started = time.monotonic()
    proc = subprocess.run(
        [BLOCKGZ, *args, str(workdir / "job.properties")],
        capture_output=True,
        text=True,
        timeout=3600,
        cwd=workdir,
        env={**os.environ, **fake_aws_env()},
    )
    (workdir / f"{args[0]}.out").write_text(proc.stdout + proc.stderr)
    return time.monotonic() - started, proc.returncode


def measure(
    kafka: ApacheKafka,
    s3: SeaweedS3,
    partitions: int,
    root: Path,
    *,
    export_only: bool = False,
    extra: dict[str, str] | None = None,
    running_s: float = 0.0,
) -> Result:
    """Topics, export, store sizes, status and audit for one N (``export_only``: the export's
    figures alone; ``extra``: more job options, e.g. ``blockgz.ranges.per.task=1``;
    ``running_s``: a running export fed by :func:`feeder` for that long)."""
    result = Result(partitions)
    run = uuid.uuid4().hex[:6]
    prefix, bucket = f"scale{partitions}-{run}", f"scale{partitions}-{run}"
    workdir = root / str(partitions)
    workdir.mkdir(parents=True)
    started = time.monotonic()
    topics = make_topics(kafka, prefix, partitions)
    s3.client().create_bucket(Bucket=bucket)
    result.setup_s = time.monotonic() - started
    options = {**job_options(kafka, s3, bucket, prefix), **(extra or {})}
    (workdir / "job.properties").write_text("".join(f"{k}={v}\n" for k, v in options.items()))
    before = os.getloadavg()[0]
    feed = feeder(kafka, topics, workdir / "ckpt") if running_s else None
    parse_events(run_export(workdir, result, running_s=running_s, feed=feed), result)
    result.load = (before, os.getloadavg()[0])
    if export_only:
        return result
    result.status_s, result.status_code = timed_cli(workdir, "status")
    result.audit_s, result.audit_code = timed_cli(workdir, "audit")
    measure_store(s3, bucket, result)
    return result


def planning_ms(durations: dict[str, int]) -> int:
    """A batch's planning: Spark's ``latestOffset`` + ``queryPlanning`` + ``getBatch``."""
    return sum(int(durations.get(name, 0)) for name in PLANNING)


def row(result: Result) -> dict[str, Any]:
    """The table's numbers for one N."""
    data = [b for b in result.batches if b.get("addBatch")] or result.batches
    plans = [planning_ms(b) for b in data]
    later = [planning_ms(b) for b in result.batches[1:] if b.get("latestOffset") is not None]
    return {
        "partitions": result.partitions,
        "batches": len(result.batches),
        "planning_first_ms": plans[0] if plans else 0,
        "first_batch_done_s": result.first_batch_done_s,
        "planning_later_median_ms": int(statistics.median(later)) if later else 0,
        "planning_later_max_ms": max(later, default=0),
        "latestOffset_later_median_ms": int(
            statistics.median(b.get("latestOffset", 0) for b in result.batches[1:])
        )
        if later
        else 0,
        "planning_ms_max": max(plans, default=0),
        "latestOffset_ms": max((b.get("latestOffset", 0) for b in data), default=0),
        "getBatch_ms": max((b.get("getBatch", 0) for b in data), default=0),
        "queryPlanning_ms": max((b.get("queryPlanning", 0) for b in data), default=0),
        "trigger_ms_max": max((b.get("triggerExecution", 0) for b in data), default=0),
        "addBatch_ms_max": max((b.get("addBatch", 0) for b in data), default=0),
        "python_mib": result.peaks.driver_python / MiB,
        "jvm_mib": result.peaks.driver_jvm / MiB,
        "workers_mib": result.peaks.workers / MiB,
        "tree_mib": result.peaks.tree / MiB,
        "tree_cpu_s": sum(result.peaks.cpu_s.values()),
        "manifest_kib": result.manifest_bytes / 1024,
        "manifests": result.manifests,
        "head_kib": result.head_bytes / 1024,
        "catalog_kib": result.catalog_bytes / 1024,
        "catalog_objects": result.catalog_objects,
        "compact_s": result.compact_s,
        "workers": result.peaks.worker_count,
        "snapshot_ms": max(result.snapshot_ms, default=-1),
        "export_s": result.export_s,
        "status_s": result.status_s,
        "audit_s": result.audit_s,
        "codes": f"{result.exit_code}/{result.status_code}/{result.audit_code}",
        "load": "{:.1f} / {:.1f}".format(*result.load),
        "setup_s": result.setup_s,
    }


def render(rows: list[dict[str, Any]]) -> str:
    """A markdown table, one column per N, with the growth from the first N."""
    labels = [
        ("batches", "batches", "{:,}"),
        ("planning_first_ms", "planning of the first batch, ms", "{:,}"),
        ("first_batch_done_s", "first batch done, s after the query's start", "{:,.2f}"),
        ("planning_later_median_ms", "planning of later batches, median, ms", "{:,}"),
        ("planning_later_max_ms", "planning of later batches, max, ms", "{:,}"),
        ("latestOffset_later_median_ms", "  of which latestOffset, median, ms", "{:,}"),
        ("planning_ms_max", "planning per batch (latestOffset+queryPlanning+getBatch), ms", "{:,}"),
        ("latestOffset_ms", "  of which latestOffset, ms", "{:,}"),
        ("getBatch_ms", "  of which getBatch, ms", "{:,}"),
        ("queryPlanning_ms", "  of which queryPlanning, ms", "{:,}"),
        ("addBatch_ms_max", "addBatch (the write), ms", "{:,}"),
        ("trigger_ms_max", "whole batch (triggerExecution), ms", "{:,}"),
        ("python_mib", "driver Python peak RSS, MiB", "{:,.0f}"),
        ("jvm_mib", "driver JVM (+ local executors) peak RSS, MiB", "{:,.0f}"),
        ("workers_mib", "Python workers peak RSS (sum), MiB", "{:,.0f}"),
        ("workers", "Python worker processes (peak)", "{:,}"),
        ("tree_mib", "whole export tree peak RSS, MiB", "{:,.0f}"),
        ("tree_cpu_s", "whole export tree CPU (user + system), s", "{:,.1f}"),
        ("manifest_kib", "manifests, KiB", "{:,.1f}"),
        ("manifests", "manifest objects", "{:,}"),
        ("head_kib", "heads document (catalog head) after the export, KiB", "{:,.1f}"),
        ("catalog_kib", "catalog root + segments after one compaction, KiB", "{:,.1f}"),
        ("catalog_objects", "catalog objects (root + segments)", "{:,}"),
        ("compact_s", "that compaction's wall, s", "{:,.1f}"),
        ("snapshot_ms", "snapshot, ms", "{:,}"),
        ("export_s", "`blockgz export --once` wall, s", "{:,.1f}"),
        ("status_s", "`blockgz status` wall, s", "{:,.1f}"),
        ("audit_s", "`blockgz audit` wall, s", "{:,.1f}"),
        ("codes", "exit codes export/status/audit", "{}"),
        ("load", "load average (1 min) before / after the export", "{}"),
    ]
    head = "| measure | " + " | ".join(f"{r['partitions']:,}" for r in rows) + " |"
    lines = [head, "|---" * (len(rows) + 1) + "|"]
    for key, label, fmt in labels:
        cells = [fmt.format(r[key]) for r in rows]
        if len(rows) > 1 and isinstance(rows[0][key], (int, float)) and rows[0][key]:
            cells[-1] += " (" + " → ".join(f"{r[key] / rows[0][key]:.1f}×" for r in rows[1:]) + ")"
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    """Start Kafka and SeaweedFS once, measure each N, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="100,1000")
    parser.add_argument("--heap", default="2g", help="the broker's JVM heap")
    parser.add_argument(
        "--export-only",
        action="store_true",
        help="measure the export alone (no status, audit, store sizes or compaction)",
    )
    parser.add_argument(
        "--option", action="append", default=[], help="KEY=VALUE: one more job option"
    )
    parser.add_argument(
        "--running",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="a running export (no --once) for this long, fed by a producer, then SIGTERM",
    )
    args = parser.parse_args()
    extra = dict(option.split("=", 1) for option in args.option)
    counts = [int(n) for n in args.partitions.split(",")]
    rows: list[dict[str, Any]] = []
    root = Path(tempfile.mkdtemp(prefix="scale-partitions-"))
    with ApacheKafka(heap=args.heap) as kafka, SeaweedS3() as s3:
        for n in counts:
            result = measure(
                kafka,
                s3,
                n,
                root,
                export_only=args.export_only or bool(args.running),
                extra=extra,
                running_s=args.running,
            )
            rows.append(row(result))
            print(json.dumps(rows[-1]), flush=True)
    print(render(rows))
    print(f"logs: {root}")


if __name__ == "__main__":
    main()
