"""``blockgz restore`` into Apache Kafka: topics created as the snapshot describes them, records
restored as they were (no header added), consumer groups resuming exactly where they stood at
the point in time, a dry run that touches nothing, a killed restore rerun, and an archive
written under a time partitioner."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import pytest
from click.testing import CliRunner
from confluent_kafka import KafkaError

from blockgz.archive.layout import Layout
from blockgz.cli import main
from blockgz.commits.cluster_snapshots import ClusterSnapshot, Snapshots, TopicState
from blockgz.reader.restore.markers import MARKER
from blockgz.reader.restore.positions import position_group
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from blockgz.store import LocalStore
from testkit.batches import arrow_batches

#: An hour ago, so the restored topics' retention (their snapshot configs) keeps the records.
T0 = (int(time.time() * 1000) - 3_600_000) // 1000 * 1000
EXACT = ["-O", "kafka.linger.ms=0"]


def archive_of(root, topic: str, partitions: int, count: int) -> list[KafkaRecord]:
    """An envelope archive (keys, headers, timestamps kept) with offset gaps; record ``n`` is
    stamped ``T0 + 10 n``."""
    records = []
    for p in range(partitions):
        offset = 0
        for n in range(count):
            headers = [("trace", b"t%d" % n)] if n % 3 else None
            value = b'{"topic":"%s","p":%d,"n":%d}' % (topic.encode(), p, n)
            records.append(KafkaRecord(topic, p, offset, T0 + 10 * n, b"k%d" % n, value, headers))
            offset += 1 if n % 5 else 3
    config = SinkSettings.from_options(
        {"path": str(root), "flush.size": "25", "s3.compression.type": "blockgzip",
         "format.json.envelope": "true"}
    )  # fmt: skip
    for p in range(partitions):
        write_task(config, iter(arrow_batches([r for r in records if r.partition == p])))
    return records


def snapshot(root, at_ms: int, topics: dict, groups: dict) -> None:
    Snapshots(LocalStore(str(root)), "", Layout(), "job").write(
        ClusterSnapshot(at_ms=at_ms, topics=topics, groups=groups)
    )


def read_all(kafka, topic: str) -> dict[int, list]:
    """Every committed record of every partition of ``topic``, by partition (read_committed,
    up to the partition's end: a restore's transaction markers take offsets too)."""
    from confluent_kafka import Consumer, TopicPartition

    ends = kafka.high_watermarks(topic)
    consumer = Consumer(
        {"bootstrap.servers": kafka.bootstrap_servers, "group.id": "check",
         "isolation.level": "read_committed", "enable.partition.eof": True}
    )  # fmt: skip
    out: dict[int, list] = {}
    try:
        for partition, end in ends.items():
            consumer.assign([TopicPartition(topic, partition, 0)])
            got: list = []
            deadline = time.monotonic() + 30
            at_end = end == 0
            while not at_end:
                assert time.monotonic() < deadline, f"read {len(got)}, end {end}"
                for m in consumer.consume(500, timeout=1):
                    if m.error() is None:
                        got.append(m)
                    elif m.error().code() == KafkaError._PARTITION_EOF and m.offset() >= end:
                        at_end = True
            out[partition] = got
    finally:
        consumer.close()
    return out


def consume_as_group(kafka, group: str, topics: list[str]) -> list:
    """What a consumer of ``group`` reads on the target: subscribed, from the group's committed
    offsets, until every assigned partition is at its end."""
    from confluent_kafka import Consumer

    ends = {(t, p): e for t in topics for p, e in kafka.high_watermarks(t).items()}
    consumer = Consumer(
        {"bootstrap.servers": kafka.bootstrap_servers, "group.id": group,
         "auto.offset.reset": "latest", "enable.auto.commit": False}
    )  # fmt: skip
    got: list = []
    try:
        consumer.subscribe(topics)
        deadline = time.monotonic() + 60
        while True:
            assert time.monotonic() < deadline, "the group did not reach the ends in 60 s"
            got += [m for m in consumer.consume(500, timeout=0.5) if m.error() is None]
            assignment = consumer.assignment()
            if len(assignment) < len(ends):
                continue
            positions = {
                (tp.topic, tp.partition): tp.offset for tp in consumer.position(assignment)
            }
            # librdkafka's position is past the last record consumed (none: invalid), so a
            # partition the group had finished is at its end by its committed offset.
            committed = {
                (tp.topic, tp.partition): tp.offset
                for tp in consumer.committed(list(assignment), timeout=10)
            }
            if all(
                end == 0 or max(positions.get(tp, -1), committed.get(tp, -1)) >= end
                for tp, end in ends.items()
            ):
                break
    finally:
        consumer.close()
    return got


def as_restored(message) -> tuple:
    return message.key(), message.value(), message.headers(), message.timestamp()[1]


def as_archived(record: KafkaRecord) -> tuple:
    return record.key, record.value, record.headers, record.timestamp_ms


def run(*args: str):
    return CliRunner().invoke(main, ["restore", *args], catch_exceptions=False)


def test_topics_are_created_renamed_and_groups_resume_where_they_stood(kafka, tmp_path):
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import ConfigResource, ResourceType

    run_id = uuid.uuid4().hex[:6]
    orders, payments = f"orders_{run_id}", f"payments_{run_id}"
    kept = archive_of(tmp_path, orders, 3, 60) + archive_of(tmp_path, payments, 1, 30)
    to_time = T0 + 400  # records n < 40
    configs = {"cleanup.policy": "delete", "compression.type": "zstd", "retention.ms": "-1"}
    billing, adhoc = f"billing-{run_id}", f"adhoc-{run_id}"
    offsets_at_t = {orders: {0: 14, 1: 0, 2: 500}, payments: {0: 8}}
    snapshot(
        tmp_path, T0 + 300,
        {orders: TopicState(3, configs), payments: TopicState(2, {"cleanup.policy": "compact"})},
        {billing: offsets_at_t, adhoc: {orders: {0: 1}}},
    )  # fmt: skip
    snapshot(tmp_path, T0 + 900, {}, {billing: {orders: {0: 50}}})  # after T: not used
    restored_orders, restored_payments = f"orders_restored_{run_id}", f"{payments}_dr"
    result = run(
        str(tmp_path), orders, "--topics-regex", "payments_.*", "--to-time", str(to_time),
        "--rename", f"{orders}={restored_orders}", "--suffix", "_dr",
        "--groups-regex", "billing-.*", "--bootstrap-servers", kafka.bootstrap_servers, *EXACT,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert f"group {billing}: " in result.stderr, result.stderr
    assert f"{orders} -> {restored_orders} (created): 120 records sent" in result.stderr
    assert f"{payments} -> {restored_payments} (created): 30 records sent" in result.stderr

    # Created as the snapshot at or before T had them: partitions and the configs set.
    assert len(kafka.partitions(restored_orders)) == 3
    assert len(kafka.partitions(restored_payments)) == 2
    described = kafka.admin().describe_configs(
        [ConfigResource(ResourceType.TOPIC, restored_orders)]
    )
    entries = next(iter(described.values())).result(timeout=15)
    assert {k: entries[k].value for k in configs} == configs

    # The records as they were, partition by partition, without a header added.
    window = [r for r in kept if r.timestamp_ms < to_time]
    source_of = {restored_orders: orders, restored_payments: payments}
    for target, source in source_of.items():
        for p, messages in read_all(kafka, target).items():
            expected = [r for r in window if r.topic == source and r.partition == p]
            assert [as_restored(m) for m in messages] == [as_archived(r) for r in expected]
            assert not any(MARKER in dict(m.headers() or []) for m in messages)

    # The group resumes where it stood at T: exactly the window's records at or past its
    # committed offsets, each once. The other group was not chosen, so it is not there.
    consumed = consume_as_group(kafka, billing, [restored_orders, restored_payments])
    due = [
        r for r in window
        if r.offset >= offsets_at_t[r.topic].get(r.partition, 0)
    ]  # fmt: skip
    assert sorted(m.value() for m in consumed) == sorted(r.value for r in due)
    assert len(consumed) == len(due) and len(due) < len(window)
    listed = kafka.admin().list_consumer_groups().result(timeout=15).valid
    assert adhoc not in {g.group_id for g in listed}

    # The group's consumers moved on, on the target; a rerun sends nothing and never rewinds
    # them: it says so and fails.
    from tests.integration.test_snapshots import commit_group

    commit_group(kafka, billing, {(restored_orders, 0): 39})
    again = run(
        str(tmp_path), orders, "--topics-regex", "payments_.*", "--to-time", str(to_time),
        "--rename", f"{orders}={restored_orders}", "--suffix", "_dr",
        "--groups-regex", "billing-.*", "--bootstrap-servers", kafka.bootstrap_servers,
    )  # fmt: skip
    assert again.exit_code == 1, again.output
    assert "restored 0 records of 2 topics" in again.stderr
    assert f"group {billing} not set: it has offsets of its own" in again.stderr
    assert sum(map(len, read_all(kafka, restored_orders).values())) == 120
    offsets = (
        kafka.admin()
        .list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(billing, [TopicPartition(restored_orders, 0)])]
        )[billing]
        .result(timeout=15)
    )
    assert offsets.topic_partitions[0].offset == 39


def test_a_dry_run_touches_nothing(kafka, tmp_path):
    run_id = uuid.uuid4().hex[:6]
    topic = f"dry_{run_id}"
    archive_of(tmp_path, topic, 2, 20)
    snapshot(tmp_path, T0, {topic: TopicState(2, {})}, {f"g-{run_id}": {topic: {0: 3}}})
    result = run(
        str(tmp_path), topic, "--suffix", "_out", "--dry-run", "--output", "json",
        "--bootstrap-servers", kafka.bootstrap_servers,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert (
        f'"target": "{topic}_out"' in result.stdout and '"target_offset": 1' in result.stdout
    )  # offsets 0, 3, 4, ...: one before 3
    assert '"target_partitions_now": null' in result.stdout  # asked the cluster, read-only
    assert kafka.partitions(f"{topic}_out") == []
    listed = kafka.admin().list_consumer_groups().result(timeout=15).valid
    assert f"g-{run_id}" not in {g.group_id for g in listed}


def test_an_existing_target_is_checked_and_one_with_records_gets_markers(kafka, tmp_path):
    run_id = uuid.uuid4().hex[:6]
    topic = f"exist_{run_id}"
    records = archive_of(tmp_path, topic, 2, 20)
    narrow, busy = f"{topic}_narrow", f"{topic}_busy"
    kafka.create_topic(narrow, partitions=1)
    refused = run(
        str(tmp_path), topic, "--rename", f"{topic}={narrow}",
        "--bootstrap-servers", kafka.bootstrap_servers,
    )  # fmt: skip
    assert refused.exit_code == 1
    assert f"topic '{narrow}' exists with 1 partitions; '{topic}' had 2" in refused.stderr
    assert "Traceback" not in refused.stderr

    kafka.create_topic(busy, partitions=2)
    kafka.produce(busy, [b"theirs"], partition=0)
    done = run(
        str(tmp_path), topic, "--rename", f"{topic}={busy}",
        "--bootstrap-servers", kafka.bootstrap_servers, *EXACT,
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "with blockgz.replay headers" in done.stderr
    got = read_all(kafka, busy)
    assert got[0][0].value() == b"theirs"
    restored = [m for p in (0, 1) for m in got[p] if m.value() != b"theirs"]
    assert sorted(dict(m.headers())[MARKER] for m in restored) == sorted(
        b"%s/%d/%d" % (topic.encode(), r.partition, r.offset) for r in records
    )


@pytest.mark.crash
def test_a_killed_restore_resumes_and_sends_each_record_once(kafka, tmp_path):
    """SIGKILL mid-restore, then a rerun: every record once, in order, and no header added (the
    position each committed transaction recorded says where the rerun resumes; the killed run's
    open transaction is aborted)."""
    run_id = uuid.uuid4().hex[:6]
    topic = f"killed_{run_id}"
    records = archive_of(tmp_path, topic, 1, 600)
    target = f"{topic}_r"
    command = [  # takes 150 records, then blocks: the kill always lands mid-way
        sys.executable, "-m", "testkit.capped_cli", "150",
        "restore", str(tmp_path), topic, "--transaction-records", "40",
        "--suffix", "_r", "--bootstrap-servers", kafka.bootstrap_servers,
        "-O", "kafka.batch.num.messages=1", "-O", "kafka.linger.ms=0",
        "-O", "kafka.queue.buffering.max.messages=10",
    ]  # fmt: skip
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while not kafka.partitions(target) or kafka.high_watermarks(target)[0] < 130:
        assert process.poll() is None, process.stderr.read().decode()
        assert time.monotonic() < deadline, "the restore delivered nothing in 90 s"
        time.sleep(0.05)  # polling the broker with a deadline
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    result = run(str(tmp_path), topic, "--suffix", "_r", "--bootstrap-servers",
                 kafka.bootstrap_servers)  # fmt: skip
    assert result.exit_code == 0, result.output
    # Transactions end at a block (25 records) once they hold 40: 50 records each; the cap of
    # 150 leaves the third committed or open, as the kill finds it.
    said = re.search(r"(\d+) records sent, (\d+) restored before", result.stderr)
    assert said is not None, result.stderr
    sent, before = int(said[1]), int(said[2])
    assert sent + before == len(records) and before in (50, 100, 150), result.stderr
    got = read_all(kafka, target)[0]
    assert [as_restored(m) for m in got] == [as_archived(r) for r in records]
    from confluent_kafka import Consumer, TopicPartition

    positions = Consumer(
        {"bootstrap.servers": kafka.bootstrap_servers, "group.id": position_group(target)}
    )
    try:
        (position,) = positions.committed([TopicPartition(target, 0)], timeout=15)
    finally:
        positions.close()
    assert position.offset == records[-1].offset + 1 and "blockgz.restore" in position.metadata


def test_an_archive_written_under_a_time_partitioner(kafka, tmp_path):
    """Hourly directories: one partition's objects interleave; the restore still sends each
    record once, in offset order, up to the point in time."""
    from testkit.archives import HOUR, export_batches, input_records
    from testkit.archives import T0 as HOURLY_T0

    records = input_records(120, partitions=2)
    export_batches(str(tmp_path), records, "hourly", batches=3, **{"format.json.envelope": "true"})
    to_time = HOURLY_T0 + 2 * HOUR
    target = f"ev_{uuid.uuid4().hex[:6]}"
    result = run(
        str(tmp_path), "ev", "--rename", f"ev={target}", "--to-time", str(to_time),
        "--bootstrap-servers", kafka.bootstrap_servers, *EXACT,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    got = read_all(kafka, target)
    for p in (0, 1):
        expected = [r for r in records if r.partition == p and r.timestamp_ms < to_time]
        assert 0 < len(expected) < 120
        # The envelope keeps a JSON value as JSON (spacing is the export's: fidelity's issue)
        assert [json.loads(m.value()) for m in got[p]] == [json.loads(r.value) for r in expected]


@pytest.mark.slow
def test_a_spark_restore_runs_one_task_per_partition_of_every_topic(spark, kafka, tmp_path):
    from blockgz.reader import open_archive
    from blockgz.reader.restore.planning import plan_restore
    from blockgz.reader.restore.request import Rename, RestoreRequest
    from blockgz.reader.restore.restorer import RestoreSettings, restore_on_spark

    run_id = uuid.uuid4().hex[:6]
    first, second = f"sa_{run_id}", f"sb_{run_id}"
    records = archive_of(tmp_path, first, 2, 30) + archive_of(tmp_path, second, 1, 20)
    group = f"g-{run_id}"
    snapshot(tmp_path, T0, {first: TopicState(2, {})}, {group: {first: {1: 4}}})
    request = RestoreRequest(topics=(first, second), rename=Rename(suffix="_s"))
    with open_archive(str(tmp_path)) as archive:
        plan = plan_restore(archive, request)
    settings = RestoreSettings({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 0})
    result = restore_on_spark(spark, str(tmp_path), {}, plan, settings)
    assert [(t.target, t.result.sent) for t in result.topics] == [
        (f"{first}_s", {0: 30, 1: 30}),
        (f"{second}_s", {0: 20}),
    ]
    assert result.groups.set == {group: {(f"{first}_s", 1): 2}}  # offsets 0, 3, 4: two < 4
    for source in (first, second):
        for p, messages in read_all(kafka, f"{source}_s").items():
            expected = [r for r in records if r.topic == source and r.partition == p]
            assert [as_restored(m) for m in messages] == [as_archived(r) for r in expected]
    again = restore_on_spark(spark, str(tmp_path), {}, plan, settings)
    assert again.sent == 0 and again.skipped == 80


@pytest.fixture(scope="module")
def kafka_b():
    """A second, fresh Apache Kafka: the cluster a disaster-recovery drill restores into."""
    from blockgz.local_servers.apache_kafka import ApacheKafka

    reason = ApacheKafka.unavailable_reason()
    if reason:
        pytest.skip(reason)
    with ApacheKafka() as broker:
        yield broker


def _phase(kafka, topic: str, partitions: int, first: int, count: int) -> None:
    for p in range(partitions):
        kafka.produce(
            topic,
            [
                (b"k-%d-%d" % (p, n), b'{"p":%d,"n":%d}' % (p, n), [("seq", b"%d" % n)])
                for n in range(first, first + count)
            ],
            partition=p,
        )


def _records_on(kafka, topic: str) -> dict[int, list]:
    return {p: [(m.offset(), m.value()) for m in got] for p, got in read_all(kafka, topic).items()}


@pytest.mark.slow
def test_disaster_recovery_drill(spark, kafka, kafka_b, s3_server, bucket, tmp_path):
    """Cluster A: two topics (one compacted) and two consumer groups stopped part-way, exported
    with snapshots. Cluster B, fresh: ``blockgz restore --to-time T`` with a rename map. Then
    for each group, what it consumed on A up to its committed offset at T plus what its
    consumers read on B is exactly its topics' records up to T: no duplicate, no gap."""
    from blockgz.sink.export.job import run_export
    from testkit.s3 import s3_options
    from tests.integration.test_export import job_for
    from tests.integration.test_snapshots import commit_group

    run_id = uuid.uuid4().hex[:6]
    events, accounts = f"dr_events_{run_id}", f"dr_accounts_{run_id}"
    kafka.create_topic(events, 3, config={"retention.ms": "604800000"})
    kafka.create_topic(accounts, 2, config={"cleanup.policy": "compact"})
    _phase(kafka, events, 3, 0, 30)
    _phase(kafka, accounts, 2, 0, 12)
    reader, ledger = f"reader-{run_id}", f"ledger-{run_id}"
    at_t = {reader: {(events, 0): 10, (events, 1): 30, (events, 2): 0},
            ledger: {(accounts, 0): 5, (accounts, 1): 11}}  # fmt: skip
    for group, offsets in at_t.items():
        commit_group(kafka, group, offsets)
    job = job_for(
        kafka, s3_server, bucket, f"{events},{accounts}",
        **{"format.json.envelope": "true", "flush.size": "8",
           "blockgz.snapshot.interval": "0", "name": f"dr-{run_id}"},
    )  # fmt: skip
    export = dict(checkpoint=tmp_path / "ckpt", once=True, spark=spark)
    run_export(job, install_signal_handlers=False, **export)
    to_time = int(time.time() * 1000) + 1  # after the snapshot, before what follows
    while time.time() * 1000 < to_time:  # records produced from here on are stamped at T or later
        pass
    archived_at_t = {t: _records_on(kafka, t) for t in (events, accounts)}
    _phase(kafka, events, 3, 30, 10)
    _phase(kafka, accounts, 2, 12, 4)
    commit_group(kafka, reader, {(events, 0): 35, (events, 1): 40, (events, 2): 33})
    run_export(job, install_signal_handlers=False, **export)

    renamed = {events: f"events_b_{run_id}", accounts: f"accounts_b_{run_id}"}
    options = [f"{k}={v}" for k, v in s3_options(s3_server.endpoint_url).items()]
    result = run(
        f"s3://{bucket}", "--topics-regex", f"dr_.*_{run_id}", "--to-time", str(to_time),
        *[a for t, n in renamed.items() for a in ("--rename", f"{t}={n}")],
        "--bootstrap-servers", kafka_b.bootstrap_servers, *EXACT,
        *[a for o in options for a in ("-O", o)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(kafka_b.partitions(renamed[events])) == 3
    assert len(kafka_b.partitions(renamed[accounts])) == 2

    for group, offsets in at_t.items():
        topic = next(iter(offsets))[0]
        before = archived_at_t[topic]
        consumed_on_a = [v for p, got in before.items() for o, v in got if o < offsets[(topic, p)]]
        on_b = consume_as_group(kafka_b, group, [renamed[topic]])
        everything = [v for got in before.values() for _, v in got]
        assert sorted(consumed_on_a + [m.value() for m in on_b]) == sorted(everything), group
    for topic, target in renamed.items():  # the records themselves, as they were up to T
        on_b = read_all(kafka_b, target)
        for p, got in archived_at_t[topic].items():
            assert [m.value() for m in on_b[p]] == [v for _, v in got]


@pytest.fixture(scope="module")
def registry_b():
    """A second, fresh schema registry: cluster B's. One schema is registered first, so the ids
    it hands out differ from registry A's and an id left unrewritten decodes wrongly or not."""
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    from blockgz.local_servers.schema_registry import LocalSchemaRegistry

    with LocalSchemaRegistry() as server:
        SchemaRegistryClient({"url": server.url}).register_schema(
            "taken-value", Schema('{"type": "string"}', "AVRO")
        )
        yield server


DRILL_SCHEMA = json.dumps(
    {"type": "record", "name": "Order", "namespace": "io.blockgz.drill",
     "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}
)  # fmt: skip


def _drill_rows(kind: str, partition: int, first: int, count: int) -> list[tuple]:
    """``(key, value, headers)``: an Avro topic's values are dicts (serialized when sent)."""
    rows = []
    for n in range(first, first + count):
        key = b"%s-%d-%d" % (kind.encode(), partition, n)
        headers = [("seq", b"%d" % n), ("from", b"a")]
        if kind == "avro":
            value: object = {"id": partition * 1000 + n, "item": f"item {n}"}
        elif kind == "json":
            value = b'{"p":%d,"n":%d,"ok":true}' % (partition, n)
        else:
            value = bytes([partition, n % 256, 0, 255]) + b"\x00raw"
        rows.append((key, value, headers))
    return rows


@pytest.mark.slow
def test_disaster_recovery_drill_with_schemas(
    spark, kafka, kafka_b, registry, registry_b, s3_server, bucket, tmp_path
):
    """The issue's drill. Cluster A with registry A: Avro values with keys (AvroConverter,
    ``format.class=avro``), JSON (compacted), bytes (ByteArrayConverter, ``bytearray``), keys
    and headers kept, two consumer groups stopped part-way; exported (one job per format) with
    snapshots. Cluster B, fresh, with its own fresh registry: ``blockgz restore --to-time T
    --schema-registry-url B`` with a rename map. Then, per group, what it consumed on A up to
    its committed offset at T plus what its consumers read on B (Avro decoded with B's
    registry) is exactly its topics' records up to T: no duplicate, no gap, the same decoded
    values, keys, headers and timestamps."""
    from confluent_kafka.admin import ConfigResource, ResourceType
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from blockgz.sink.export.job import run_export
    from testkit.s3 import s3_options
    from tests.integration.test_export import job_for
    from tests.integration.test_snapshots import commit_group

    run_id = uuid.uuid4().hex[:6]
    names = {kind: f"dr3_{kind}_{run_id}" for kind in ("avro", "json", "bytes")}
    avro, jsn, raw = names["avro"], names["json"], names["bytes"]
    kafka.create_topic(avro, 2)
    kafka.create_topic(jsn, 2, config={"cleanup.policy": "compact"})
    kafka.create_topic(raw, 1, config={"retention.ms": "604800000"})
    serializer = AvroSerializer(SchemaRegistryClient({"url": registry.url}), DRILL_SCHEMA)

    def phase(first: int, count: int) -> None:
        for kind, topic in names.items():
            for p in range(len(kafka.partitions(topic))):
                rows = _drill_rows(kind, p, first, count)
                if kind == "avro":
                    context = SerializationContext(topic, MessageField.VALUE)
                    rows = [(k, serializer(v, context), h) for k, v, h in rows]
                kafka.produce(topic, rows, partition=p)

    phase(0, 8)
    shop, audit = f"shop-{run_id}", f"audit-{run_id}"
    at_t = {shop: {(avro, 0): 3, (avro, 1): 8, (jsn, 0): 0, (jsn, 1): 5}, audit: {(raw, 0): 6}}
    for group, offsets in at_t.items():
        commit_group(kafka, group, offsets)
    kept = {"store.kafka.keys": "true", "store.kafka.headers": "true",
            "store.kafka.timestamps": "true", "flush.size": "5",
            "blockgz.snapshot.interval": "0"}  # fmt: skip
    jobs = [
        job_for(kafka, s3_server, bucket, avro, name=f"dr3-avro-{run_id}", **kept,
                **{"format.class": "avro",
                   "value.converter": "io.confluent.connect.avro.AvroConverter",
                   "value.converter.schema.registry.url": registry.url}),
        job_for(kafka, s3_server, bucket, jsn, name=f"dr3-json-{run_id}", **kept,
                **{"format.class": "json", "keys.format.class": "json"}),
        job_for(kafka, s3_server, bucket, raw, name=f"dr3-bytes-{run_id}", **kept,
                **{"format.class": "bytearray", "format.bytearray.framing": "length-prefixed",
                   "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
                   "s3.compression.type": "blockgzip"}),
    ]  # fmt: skip

    def export_all() -> None:
        for n, job in enumerate(jobs):
            run_export(job, checkpoint=tmp_path / f"ckpt{n}", once=True, spark=spark,
                       install_signal_handlers=False)  # fmt: skip

    export_all()
    to_time = int(time.time() * 1000) + 1  # after the snapshots, before what follows
    while time.time() * 1000 < to_time:  # records produced from here on are stamped at T or later
        pass
    deserializer_a = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))

    def decoded(message, deserializer, topic: str) -> tuple:
        value = message.value()
        if topic == avro:
            value = deserializer(value, SerializationContext(message.topic(), MessageField.VALUE))
        headers = [(k, v) for k, v in message.headers() or [] if k != MARKER]
        return topic, message.partition(), message.key(), value, headers, message.timestamp()

    on_a = {topic: read_all(kafka, topic) for topic in names.values()}
    up_to_t = {
        topic: {p: [(m.offset(), decoded(m, deserializer_a, topic)) for m in got]
                for p, got in on_a[topic].items()}
        for topic in names.values()
    }  # fmt: skip
    phase(8, 3)  # after T: exported, never restored
    commit_group(kafka, shop, {(avro, 0): 11, (avro, 1): 11, (jsn, 0): 9, (jsn, 1): 9})
    commit_group(kafka, audit, {(raw, 0): 10})
    export_all()

    renamed = {topic: f"{kind}_on_b_{run_id}" for kind, topic in names.items()}
    options = [f"{k}={v}" for k, v in s3_options(s3_server.endpoint_url).items()]
    result = run(
        f"s3://{bucket}", "--topics-regex", f"dr3_.*_{run_id}", "--to-time", str(to_time),
        *[a for t, n in renamed.items() for a in ("--rename", f"{t}={n}")],
        "--bootstrap-servers", kafka_b.bootstrap_servers,
        "--schema-registry-url", registry_b.url, *EXACT,
        *[a for o in options for a in ("-O", o)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "kept no record" not in result.stderr, result.stderr  # keys/headers/times all kept
    assert {t: len(kafka_b.partitions(n)) for t, n in renamed.items()} == {avro: 2, jsn: 2, raw: 1}
    described = kafka_b.admin().describe_configs([ConfigResource(ResourceType.TOPIC, renamed[jsn])])
    entries = next(iter(described.values())).result(timeout=15)
    assert entries["cleanup.policy"].value == "compact"

    # Avro values carry B's ids: B's registry decodes them (A's ids would not: see registry_b).
    deserializer_b = AvroDeserializer(SchemaRegistryClient({"url": registry_b.url}))
    source_of = {n: t for t, n in renamed.items()}
    id_on_a, id_on_b = (
        got[0][0].value()[1:5] for got in (on_a[avro], read_all(kafka_b, renamed[avro]))
    )
    assert id_on_a != id_on_b  # rewritten, not kept
    for topic, target in renamed.items():  # the records themselves, as they were up to T
        on_b = read_all(kafka_b, target)
        for p, got in up_to_t[topic].items():
            assert [decoded(m, deserializer_b, topic) for m in on_b[p]] == [d for _, d in got]
            assert len(got) == 8
    for group, offsets in at_t.items():
        topics = sorted({t for t, _ in offsets})
        consumed_on_a = [
            d for t in topics for p, got in up_to_t[t].items()
            for o, d in got if o < offsets[(t, p)]
        ]  # fmt: skip
        on_b = consume_as_group(kafka_b, group, [renamed[t] for t in topics])
        read_on_b = [decoded(m, deserializer_b, source_of[m.topic()]) for m in on_b]
        everything = [d for t in topics for got in up_to_t[t].values() for _, d in got]
        assert sorted(consumed_on_a + read_on_b, key=repr) == sorted(everything, key=repr), group
        assert 0 < len(read_on_b) < len(everything), group  # stopped part-way on A
