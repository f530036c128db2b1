"""Snapshots of the source cluster for a restore, taken from Apache Kafka: topic configs set on
the topic (not the broker's), partition counts, the consumer groups' offsets on archived topics,
and the archive's committed offsets; one per interval, in the background."""

from __future__ import annotations

import uuid

from blockgz.archive.layout import Layout
from blockgz.commits.cluster_snapshots import Snapshots, TopicState
from blockgz.sink.export.snapshots import Snapshotter
from blockgz.sink.jobconfig.job_options import parse_groups
from blockgz.store import open_store
from testkit.s3 import s3_options


def commit_group(kafka, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit ``offsets`` for ``group`` as a consumer that stopped part-way would have."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(kafka.client_config({"group.id": group, "enable.auto.commit": False}))
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


class Clock:
    def __init__(self, now: float):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_snapshot_keeps_topics_configs_and_group_offsets_on_archived_topics(
    kafka, s3_server, bucket
):
    run = uuid.uuid4().hex[:8]
    orders, other = f"snap-orders-{run}", f"snap-other-{run}"
    kafka.create_topic(
        orders, partitions=3, config={"cleanup.policy": "compact", "retention.ms": "86400000"}
    )
    kafka.create_topic(other, partitions=1)
    kafka.produce(orders, [(b"k1", b"a"), (b"k2", b"b"), (b"k3", b"c")], partition=0)
    kafka.produce(orders, [(b"k4", b"d")], partition=2)  # compacted: records need keys
    kafka.produce(other, [b"x"], partition=0)
    billing, audit, ignored = f"billing-{run}", f"audit-{run}", f"adhoc-{run}"
    commit_group(kafka, billing, {(orders, 0): 2, (orders, 2): 1, (other, 0): 1})
    commit_group(kafka, audit, {(other, 0): 1})  # no offsets on an archived topic
    commit_group(kafka, ignored, {(orders, 0): 3})  # not matched by the regex

    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    snapshots = Snapshots(store, prefix, Layout(), "job")
    clock = Clock(1_795_000_000.0)
    snapper = Snapshotter(
        kafka.client_config(), snapshots, topics=[orders], interval_s=60,
        groups=parse_groups(f"(billing|audit)-{run}"), clock=clock,
    )  # fmt: skip
    assert snapper.after_commit({orders: {0: 3, 2: 1}})
    snapper.close()
    assert snapper.written == 1, "the snapshot failed: see the warning in the log"

    taken = snapshots.at_or_before()
    assert taken is not None and taken.at_ms == 1_795_000_000_000
    assert taken.topics == {
        orders: TopicState(3, {"cleanup.policy": "compact", "retention.ms": "86400000"})
    }
    assert taken.groups == {billing: {orders: {0: 2, 2: 1}}}
    assert taken.archived == {orders: {0: 3, 2: 1}}

    # Within the interval nothing more is taken; after it, the next commit takes one.
    clock.now += 30
    assert not snapper.after_commit({orders: {0: 3, 2: 1}})
    commit_group(kafka, billing, {(orders, 0): 3})
    clock.now += 31
    assert snapper.after_commit({orders: {0: 3, 1: 0, 2: 1}})
    snapper.close()
    assert snapper.written == 2
    assert snapshots.at_or_before(1_795_000_060_000).groups == {billing: {orders: {0: 2, 2: 1}}}
    assert snapshots.at_or_before().groups == {billing: {orders: {0: 3, 2: 1}}}
    assert snapshots.at_or_before(1_794_999_999_999) is None
