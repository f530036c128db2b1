"""The export end to end on real local servers: Apache Kafka, S3 and Spark local mode.

One SparkSession serves the whole test session (``spark`` fixture, ``local[2,3]``). Each test
uses its own topic and bucket.
"""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from blockgz.sink.export.job import ExportFailed, run_export
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.store import open_store
from testkit.faults import fault_options
from testkit.kafka_data import (
    Exported,
    manifest_keys_of,
    produce_numbered,
    read_exported,
    value_for,
)
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow


def topic_for(request) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[:60]


def job_for(kafka, s3_server, bucket, topic, **options) -> ExportSettings:
    return ExportSettings.from_mapping(
        {
            "name": "test-export",
            "topics": topic,
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": bucket,
            **s3_options(s3_server.endpoint_url),
            **options,
        }
    )


def export_once(spark, job, checkpoint, **more):
    return run_export(
        job, checkpoint=checkpoint, once=True, spark=spark, install_signal_handlers=False, **more
    )


def bucket_contents(s3_server, bucket) -> tuple[Exported, object, str]:
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    return read_exported(store, prefix), store, prefix


def test_quickstart_layout_matches_confluent(spark, kafka, s3_server, bucket, tmp_path):
    kafka.create_topic("s3_topic", partitions=1)
    produce_numbered(kafka.bootstrap_servers, "s3_topic", 1, 9)
    job = job_for(
        kafka,
        s3_server,
        bucket,
        "s3_topic",
        **{
            "format.class": "io.confluent.connect.s3.format.json.JsonFormat",
            "partitioner.class": "io.confluent.connect.storage.partitioner.DefaultPartitioner",
            "flush.size": "3",
        },
    )
    result = export_once(spark, job, tmp_path / "ckpt")
    exported, store, prefix = bucket_contents(s3_server, bucket)
    assert sorted(exported.objects) == [
        "topics/s3_topic/partition=0/s3_topic+0+0000000000.json",
        "topics/s3_topic/partition=0/s3_topic+0+0000000003.json",
        "topics/s3_topic/partition=0/s3_topic+0+0000000006.json",
    ]
    assert exported.objects["topics/s3_topic/partition=0/s3_topic+0+0000000003.json"] == [
        value_for(0, 3),
        value_for(0, 4),
        value_for(0, 5),
    ]
    assert result.records == 9 and result.files == 3
    assert job.sink.manifest_log(store, prefix).committed_offsets() == {"s3_topic": {0: 9}}


def test_batches_resume_from_the_checkpoint_exactly_once(
    spark, kafka, s3_server, bucket, tmp_path, request
):
    topic = topic_for(request)
    kafka.create_topic(topic, partitions=3)
    produce_numbered(kafka.bootstrap_servers, topic, 3, 40)
    job = job_for(
        kafka,
        s3_server,
        bucket,
        topic,
        **{
            "flush.size": "7",
            "s3.compression.type": "blockgzip",
            "maxOffsetsPerTrigger": "45",
        },
    )
    first = export_once(spark, job, tmp_path / "ckpt")
    assert first.batches >= 3, "maxOffsetsPerTrigger=45 over 120 records needs 3 batches"
    produce_numbered(kafka.bootstrap_servers, topic, 3, 20, start=40)
    second = export_once(spark, job, tmp_path / "ckpt")
    assert first.records + second.records == 180
    exported, store, prefix = bucket_contents(s3_server, bucket)
    exported.assert_exactly_once(3, 60)
    data_keys = set(exported.objects)
    assert manifest_keys_of(store, prefix, job.sink) == exported.written
    # one sidecar for each value object, which keeps the record timestamps (issue 44)
    assert len(exported.companions) == 0
    assert len(exported.indexes) == len(data_keys)
    for key, docs in exported.objects.items():
        p, first_offset = re.search(r"\+(\d+)\+(\d{10})\.json\.gz$", key).groups()
        assert docs[0]["i"] == int(first_offset) and docs[0]["p"] == int(p)
        assert len(docs) <= 7


@pytest.mark.parametrize("compression", ["blockzstd", "zstd"])
def test_zstd_exports_are_zstd_files_read_back_by_offset(
    spark, kafka, s3_server, bucket, tmp_path, request, compression
):
    from blockgz.reader import open_archive

    topic = topic_for(request)
    kafka.create_topic(topic, partitions=2)
    produce_numbered(kafka.bootstrap_servers, topic, 2, 25)
    options = {"flush.size": "10", "s3.compression.type": compression}
    job = job_for(kafka, s3_server, bucket, topic, **options)
    assert export_once(spark, job, tmp_path / "ckpt").records == 50
    exported, _, _ = bucket_contents(s3_server, bucket)  # .zst decoded by zstandard
    exported.assert_exactly_once(2, 25)
    assert all(key.endswith(".json.zst") for key in exported.objects)
    indexed = compression == "blockzstd"
    # the record timestamps: in the sidecars when indexed, else a hidden file beside each object
    assert len(exported.companions) == (0 if indexed else len(exported.objects))
    assert len(exported.indexes) == (len(exported.objects) if indexed else 0)
    url = f"s3://{bucket}"
    with open_archive(url, {**s3_options(s3_server.endpoint_url), "scan.unindexed": "true"}) as a:
        got = [json.loads(r.value) for r in a.seek(topic, 1, 17, count=3)]
    assert got == [value_for(1, i) for i in (17, 18, 19)]


@pytest.mark.parametrize(
    "options",
    [
        {"s3.compression.type": "blockgzip", "flush.size": "6", "maxOffsetsPerTrigger": "50"},
        {"partitioner.class": "field", "partition.field.name": "country", "flush.size": "4"},
    ],
    ids=["default-blockgzip", "field-none"],
)
def test_tasks_reading_kafka_write_what_records_through_spark_write(
    spark, kafka, s3_server, bucket, tmp_path, request, options
):
    """The export's two plans (sink tasks read their offset ranges themselves, or records
    travel through Spark's rows) give the same objects, byte for byte."""
    topic = "tasks_read_" + request.node.callspec.id.replace("-", "_")
    kafka.create_topic(topic, partitions=2)
    produce_numbered(kafka.bootstrap_servers, topic, 2, 30)
    s3_server.client().create_bucket(Bucket=bucket + "-rows")
    results, contents = {}, {}
    for target, read_in_tasks in ((bucket, "true"), (bucket + "-rows", "false")):
        job = job_for(
            kafka,
            s3_server,
            target,
            topic,
            **options,
            **{"blockgz.tasks.read.kafka": read_in_tasks},
        )
        results[target] = export_once(spark, job, tmp_path / target)
        store, prefix = open_store(f"s3://{target}", s3_options(s3_server.endpoint_url))
        contents[target] = {i.key: store.get(i.key) for i in store.list(prefix + "topics/")}
        read_exported(store, prefix).assert_exactly_once(2, 30)
    assert contents[bucket] == contents[bucket + "-rows"]
    assert len(contents[bucket]) >= 8
    assert results[bucket].records == results[bucket + "-rows"].records == 60


# -- every format x compression x partitioner, through Spark's batch writer ---------------
def expected_dir(case: str, doc: dict) -> str:
    when = datetime.fromtimestamp(doc["ts"] / 1000, UTC)
    if case == "default":
        return f"partition={doc['p']}"
    if case == "field":
        return f"country={doc['country']}/user.tier={doc['user']['tier']}"
    if case == "daily":
        return when.strftime("year=%Y/month=%m/day=%d")
    if case == "hourly":
        return when.strftime("year=%Y/month=%m/day=%d/hour=%H")
    if case == "time":  # 6-hour buckets
        floored = when.replace(hour=when.hour - when.hour % 6)
        return floored.strftime("dt=%Y-%m-%d-%H")
    raise AssertionError(case)


PARTITIONERS = {
    "default": {"partitioner.class": "default"},
    "field": {
        "partitioner.class": "io.confluent.connect.storage.partitioner.FieldPartitioner",
        "partition.field.name": "country,user.tier",
    },
    "daily": {
        "partitioner.class": "io.confluent.connect.storage.partitioner.DailyPartitioner",
        "locale": "en_US",
        "timezone": "UTC",
        "timestamp.extractor": "Record",
    },
    "hourly": {
        "partitioner.class": "hourly",
        "locale": "en_US",
        "timezone": "UTC",
        "timestamp.extractor": "RecordField",
        "timestamp.field": "ts",
    },
    "time": {
        "partitioner.class": "io.confluent.connect.storage.partitioner.TimeBasedPartitioner",
        "path.format": "'dt'=YYYY-MM-dd-HH",
        "partition.duration.ms": str(6 * 3_600_000),
        "locale": "en_US",
        "timezone": "UTC",
        "timestamp.extractor": "Record",
    },
}


@pytest.fixture(scope="module")
def kafka_frame(spark, kafka):
    """Kafka rows of a 2-partition topic (30 records each), read once through the source."""
    topic = "matrix_topic"
    kafka.create_topic(topic, partitions=2)
    produce_numbered(kafka.bootstrap_servers, topic, 2, 30)
    query = (
        spark.readStream.format("blockgz-kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
        .writeStream.format("memory")
        .queryName("matrix_rows")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    frame = spark.table("matrix_rows").repartition(2, "partition").sortWithinPartitions("offset")
    frame = frame.cache()
    assert frame.count() == 60
    return topic, frame


@pytest.mark.parametrize("partitioner", sorted(PARTITIONERS))
@pytest.mark.parametrize("compression", ["none", "gzip", "blockgzip"])
@pytest.mark.parametrize("fmt", ["json", "bytearray"])
def test_every_format_compression_partitioner(
    kafka_frame, s3_server, bucket, fmt, compression, partitioner
):
    topic, frame = kafka_frame
    options = {
        "s3.bucket.name": bucket,
        **s3_options(s3_server.endpoint_url),
        "format.class": fmt,
        "s3.compression.type": compression,
        "flush.size": "4",
        **PARTITIONERS[partitioner],
    }
    frame.write.format("blockgz").options(**options).mode("append").save()
    exported, _, _ = bucket_contents(s3_server, bucket)
    exported.assert_exactly_once(2, 30)
    ext = (".json" if fmt == "json" else ".bin") + ("" if compression == "none" else ".gz")
    for key, docs in exported.objects.items():
        head, name = key.rsplit("/", 1)
        assert head.startswith(f"topics/{topic}/")
        directory = head[len(f"topics/{topic}/") :]
        assert {expected_dir(partitioner, d) for d in docs} == {directory}, key
        partitions = {d["p"] for d in docs}
        assert len(partitions) == 1
        offsets = [d["i"] for d in docs]
        assert offsets == sorted(offsets) and len(docs) <= 4
        assert name == f"{topic}+{partitions.pop()}+{offsets[0]:010d}{ext}"
    # the record timestamps (kept by default): in each sidecar when indexed, else a hidden file
    # beside each value object
    indexed = compression == "blockgzip"
    assert len(exported.companions) == (0 if indexed else len(exported.objects))
    assert len(exported.indexes) == (len(exported.objects) if indexed else 0)


# -- bad input ------------------------------------------------------------------------------
def test_non_json_value_fails_the_batch_naming_the_record_and_leaves_nothing(
    spark, kafka, s3_server, bucket, tmp_path, request
):
    from confluent_kafka import Producer

    topic = topic_for(request)
    kafka.create_topic(topic, partitions=1)
    produce_numbered(kafka.bootstrap_servers, topic, 1, 5)
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "batch.num.messages": 1})
    producer.produce(topic, b"this is not json", partition=0)
    assert producer.flush(10) == 0
    del producer
    job = job_for(
        kafka,
        s3_server,
        bucket,
        topic,
        **{"partitioner.class": "field", "partition.field.name": "country", "flush.size": "2"},
    )
    with pytest.raises(ExportFailed, match=rf"{topic}-0@5: value is not valid JSON"):
        export_once(spark, job, tmp_path / "ckpt")
    exported, store, prefix = bucket_contents(s3_server, bucket)
    assert exported.objects == {}, "a failed batch must not leave objects behind"
    assert job.sink.manifest_log(store, prefix).committed_offsets() == {}


def test_task_failure_is_retried_cleanly(spark, kafka, s3_server, bucket, tmp_path, request):
    topic = topic_for(request)
    kafka.create_topic(topic, partitions=2)
    produce_numbered(kafka.bootstrap_servers, topic, 2, 25)
    job = job_for(
        kafka,
        s3_server,
        bucket,
        topic,
        **{"flush.size": "4", **fault_options("fail-first-attempt")},
    )
    result = export_once(spark, job, tmp_path / "ckpt")
    assert result.records == 50
    exported, store, prefix = bucket_contents(s3_server, bucket)
    exported.assert_exactly_once(2, 25)
    assert manifest_keys_of(store, prefix, job.sink) == exported.written


@pytest.mark.slow
def test_quickstart_command_on_a_cluster_explains_and_finds_three_objects(spark_cluster):
    """``blockgz quickstart --master spark://…`` as a user runs it (the local-mode path is the
    same code with another master; ``make demo`` runs it)."""
    import subprocess
    import sys

    blockgz = str(Path(sys.executable).with_name("blockgz"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    done = subprocess.run(
        [blockgz, "quickstart", "--master", spark_cluster.master_url],
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "COLUMNS": "120"},
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    text = done.stdout
    for n in (0, 3, 6):
        assert f"s3://quickstart/topics/s3_topic/partition=0/s3_topic+0+000000000{n}.avro" in text
    assert f"--once --master {spark_cluster.master_url}" in text
    # The first Avro object as avro-tools tojson prints it.
    assert '{"f1": "value1"}\n   {"f1": "value2"}\n   {"f1": "value3"}' in text
    # The block-GZIP seek: one record, read with one LIST, one GET (index), one ranged GET.
    assert 'offset 4: {"f1":"value5"}' in text
    assert "offset 3:" not in text and "offset 5:" not in text
    assert re.search(r"read: [^\n]*\b1 ranged GET \(", text), text
    # The seek passes the reader's settings only, as the printed command does: no warning.
    assert "does not read" not in done.stdout + done.stderr, done.stderr[-2000:]


HOSTILE = ["../../etc", "a/b", "x=y", "..", "%2F", "new\nline", "", "Ünïcödé"]


def hostile_topic(kafka, request, *, missing_field: bool) -> str:
    """Records 0-7 have hostile ``country`` values, 8 is a tombstone, 9 may lack the field."""
    topic = topic_for(request)
    kafka.create_topic(topic, partitions=1)
    records = [(b"k", json.dumps({"i": i, "country": c}).encode()) for i, c in enumerate(HOSTILE)]
    records.append((b"k", None))
    if missing_field:
        records.append((b"k", b'{"i": 9}'))
    kafka.produce(topic, records, partition=0)
    return topic


def test_nulls_and_missing_fields_fail_the_batch_naming_the_record(
    spark, kafka, s3_server, bucket, tmp_path, request
):
    topic = hostile_topic(kafka, request, missing_field=True)
    base = {"partitioner.class": "field", "partition.field.name": "country"}
    # fail (the default): the tombstone at offset 8 stops the batch, nothing is committed.
    job = job_for(kafka, s3_server, bucket, topic, **base)
    with pytest.raises(ExportFailed, match=rf"{topic}-0@8: value is null"):
        export_once(spark, job, tmp_path / "fail")
    assert bucket_contents(s3_server, bucket)[0].objects == {}
    # write: the tombstone goes to the tombstone directory; offset 9 lacks the field.
    job = job_for(kafka, s3_server, bucket, topic, **base, **{"behavior.on.null.values": "write"})
    with pytest.raises(ExportFailed, match=rf"{topic}-0@9: .*'country' is missing"):
        export_once(spark, job, tmp_path / "write")
    assert bucket_contents(s3_server, bucket)[0].objects == {}


@pytest.mark.parametrize("nulls", ["ignore", "write"])
def test_hostile_field_values_stay_inside_the_topic_directory(
    spark, kafka, s3_server, bucket, tmp_path, request, nulls
):
    topic = hostile_topic(kafka, request, missing_field=False)
    job = job_for(
        kafka,
        s3_server,
        bucket,
        topic,
        **{
            "partitioner.class": "field",
            "partition.field.name": "country",
            "behavior.on.null.values": nulls,
        },
    )
    result = run_export(
        job,
        checkpoint=tmp_path / "ckpt",
        once=True,
        spark=spark,
        install_signal_handlers=False,
    )
    assert result.records == 9
    s3 = s3_server.client()
    listed = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix="topics/")["Contents"]]
    keys = [k for k in listed if not k.rsplit("/", 1)[1].startswith(".")]
    hidden = [k for k in listed if k.rsplit("/", 1)[1].startswith(".")]
    assert len(hidden) == len(keys), "one hidden timestamps file beside each value object"
    tombstones = [k for k in keys if "/tombstone/" in k]
    assert len(tombstones) == (1 if nulls == "write" else 0)
    assert len(keys) == len(HOSTILE) + len(tombstones)
    for key in keys:
        head, directory, segment, name = key.split("/")
        assert (head, directory) == ("topics", topic)
        assert segment.startswith("country=") or segment == "tombstone"
        assert name.startswith(f"{topic}+0+")
    assert f"topics/{topic}/country=..%2F..%2Fetc/{topic}+0+0000000000.json" in keys


def test_transaction_markers_leave_exact_gaps_and_seeks_skip_them(
    spark, kafka, s3_server, bucket, tmp_path, request
):
    """Committed transactions put a marker after each batch: offsets 3, 7 and 11 hold none."""
    from confluent_kafka import Producer

    from blockgz.reader import open_archive

    topic = topic_for(request)
    kafka.create_topic(topic, partitions=1)
    producer = Producer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "transactional.id": f"{topic}-tx",
            "batch.num.messages": 1,
            "linger.ms": 0,
        }
    )
    producer.init_transactions(30)
    for batch in range(4):
        producer.begin_transaction()
        for i in range(3):
            producer.produce(topic, json.dumps({"b": batch, "i": i}).encode(), partition=0)
        producer.commit_transaction(30)
    del producer
    job = job_for(
        kafka,
        s3_server,
        bucket,
        topic,
        **{"s3.compression.type": "blockgzip", "flush.size": "5"},
    )
    export_once(spark, job, tmp_path / "ckpt")
    data_offsets = [o for o in range(15) if o % 4 != 3]  # 0-2, 4-6, 8-10, 12-14
    with open_archive(f"s3://{bucket}", s3_options(s3_server.endpoint_url)) as archive:
        records = list(archive.seek(topic, 0, 0))
        assert [r.offset for r in records] == data_offsets
        assert [json.loads(r.value) for r in records] == [
            {"b": b, "i": i} for b in range(4) for i in range(3)
        ]
        assert [r.offset for r in archive.seek(topic, 0, 3, count=2)] == [4, 5]
        listed = [(r.first_offset, r.last_offset, r.records) for r in archive.ls(topic)]
        assert listed == [(0, 5, 5), (6, 12, 5), (13, 14, 2)]


def test_the_json_envelope_keeps_headers_without_include_headers(
    spark, kafka, s3_server, bucket, tmp_path, request
):
    """format.json.envelope=true alone (no includeHeaders=true): headers, keys and timestamps
    come back through open_archive(...).records() as Kafka held them."""
    from confluent_kafka import Producer

    from blockgz.reader import open_archive
    from testkit.kafka_data import T0

    topic = topic_for(request)
    kafka.create_topic(topic, partitions=1)
    producer = Producer(
        {"bootstrap.servers": kafka.bootstrap_servers, "batch.num.messages": 1, "linger.ms": 0}
    )
    sent = []
    for n in range(6):
        headers = [("trace", b"t%d" % n), ("bin", bytes([n, 255]))] if n % 3 else None
        sent.append((b"k%d" % n, {"n": n}, headers, T0 + n))
        producer.produce(
            topic,
            json.dumps({"n": n}).encode(),
            key=b"k%d" % n,
            partition=0,
            headers=headers,
            timestamp=T0 + n,
        )
    assert producer.flush(30) == 0
    job = job_for(
        kafka,
        s3_server,
        bucket,
        topic,
        **{"s3.compression.type": "blockgzip", "flush.size": "4", "format.json.envelope": "true"},
    )
    assert "includeHeaders" not in job_for(kafka, s3_server, bucket, topic).source_options
    export_once(spark, job, tmp_path / "ckpt")
    with open_archive(f"s3://{bucket}", s3_options(s3_server.endpoint_url)) as archive:
        got = [
            (r.key, json.loads(r.value), r.headers, r.timestamp) for _, r in archive.records(topic)
        ]
    assert got == sent


def test_the_jvm_hanging_up_on_the_accumulator_server_prints_no_traceback(spark, capfd):
    """A clean stop must not end with PySpark's EOFError traceback (other errors still print)."""
    server = spark.sparkContext._accumulatorServer
    try:
        raise EOFError
    except EOFError:
        server.handle_error(None, ("127.0.0.1", 0))
    assert capfd.readouterr().err == ""
    try:
        raise ValueError("wrong token")
    except ValueError:
        server.handle_error(None, ("127.0.0.1", 0))
    assert "ValueError: wrong token" in capfd.readouterr().err


def test_the_json_log_has_a_start_a_batch_and_a_partition_event_per_batch_and_a_failure(
    spark, kafka, s3_server, bucket, tmp_path, request
):
    """blockgz.log.format=json: every line of the job's log file is a JSON object; the events
    a log shipper acts on carry what the text lines say, as fields."""
    import io

    from rich.console import Console

    from blockgz.sink.export.progress import ProgressView

    topic = topic_for(request)
    kafka.create_topic(topic, partitions=2)
    produce_numbered(kafka.bootstrap_servers, topic, 2, 30)
    job = job_for(
        kafka, s3_server, bucket, topic, **{"blockgz.log.format": "json", "flush.size": "10"}
    )
    log_file = tmp_path / "export.log"
    with ProgressView(Console(file=io.StringIO())) as view:  # not a terminal: it logs lines
        result = export_once(
            spark, job, tmp_path / "ckpt", on_progress=view.update, log_file=log_file
        )
    assert result.records == 60
    lines = [json.loads(line) for line in log_file.read_text().splitlines()]
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    events = [line["event"] for line in lines if "event" in line]
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "start" and events[0]["source"] in ("kafka", "blockgz-kafka")
    batches = [e for e in events if e["kind"] == "batch"]
    assert len(batches) == result.batches and sum(b["records"] for b in batches) == 60
    # The sink's tasks read Kafka (the default): Spark's rows are offset ranges, not records.
    assert sum(b["spark_rows"] for b in batches) < 60
    assert all(b["duration_ms"]["triggerExecution"] > 0 for b in batches)
    last = {(e["topic"], e["partition"]): e for e in events if e["kind"] == "partition"}
    assert {tp: (e["next_offset"], e["lag"]) for tp, e in last.items()} == {
        (topic, 0): (30, 0),
        (topic, 1): (30, 0),
    }
    assert sum(e["objects"] for e in last.values()) == 6  # flush.size=10, 30 records each

    # The same job against a bucket that is not there fails, and says so in the log's last line.
    broken = job_for(
        kafka,
        s3_server,
        bucket + "-missing",
        topic,
        **{"blockgz.log.format": "json", "blockgz.preflight": "false"},
    )
    failed_log = tmp_path / "failed.log"
    with pytest.raises(Exception) as failure:
        export_once(spark, broken, tmp_path / "ckpt2", log_file=failed_log)
    last_line = json.loads(failed_log.read_text().splitlines()[-1])
    assert last_line["level"] == "ERROR" and last_line["event"]["kind"] == "failure"
    assert last_line["event"]["error"] == str(failure.value)
