"""What the export's cluster snapshots cost (issue #28): one snapshot of many topics and groups.

A running export takes one snapshot per ``blockgz.snapshot.interval`` (1 min by default), on a
thread of its own after a batch commits (:mod:`blockgz.sink.export.snapshots`). This measures
one snapshot of ``TOPICS`` topics x 12 partitions with ``GROUPS`` consumer groups, each holding
offsets on every archived partition, on Apache Kafka 4.1 and SeaweedFS:

* its wall time and the CPU time of this process (the driver's share: the admin client's
  threads included);
* the admin requests (``Metadata``, ``DescribeConfigs``, ``ListGroups`` and one ``OffsetFetch``
  per group) and the bytes of the one PUT;
* the bound: the share of the driver's time at the default interval (CPU per snapshot / 60 s),
  and what a batch that does not take one pays (``after_commit`` when not due).

No peer writes such snapshots (kafka-backup and Lenses keep group offsets in their own topics,
Confluent's sink keeps none), so the table compares the snapshot with the interval it runs in.
Run: ``PYTHONPATH=. .venv/bin/python -m pytest benchmarks/test_snapshot_bench.py
-p no:cacheprovider --benchmark-only -s`` (``BLOCKGZ_BENCH_SCALE=0.1`` for a quick run).
"""

from __future__ import annotations

import os
import statistics
import time
import uuid

import pytest

from benchmarks import support
from benchmarks.report import machine_line, publish_report
from blockgz.archive.layout import Layout
from blockgz.commits.cluster_snapshots import Snapshots
from blockgz.sink.export.snapshots import Snapshotter, parse_groups
from blockgz.store import open_store
from testkit.s3 import s3_options

TOPICS = max(2, round(20 * support.SCALE))
GROUPS = max(2, round(50 * support.SCALE))
PARTITIONS = 12
ROUNDS = 5
DEFAULT_INTERVAL_S = 60.0
TRIGGER_S = 5.0  # the export's default trigger
RESULTS_PATH = support.ROOT / "benchmarks" / "results" / "snapshot.md"

pytestmark = pytest.mark.timeout(1800)


def _cluster(kafka) -> tuple[list[str], list[str]]:
    """``TOPICS`` topics with a config each, one record per partition, and ``GROUPS`` groups
    committed on every partition of every topic."""
    from confluent_kafka import Consumer, TopicPartition

    run = uuid.uuid4().hex[:6]
    topics = [f"snapbench-{run}-{n:03d}" for n in range(TOPICS)]
    for topic in topics:
        kafka.create_topic(topic, partitions=PARTITIONS, config={"retention.ms": "604800000"})
        for partition in range(PARTITIONS):
            kafka.produce(topic, [b"x"], partition=partition)
    groups = [f"snapbench-{run}-group-{n:03d}" for n in range(GROUPS)]
    everything = [TopicPartition(t, p, 1) for t in topics for p in range(PARTITIONS)]
    for group in groups:
        consumer = Consumer(kafka.client_config({"group.id": group, "enable.auto.commit": False}))
        try:
            consumer.commit(offsets=everything, asynchronous=False)
        finally:
            consumer.close()
    return topics, groups


def test_snapshot_cost(kafka, s3, request, benchmark) -> None:
    topics, groups = _cluster(kafka)
    bucket = f"snapbench-{uuid.uuid4().hex[:6]}"
    s3.client().create_bucket(Bucket=bucket)
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3.endpoint_url))
    snapshots = Snapshots(store, prefix, Layout(), "bench")
    pattern = parse_groups(f"{groups[0].rsplit('-group-', 1)[0]}-group-.*")
    snapper = Snapshotter(
        kafka.client_config(), snapshots, topics=topics, interval_s=DEFAULT_INTERVAL_S,
        groups=pattern,
    )  # fmt: skip
    archived = {t: dict.fromkeys(range(PARTITIONS), 1) for t in topics}
    snapper.take(archived)  # the admin client's connection is made once per export, not here

    walls: list[float] = []
    cpus: list[float] = []
    keys: list[str] = []

    def one() -> None:
        cpu, wall = time.process_time(), time.perf_counter()
        keys.append(snapper.take(archived))
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)

    benchmark.pedantic(one, rounds=ROUNDS, iterations=1)
    taken = snapshots.at_or_before()
    assert taken is not None
    assert len(taken.groups) == GROUPS, "a group's offsets are missing from the snapshot"
    assert all(len(parts) == PARTITIONS for g in taken.groups.values() for parts in g.values())
    assert set(taken.topics) == set(topics) and not taken.missing
    size = len(store.get(keys[-1]))

    # A batch that takes no snapshot pays one clock read and a comparison.
    snapper._last = time.time()  # as just after a snapshot
    n = 100_000
    started = time.perf_counter()
    for _ in range(n):
        snapper.after_commit(archived)
    idle_us = (time.perf_counter() - started) / n * 1e6

    wall, cpu = statistics.median(walls), statistics.median(cpus)
    requests = 3 + 1 + GROUPS  # Metadata, DescribeConfigs (one for all topics), ListGroups...
    info = {
        "topics": TOPICS, "partitions": TOPICS * PARTITIONS, "groups": GROUPS,
        "wall_ms": round(wall * 1000, 1), "cpu_ms": round(cpu * 1000, 1),
        "admin_requests": requests, "put_bytes": size, "idle_after_commit_us": round(idle_us, 2),
        "duty_cycle": cpu / DEFAULT_INTERVAL_S,
    }  # fmt: skip
    benchmark.extra_info.update(info)
    text = _render(info, walls)
    publish_report(request.config, "snapshot cost", text, RESULTS_PATH, support.MEANINGFUL)
    # The bound the export relies on: a snapshot takes far less than the interval it runs in.
    assert wall < DEFAULT_INTERVAL_S / 4, f"a snapshot took {wall:.1f} s of a 60 s interval"


def _render(info: dict, walls: list[float]) -> str:
    per_batch_ms = info["cpu_ms"] * TRIGGER_S / DEFAULT_INTERVAL_S
    rounds = ", ".join(f"{w * 1000:.0f}" for w in walls)
    return "\n".join(
        [
            "# Cluster snapshot cost (issue #28)",
            "",
            f"Machine: {machine_line()}; load average {os.getloadavg()[0]:.1f}. Apache Kafka 4.1 "
            "(one KRaft node), SeaweedFS.",
            f"{info['topics']} topics x {PARTITIONS} partitions ({info['partitions']}), "
            f"{info['groups']} consumer groups with offsets on every partition; "
            f"median of {ROUNDS} snapshots (rounds, ms: {rounds}).",
            "",
            "| measure | value |",
            "|---|---|",
            f"| wall time per snapshot | {info['wall_ms']:,.1f} ms |",
            f"| driver CPU per snapshot (admin client threads included) | "
            f"{info['cpu_ms']:,.1f} ms |",
            f"| admin requests per snapshot | {info['admin_requests']} |",
            f"| S3 requests per snapshot | 1 PUT of {info['put_bytes']:,} bytes |",
            f"| driver CPU share at the default interval (1 min) | "
            f"{info['duty_cycle'] * 100:.3f} % |",
            f"| amortised per 5 s batch | {per_batch_ms:.2f} ms of CPU, 0 ms of the batch's "
            "wall time (own thread) |",
            f"| a batch that takes none (`after_commit` when not due) | "
            f"{info['idle_after_commit_us']:.2f} µs |",
            "",
        ]
    )
