"""Produce-to-readable latency of a running export (issue #44, "Latency").

How long after a record is produced to Kafka can ``Archive.seek`` (the code path of
``blockgz seek``) return it? For each configuration this starts ``blockgz export`` (a running
job, not ``--once``) as a subprocess against a loopback Apache Kafka 4 (the tests'
:class:`ApacheKafka`) and SeaweedFS (:class:`SeaweedS3`), and runs two threads:

* a producer that writes ``rate`` records a second round-robin over the topic's partitions,
  each value carrying its produce time, and remembers ``(partition, offset) -> produce time``
  from the delivery reports;
* a poller that asks the job's catalog for the committed end of every partition every
  ``--poll`` seconds (the head and the manifests after the catalog root: what a reader trusts)
  and notes when each end moved; for up to ``--confirm`` partitions that moved, it opens the
  archive afresh and seeks the newest committed offset with ``Archive.seek``, checking that the
  record it returns is the one produced (its produce time in the value).

An offset is readable at the first poll whose committed end passes it. Records produced in the
measured window (after the first commit and a warm-up) give p50/p99/max; the producer keeps
going until all of them are readable (a held partial file needs later records to close it), then
the export is stopped with SIGTERM. Each row also counts the data objects the configuration
wrote (per partition per hour) and their mean size: what the latency is traded for.

Run::

    .venv/bin/python -m benchmarks.latency                       # make bench-latency
    .venv/bin/python -m benchmarks.latency --runs low:default --seconds 30   # a quick look

Not a test: ``make test`` never runs it.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import random
import re
import signal
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from blockgz.local_servers.apache_kafka import ApacheKafka
from blockgz.local_servers.seaweed import SeaweedS3
from testkit.s3 import s3_options
from testkit.service_export import ServiceExport

ROOT = Path(__file__).resolve().parent.parent
JOB = "latency"
#: Traffic shapes: partitions and records a second in all.
TRAFFIC: dict[str, tuple[int, int]] = {"low": (20, 50), "high": (20, 2000)}
#: Export settings per configuration and traffic (added to the job's config).
CONFIGS: dict[str, dict[str, dict[str, str]]] = {
    "default": {"low": {}, "high": {}},
    "trigger-1s": {
        "low": {"blockgz.trigger.interval": "1 second"},
        "high": {"blockgz.trigger.interval": "1 second"},
    },
    "auto-rotate-20s": {
        "low": {"flush.size": "1000", "rotate.interval.ms": "20000"},
        "high": {"flush.size": "1000", "rotate.interval.ms": "20000"},
    },
    "auto-rotate-20s-trigger-1s": {
        "low": {
            "flush.size": "1000",
            "rotate.interval.ms": "20000",
            "blockgz.trigger.interval": "1 second",
        },
        "high": {
            "flush.size": "1000",
            "rotate.interval.ms": "20000",
            "blockgz.trigger.interval": "1 second",
        },
    },
    "hold-true-flush": {
        "low": {"flush.size": "50", "blockgz.hold.partial.files": "true"},
        "high": {"flush.size": "1000", "blockgz.hold.partial.files": "true"},
    },
}
DEFAULT_RUNS = (
    "low:default,low:auto-rotate-20s,low:hold-true-flush,"
    "high:default,high:auto-rotate-20s,high:trigger-1s"
)
PAD = "x" * 200  # values of ~260 bytes


@dataclass
class Stamps:
    """Produce times (monotonic seconds) by partition and offset, from delivery reports."""

    by_partition: dict[int, dict[int, float]] = field(default_factory=dict)
    errors: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def delivered(self, err: Any, msg: Any) -> None:
        """A delivery report: the record's offset and its produce time (from its value)."""
        if err is not None:
            self.errors += 1
            return
        stamp = json.loads(msg.value())["t"]
        with self.lock:
            self.by_partition.setdefault(msg.partition(), {})[msg.offset()] = stamp

    def window(self, begin: float, end: float) -> list[tuple[int, int, float]]:
        """``(partition, offset, produced)`` of the records produced in ``[begin, end)``."""
        with self.lock:
            return [
                (p, o, t)
                for p, offsets in self.by_partition.items()
                for o, t in offsets.items()
                if begin <= t < end
            ]

    def count(self) -> int:
        """The records delivered so far."""
        with self.lock:
            return sum(len(offsets) for offsets in self.by_partition.values())

    def of(self, partition: int, offset: int) -> float | None:
        with self.lock:
            return self.by_partition.get(partition, {}).get(offset)


def produce(
    bootstrap: str, topic: str, partitions: int, rate: int, stamps: Stamps, stop: threading.Event
) -> int:
    """``rate`` records a second, round-robin over ``partitions``, until ``stop``; the count."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    begin, sent = time.monotonic(), 0
    while not stop.is_set():
        due = int((time.monotonic() - begin) * rate)
        while sent < due:
            value = json.dumps({"n": sent, "t": time.monotonic(), "pad": PAD}).encode()
            producer.produce(
                topic, value, partition=sent % partitions, on_delivery=stamps.delivered
            )
            sent += 1
        producer.poll(0)
        stop.wait(0.005)  # the producer's pace: a due count every 5 ms
    producer.flush(30)
    return sent


@dataclass
class Confirmations:
    """Seeks of newly committed offsets: how long each took, and any that failed."""

    seek_ms: list[float] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)


@dataclass
class Poller:
    """When each partition's committed end moved (:attr:`ends`: ``[(seen_at, end)]``)."""

    options: dict[str, str]
    reading: dict[str, str]
    url: str
    topic: str
    stamps: Stamps
    confirm: int
    ends: dict[int, list[tuple[float, int]]] = field(default_factory=dict)
    poll_ms: list[float] = field(default_factory=list)
    checks: Confirmations = field(default_factory=Confirmations)
    error: BaseException | None = None

    def run(self, period_s: float, stop: threading.Event) -> None:
        """Poll the catalog every ``period_s`` until ``stop``."""
        from blockgz.commits.manifest_log import ManifestLog
        from blockgz.options import as_options

        log = ManifestLog.from_options(as_options(self.options))
        try:
            while not stop.is_set():
                started = time.monotonic()
                offsets = log.committed_offsets().get(self.topic, {})
                seen = time.monotonic()
                self.poll_ms.append((seen - started) * 1000)
                moved = self.note(seen, offsets)
                self.check(random.sample(moved, min(self.confirm, len(moved))), offsets)
                stop.wait(max(0.0, started + period_s - time.monotonic()))  # the poll period
        except BaseException as exc:  # reported by the main thread
            self.error = exc

    def note(self, seen: float, offsets: dict[int, int]) -> list[int]:
        """Record the ends that moved; the partitions they moved in."""
        moved = []
        for partition, end in offsets.items():
            history = self.ends.setdefault(partition, [])
            if not history or end > history[-1][1]:
                history.append((seen, end))
                moved.append(partition)
        return moved

    def check(self, partitions: list[int], offsets: dict[int, int]) -> None:
        """Seek the newest committed offset of each of ``partitions`` in a fresh archive."""
        if not partitions:
            return
        from blockgz.reader import open_archive

        with open_archive(self.url, self.reading) as archive:
            for partition in partitions:
                offset = offsets[partition] - 1
                started = time.monotonic()
                records = list(archive.seek(self.topic, partition, offset, count=1))
                self.checks.seek_ms.append((time.monotonic() - started) * 1000)
                self.verify(partition, offset, records)

    def verify(self, partition: int, offset: int, records: list[Any]) -> None:
        """The seek returned the record produced at ``partition``/``offset``."""
        want = self.stamps.of(partition, offset)
        got = json.loads(records[0].value)["t"] if records else None
        if not records or records[0].offset != offset or got != want:
            self.checks.wrong.append(f"{partition}@{offset}: got {records[:1]}, want t={want}")

    def readable_at(self, partition: int, offset: int) -> float | None:
        """When ``offset`` of ``partition`` was first seen committed (``None``: not yet)."""
        history = self.ends.get(partition, [])
        at = bisect.bisect_right([end for _, end in history], offset)
        return history[at][0] if at < len(history) else None

    def committed(self) -> int:
        """The records committed so far, by the newest ends seen."""
        return sum(h[-1][1] for h in self.ends.values() if h)

    def first_commit(self) -> float | None:
        """When any end was first seen."""
        return min((h[0][0] for h in self.ends.values() if h), default=None)


@dataclass
class Result:
    """One configuration's numbers."""

    traffic: str
    config: str
    settings: dict[str, str]
    partitions: int
    rate: int
    measured: int = 0
    unread: int = 0
    latencies_s: list[float] = field(default_factory=list)
    #: Data objects, their bytes and the records committed during the window.
    objects: int = 0
    object_bytes: int = 0
    records: int = 0
    window_s: float = 0.0
    run_s: float = 0.0
    cpu_s: float = 0.0
    seeks: int = 0
    seek_ms_p50: float = 0.0
    wrong: int = 0
    poll_ms_p50: float = 0.0
    batch_s: float = 0.0
    load: str = ""
    exit_code: int | None = None


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (nearest rank) of ``values`` (0 when empty).

    >>> percentile([3.0, 1.0, 2.0, 4.0], 0.5), percentile(list(map(float, range(100))), 0.99)
    (3.0, 99.0)
    """
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages, as ``uptime`` shows them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def write_config(
    path: Path, kafka: ApacheKafka, s3: SeaweedS3, bucket: str, topic: str, settings: dict[str, str]
) -> dict[str, str]:
    """The job's config file; the options (with keys) the poller reads the catalog with."""
    options = {
        "name": JOB,
        "topics": topic,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": bucket,
        **s3_options(s3.endpoint_url),
        **settings,
    }
    path.write_text("".join(f"{k}={v}\n" for k, v in options.items()))
    return options


def tree_cpu_s(export: ServiceExport) -> float:
    """User + system CPU seconds of the export's process tree so far."""
    total = 0.0
    for pid in export.tree():
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def count_objects(s3: SeaweedS3, bucket: str) -> tuple[int, int]:
    """The data objects under ``topics/`` (no sidecars): their number and bytes."""
    from blockgz.store import open_store

    store, _ = open_store(f"s3://{bucket}", s3_options(s3.endpoint_url))
    found = [i for i in store.list("topics/") if not i.key.rsplit("/", 1)[-1].startswith(".")]
    return len(found), sum(i.size for i in found)


def wait_for(condition: Any, deadline: float, export: ServiceExport, what: str) -> bool:
    """Poll ``condition`` until it holds (True) or ``deadline`` (False); fail if the export
    ended."""
    while not condition():
        if export.proc.poll() is not None:
            tail = export.output.read_text(errors="replace")[-3000:]
            raise SystemExit(f"the export ended before {what}:\n{tail}")
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)  # polling the poller's state with a deadline
    return True


def measure(
    kafka: ApacheKafka,
    s3: SeaweedS3,
    traffic: str,
    config: str,
    args: argparse.Namespace,
    root: Path,
) -> Result:
    """Run one configuration: export, producer and poller; the latencies of the window."""
    partitions, rate = TRAFFIC[traffic]
    settings = CONFIGS[config][traffic]
    result = Result(traffic, config, settings, partitions, rate, load=load_average())
    result.window_s = args.seconds
    run = f"{traffic}-{config}-{uuid.uuid4().hex[:6]}".lower()
    work = root / run
    work.mkdir(parents=True)
    s3.client().create_bucket(Bucket=run)
    kafka.create_topic(run, partitions=partitions)
    options = write_config(work / "job.properties", kafka, s3, run, run, settings)
    stamps, stop_producer, stop_poller = Stamps(), threading.Event(), threading.Event()
    reading = {**s3_options(s3.endpoint_url), "name": JOB}
    poller = Poller(options, reading, f"s3://{run}", run, stamps, args.confirm)
    export = ServiceExport(work / "job.properties", work / "ckpt", work / "export.log")
    started = time.monotonic()
    threads = [
        threading.Thread(
            target=produce,
            args=(kafka.bootstrap_servers, run, partitions, rate, stamps, stop_producer),
            daemon=True,
        ),
        threading.Thread(target=poller.run, args=(args.poll, stop_poller), daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: poller.first_commit() is not None, started + 300, export, "a commit")
        backlog = stamps.count()  # produced while Spark started: drained before the warm-up
        wait_for(lambda: poller.committed() >= backlog, started + 600, export, "the backlog")
        begin = time.monotonic() + args.warmup
        end = begin + args.seconds
        time.sleep(args.warmup)  # the warm-up after the first commit
        before = (*count_objects(s3, run), poller.committed())
        time.sleep(max(0.0, end - time.monotonic()))  # the measured window
        after = (*count_objects(s3, run), poller.committed())
        result.objects, result.object_bytes, result.records = (
            b - a for a, b in zip(before, after, strict=True)
        )
        drained = wait_for(
            lambda: all(poller.readable_at(p, o) for p, o, _ in stamps.window(begin, end)),
            end + args.drain,
            export,
            "the window was readable",
        )
        window = stamps.window(begin, end)
        result.cpu_s = tree_cpu_s(export)
        result.run_s = time.monotonic() - started
        stop_producer.set()
        stop_poller.set()
        for thread in threads:
            thread.join(60)
        export.signal(signal.SIGTERM)
        result.exit_code = export.wait(120)
    finally:
        stop_producer.set()
        stop_poller.set()
        export.kill()
    if poller.error is not None:
        raise poller.error
    summarize(result, poller, stamps, window)
    if not drained:
        print(f"{run}: {result.unread} records not readable in time", file=sys.stderr)
    for line in poller.checks.wrong[:5]:
        print(f"{run}: wrong seek {line}", file=sys.stderr)
    result.batch_s = batch_seconds(work / "export.log")
    return result


def summarize(
    result: Result, poller: Poller, stamps: Stamps, window: list[tuple[int, int, float]]
) -> None:
    """Fill ``result`` with the window's latencies and the poller's counts."""
    for p, o, t in window:
        at = poller.readable_at(p, o)
        if at is None:
            result.unread += 1
        else:
            result.latencies_s.append(at - t)
    result.measured = len(window)
    result.seeks = len(poller.checks.seek_ms)
    result.seek_ms_p50 = percentile(poller.checks.seek_ms, 0.5)
    result.wrong = len(poller.checks.wrong) + stamps.errors
    result.poll_ms_p50 = percentile(poller.poll_ms, 0.5)


def batch_seconds(log: Path) -> float:
    """The median ``triggerExecution`` of the export's batches after the first two (Spark's
    start and its backlog), from its log lines."""
    found = re.findall(
        r"batch (\d+): .*?triggerExecution ([\d.]+) s", log.read_text(errors="replace")
    )
    times = [float(t) for n, t in found if int(n) >= 2]
    return percentile(times, 0.5)


def row(result: Result) -> dict[str, Any]:
    """The table's numbers for one configuration."""
    hours = result.window_s / 3600 or 1.0
    lat = result.latencies_s
    return {
        "traffic": f"{result.traffic} ({result.partitions} p, {result.rate}/s)",
        "config": result.config,
        "settings": ", ".join(f"{k}={v}" for k, v in result.settings.items()) or "(defaults)",
        "p50_s": percentile(lat, 0.5),
        "p99_s": percentile(lat, 0.99),
        "max_s": max(lat, default=0.0),
        "measured": result.measured,
        "unread": result.unread,
        "objects_per_partition_hour": result.objects / result.partitions / hours,
        "records_per_object": result.records / max(1, result.objects),
        "object_kib": result.object_bytes / max(1, result.objects) / 1024,
        "cpu_s_per_min": result.cpu_s / (result.run_s / 60),
        "seeks": result.seeks,
        "seek_ms_p50": result.seek_ms_p50,
        "wrong": result.wrong,
        "poll_ms_p50": result.poll_ms_p50,
        "batch_s": result.batch_s,
        "load": result.load,
        "exit": result.exit_code,
    }


HEADER = (
    "| traffic | config | settings | p50 s | p99 s | max s | records (unread) | "
    "batch s (median) | objects / partition / h | records / object | KiB / object | "
    "export CPU s/min | "
    "seeks (wrong), p50 ms | load (1/5/15) |"
)


def render(rows: list[dict[str, Any]]) -> str:
    """A markdown table, one line per configuration."""
    lines = [HEADER, "|---" * HEADER.count(" | ") + "|---|"]
    for r in rows:
        lines.append(
            f"| {r['traffic']} | {r['config']} | {r['settings']} | {r['p50_s']:.1f} | "
            f"{r['p99_s']:.1f} | {r['max_s']:.1f} | {r['measured']:,} ({r['unread']}) | "
            f"{r['batch_s']:.1f} | "
            f"{r['objects_per_partition_hour']:,.0f} | {r['records_per_object']:,.0f} | "
            f"{r['object_kib']:,.1f} | {r['cpu_s_per_min']:.0f} | "
            f"{r['seeks']} ({r['wrong']}), {r['seek_ms_p50']:.0f} | {r['load']} |"
        )
    return "\n".join(lines)


def parse_runs(text: str) -> list[tuple[str, str]]:
    """``traffic:config,...`` checked against :data:`TRAFFIC` and :data:`CONFIGS`."""
    runs = []
    for item in filter(None, (s.strip() for s in text.split(","))):
        traffic, _, config = item.partition(":")
        if traffic not in TRAFFIC or config not in CONFIGS:
            raise SystemExit(
                f"--runs: {item!r} is not traffic:config "
                f"(traffic {sorted(TRAFFIC)}, config {sorted(CONFIGS)})"
            )
        runs.append((traffic, config))
    return runs


def attempt(
    kafka: ApacheKafka,
    s3: SeaweedS3,
    traffic: str,
    config: str,
    args: argparse.Namespace,
    root: Path,
) -> Result:
    """:func:`measure`, once more (``--retries``) when the export dies, as Spark's Python
    workers may on an overloaded machine ("Python worker failed to connect back")."""
    for left in range(args.retries, -1, -1):
        try:
            return measure(kafka, s3, traffic, config, args, root)
        except SystemExit as exc:
            if not left:
                raise
            print(f"{traffic}:{config} failed, again: {exc}", file=sys.stderr)
    raise AssertionError("unreachable")


def main() -> None:
    """Start Kafka and SeaweedFS once, measure each configuration, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default=DEFAULT_RUNS, help="traffic:config,... to measure")
    parser.add_argument("--seconds", type=float, default=120, help="the measured window")
    parser.add_argument("--warmup", type=float, default=15, help="after the first commit")
    parser.add_argument("--drain", type=float, default=90, help="wait for the window, at most")
    parser.add_argument("--poll", type=float, default=0.25, help="catalog poll period, s")
    parser.add_argument("--confirm", type=int, default=2, help="seeks per poll that saw commits")
    parser.add_argument("--retries", type=int, default=1, help="when an export dies")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/latency.md")
    args = parser.parse_args()
    runs = parse_runs(args.runs)
    for reason in (ApacheKafka.unavailable_reason(), SeaweedS3.unavailable_reason()):
        if reason:
            raise SystemExit(f"latency: cannot start its servers: {reason}")
    rows: list[dict[str, Any]] = []
    root = Path(tempfile.mkdtemp(prefix="blockgz-latency-"))
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with ApacheKafka() as kafka, SeaweedS3() as s3:
        for traffic, config in runs:
            rows.append(row(attempt(kafka, s3, traffic, config, args, root)))
            print(json.dumps(rows[-1]), flush=True)
            args.out.write_text(f"# Produce-to-readable latency ({started})\n\n{render(rows)}\n")
    print(render(rows))
    print(f"logs: {root}")
    wrong = sum(r["wrong"] for r in rows)
    if wrong:
        raise SystemExit(f"latency: {wrong} seeks or deliveries went wrong (see above)")


if __name__ == "__main__":
    main()
