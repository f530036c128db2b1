"""Soak: a running export on a standalone cluster under a steady produce rate (``make soak``).

Starts Apache Kafka 4.1 (one KRaft node, its own JVM; the broker blockgz is proven on), SeaweedFS
and a loopback Spark standalone cluster, produces to a 12-partition topic at a steady rate, and
runs ``blockgz export`` (a running job, not ``--once``) with 1000-record files on the cluster.
Every ``--sample`` seconds it records the memory (PSS) of the driver's Python (the CLI and its
planners) and of the driver JVM apart, the executor JVM and the executor's Python workers, and
the lag (records produced minus records the manifests committed). At the end the producer stops,
the job drains the backlog and is stopped with SIGTERM, and every offset is read back through
``blockgz.reader.open_archive``: each must be there exactly once.

The report (``benchmarks/results/soak.md``) gives each group's memory slope after the warm-up (a
least-squares line, MB per hour), the lag's maximum and its last-third mean, and the verdicts.

Run::

    .venv/bin/python -m benchmarks.soak --minutes 30        # make soak
    .venv/bin/python -m benchmarks.soak --minutes 3 --out /tmp/soak.md   # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
BLOCKGZ = str(Path(sys.executable).with_name("blockgz"))
TOPIC = "soak"
MB = 1e6


@dataclass
class Sample:
    t: float
    rss: dict[str, int]
    produced: int
    committed: int

    @property
    def lag(self) -> int:
        return self.produced - self.committed


@dataclass
class Producer:
    """Produces ``rate`` records a second over ``partitions``; each value says its own offset."""

    kafka: object
    partitions: int
    rate: int
    next_offset: list[int] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self.next_offset = [0] * self.partitions

    @property
    def produced(self) -> int:
        return sum(self.next_offset)

    def run(self) -> None:
        per_partition = max(1, self.rate // self.partitions - 1)  # +1 sentinel per round
        tick = time.monotonic()
        try:
            while not self.stop.is_set():
                base = list(self.next_offset)

                def value(p: int, i: int, base: list[int] = base) -> bytes:
                    return json.dumps({"p": p, "o": base[p] + i, "pad": "x" * 180}).encode()

                marks = self.kafka.produce_bulk(TOPIC, per_partition, self.partitions, value)
                for p, mark in marks.items():
                    self.next_offset[p] = mark
                tick += 1.0
                self.stop.wait(max(0.0, tick - time.monotonic()))
        except BaseException as exc:  # reported by the main thread
            self.error = exc


def rss_groups(export: psutil.Process, cluster_pids: list[int]) -> dict[str, int]:
    """Memory of the driver (the CLI's Python and its Python planners apart from the driver JVM),
    the executor JVMs and their
    Python workers: PSS, which splits the pages forked Python workers share among them (their
    RSS would count each shared page once per worker)."""
    out = {"driver Python": 0, "driver JVM": 0, "executor JVM": 0, "executor Python": 0}
    try:
        for proc in [export, *export.children(recursive=True)]:
            group = "driver JVM" if proc.name() == "java" else "driver Python"
            out[group] += proc.memory_full_info().pss
    except psutil.Error:
        pass
    for root in cluster_pids:
        try:
            below = psutil.Process(root).children(recursive=True)
        except psutil.Error:
            continue
        for proc in below:
            try:
                cmd = " ".join(proc.cmdline())
                if "CoarseGrainedExecutorBackend" in cmd:
                    out["executor JVM"] += proc.memory_full_info().pss
                elif "pyspark" in cmd or proc.name().startswith("python"):
                    out["executor Python"] += proc.memory_full_info().pss
            except psutil.Error:
                continue  # exited between the listing and the look
    return out


def slope_mb_per_hour(samples: list[Sample], group: str) -> float:
    """Least-squares slope of a group's RSS over the samples, in MB per hour."""
    xs = [s.t for s in samples]
    ys = [s.rss[group] / MB for s in samples]
    if len(xs) < 3:
        return float("nan")
    return statistics.linear_regression(xs, ys).slope * 3600


def committed_records(sink_config, store, prefix: str) -> int:
    offsets = sink_config.manifest_log(store, prefix).committed_offsets()
    return sum(offsets.get(TOPIC, {}).values())


def write_config(
    path: Path, kafka, s3, bucket: str, flush_size: int, extra: dict[str, str] | None = None
) -> Path:
    """The export's properties file; ``extra`` (``--set``) adds or overrides settings."""
    from testkit.s3 import s3_options

    settings = {
        "name": "soak",
        "topics": TOPIC,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": bucket,
        **s3_options(s3.endpoint_url),
        "s3.compression.type": "blockgzip",
        "flush.size": str(flush_size),
        "blockgz.trigger.interval": "5 seconds",
        "maxOffsetsPerTrigger": "200000",
        **(extra or {}),
    }
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def run(args: argparse.Namespace) -> str:
    from blockgz.local_servers.apache_kafka import ApacheKafka
    from blockgz.local_servers.seaweed import SeaweedS3
    from blockgz.local_servers.spark_cluster import LocalSparkCluster
    from blockgz.reader import open_archive
    from blockgz.sink.write.config import SinkSettings
    from blockgz.store import open_store
    from testkit.s3 import s3_options

    reason = ApacheKafka.unavailable_reason() or SeaweedS3.unavailable_reason()
    if reason:
        raise SystemExit(f"soak: cannot start its servers: {reason}")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with (
        tempfile.TemporaryDirectory(prefix="blockgz-soak-") as tmp,
        ApacheKafka() as kafka,
        SeaweedS3() as s3,
        LocalSparkCluster(workers=1, cores=2) as cluster,
    ):
        work = Path(tmp)
        bucket = "soak"
        s3.client().create_bucket(Bucket=bucket)
        kafka.create_topic(TOPIC, partitions=args.partitions)
        config = write_config(
            work / "soak.properties", kafka, s3, bucket, args.flush_size, dict(args.set)
        )
        options = s3_options(s3.endpoint_url)
        store, prefix = open_store(f"s3://{bucket}", options)
        sink_config = SinkSettings.from_options({"s3.bucket.name": bucket, "name": "soak"})

        producer = Producer(kafka, args.partitions, args.rate)
        feeder = threading.Thread(target=producer.run, name="soak-producer", daemon=True)
        feeder.start()
        log = (work / "export.log").open("wb")
        export = subprocess.Popen(
            [
                BLOCKGZ,
                "export",
                str(config),
                "--master",
                cluster.master_url,
                "--checkpoint",
                str(work / "ckpt"),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        handle = psutil.Process(export.pid)
        cluster_roots = cluster.pids
        samples: list[Sample] = []
        t0 = time.monotonic()
        end = t0 + args.minutes * 60
        print(f"soak: {args.minutes} min at {args.rate} records/s", file=sys.stderr)
        while time.monotonic() < end:
            if export.poll() is not None or producer.error is not None:
                break
            samples.append(
                Sample(
                    time.monotonic() - t0,
                    rss_groups(handle, cluster_roots),
                    producer.produced,
                    committed_records(sink_config, store, prefix),
                )
            )
            s = samples[-1]
            print(
                f"  {s.t:7.0f} s  produced {s.produced:>9,}  lag {s.lag:>7,}  "
                + "  ".join(f"{g} {v / MB:6.0f} MB" for g, v in s.rss.items()),
                file=sys.stderr,
            )
            time.sleep(min(args.sample, max(0.0, end - time.monotonic())))  # a sampling period
        producer.stop.set()
        feeder.join(60)
        if producer.error is not None:
            raise producer.error
        produced = producer.produced
        drain_deadline = time.monotonic() + 300
        drained_in = None
        while time.monotonic() < drain_deadline and export.poll() is None:
            if committed_records(sink_config, store, prefix) >= produced:
                drained_in = time.monotonic() - (t0 + args.minutes * 60)
                break
            time.sleep(1)  # polling the manifests with a deadline
        alive = export.poll() is None
        export.send_signal(signal.SIGTERM)
        try:
            code = export.wait(120)
        except subprocess.TimeoutExpired:
            export.kill()
            code = None
        log.close()
        tail = (work / "export.log").read_text(errors="replace")[-3000:]
        if not alive or code != 0:
            raise SystemExit(f"the export ended badly ({code}):\n{tail}")

        seen: Counter = Counter()
        wrong_value = 0
        with open_archive(f"s3://{bucket}", options) as archive:
            for partition, record in archive.records(TOPIC):
                seen[(partition, record.offset)] += 1
                doc = json.loads(record.value)
                wrong_value += (doc["p"], doc["o"]) != (partition, record.offset)
        expected = {(p, o) for p in range(args.partitions) for o in range(producer.next_offset[p])}
        duplicates = sum(1 for n in seen.values() if n > 1)
        missing = len(expected - set(seen))
        extra = len(set(seen) - expected)
    counts = {"duplicated": duplicates, "missing": missing, "unexpected": extra}
    counts["with a value of another offset"] = wrong_value
    return report(args, samples, started, produced, drained_in, counts)


def report(args, samples, started, produced, drained_in, counts: dict[str, int]) -> str:
    warm = [s for s in samples if s.t >= args.warmup * 60] or samples
    groups = list(samples[0].rss) if samples else []
    third = warm[len(warm) * 2 // 3 :] or warm
    lines = [
        "# Soak: a running export on a standalone cluster",
        "",
        f"- run: {started}; {args.minutes} min at {args.rate:,} records/s over "
        f"{args.partitions} partitions, flush.size={args.flush_size}, trigger 5 s, "
        f"~200-byte JSON values, block-GZIP; SeaweedFS, Apache Kafka 4.1 (one KRaft node), "
        "1 master + 1 worker (2 cores)",
        f"- machine: {os.cpu_count()} CPUs, {psutil.virtual_memory().total / 2**30:.0f} GiB, "
        f"Python {platform.python_version()}",
        f"- samples every {args.sample:.0f} s; slopes are least-squares lines after the first "
        f"{args.warmup:g} min (warm-up: JVM heaps and Python workers grow to their working size)",
        "- reproduce: `make soak` (or `.venv/bin/python -m benchmarks.soak --minutes N`)",
        *(
            [f"- settings added to the export's: {', '.join(f'`{k}={v}`' for k, v in args.set)}"]
            if args.set
            else []
        ),
        "",
        # A JVM's heap grows in steps toward its maximum: one step weighs on the whole slope,
        # so the last third's is shown beside it (a leak keeps growing there too).
        "| process group | PSS at warm-up end MB | PSS at the end MB | slope MB/hour "
        "| slope over the last third MB/hour |",
        "|---|---|---|---|---|",
    ]
    for g in groups:
        lines.append(
            f"| {g} | {warm[0].rss[g] / MB:.0f} | {warm[-1].rss[g] / MB:.0f} | "
            f"{slope_mb_per_hour(warm, g):+.1f} | {slope_mb_per_hour(third, g):+.1f} |"
        )
    lags = [s.lag for s in samples]
    lines += [
        "",
        f"- records produced: {produced:,}; lag max {max(lags, default=0):,} records, "
        f"mean over the last third {statistics.fmean([s.lag for s in third]) if third else 0:,.0f}"
        f" (one trigger at this rate is {args.rate * 5:,})",
        "- after the producer stopped, the backlog was committed in "
        + (f"{drained_in:.1f} s" if drained_in is not None else "**not within 300 s**"),
        "- read back through `open_archive`: "
        + ", ".join(f"{n} {what}" for what, n in counts.items())
        + " → "
        + ("**exactly once**" if not any(counts.values()) else "**FAILED**"),
    ]
    return "\n".join(lines) + "\n"


def _setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE")
    return key.strip(), value.strip()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--rate", type=int, default=1200, help="records per second")
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--flush-size", type=int, default=1000)
    parser.add_argument("--sample", type=float, default=15, help="seconds between samples")
    parser.add_argument("--warmup", type=float, default=None, help="minutes [a sixth of the run]")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "soak.md")
    parser.add_argument(
        "--set",
        type=_setting,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting added to the export's (e.g. spark.driver.memory=512m); repeatable",
    )
    args = parser.parse_args(argv)
    if args.warmup is None:
        args.warmup = args.minutes / 6
    text = run(args)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
