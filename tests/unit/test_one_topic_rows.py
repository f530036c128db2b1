"""A job of one named topic hands the sink rows without ``topic`` (Spark would copy the name into
every row's Arrow batch); the tasks put it back. What lands must be byte for byte what the
full rows give, and rows without ``topic`` are refused unless the export named the topic."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from blockgz.errors import ConfigError
from blockgz.sink.export.query import rows_read
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.datasource import BlockGzStreamWriter
from blockgz.sink.write.options import INPUT_TOPIC
from blockgz.sink.write.task import with_topic
from testkit.batches import arrow_batches, spark_kafka_rows

T0 = 1_700_000_000_000
#: Kafka's columns but ``topic``, as a one-topic job hands them to the sink.
KAFKA_ROWS = spark_kafka_rows("value", "partition", "offset")
BROKERS = {"kafka.bootstrap.servers": "127.0.0.1:9", "name": "j", "path": "/tmp/x"}


def job(**options: str) -> ExportSettings:
    return ExportSettings.from_mapping({**BROKERS, **options})


def test_a_job_of_one_named_topic_reads_rows_without_the_topic():
    assert rows_read(job(topics="orders")) == (
        ("value", "partition", "offset", "timestamp", "timestampType"),
        "orders",
    )


@pytest.mark.parametrize(
    "options",
    [{"topics": "orders,refunds"}, {"topics.regex": "ord.*"}],
    ids=["two topics", "a pattern"],
)
def test_rows_of_several_topics_keep_their_topic(options):
    columns, topic = rows_read(job(**options))
    assert topic is None and columns is not None and "topic" in columns


def test_rows_the_sink_reads_whole_are_left_whole():
    # The JSON envelope writes every column: Spark hands all of them, topic included.
    assert rows_read(job(topics="orders", **{"format.json.envelope": "true"})) == (None, None)


def test_with_topic_puts_the_topic_back_and_leaves_whole_rows_alone():
    short = pa.RecordBatch.from_pydict({"value": [b"a", b"b"], "partition": [0, 0]})
    longer = pa.RecordBatch.from_pydict({"value": [b"c"] * 5, "partition": [1] * 5})
    whole = pa.RecordBatch.from_pydict({"value": [b"d"], "topic": ["other"]})
    out = list(with_topic([short, longer, short, whole], "orders"))
    assert [b.column("topic").to_pylist() for b in out] == [
        ["orders"] * 2,
        ["orders"] * 5,
        ["orders"] * 2,
        ["other"],
    ]
    assert out[3] is whole


def records(count: int) -> list[KafkaRecord]:
    return [
        KafkaRecord("orders", n % 3, n // 3, T0 + n, None, b'{"n":%d}' % n, None)
        for n in range(count)
    ]


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@pytest.mark.parametrize("compression", ["blockgzip", "none"])
def test_rows_without_the_topic_land_byte_for_byte_as_whole_rows(tmp_path, compression):
    batches = arrow_batches(records(300), [64, 64])
    options = {"format.class": "json", "s3.compression.type": compression, "flush.size": "50"}
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    schema = KAFKA_ROWS  # the writer checks the schema's names; the batches carry the data
    full_rows = spark_kafka_rows("value", "partition", "offset", "topic")
    BlockGzStreamWriter({"path": str(whole), **options}, full_rows).write(iter(batches))
    without = [b.drop_columns(["topic"]) for b in batches]
    writer = BlockGzStreamWriter({"path": str(cut), INPUT_TOPIC: "orders", **options}, schema)
    message = writer.write(iter(without))

    assert tree(cut) == tree(whole) and tree(cut)
    assert {f.topic for f in message.files} == {"orders"}
    assert sum(f.records for f in message.files if f.role == "value") == 300


def test_rows_without_a_topic_are_refused_unless_the_export_named_it(tmp_path):
    rows = KAFKA_ROWS
    with pytest.raises(ConfigError, match=r"missing: topic"):
        BlockGzStreamWriter({"path": str(tmp_path)}, rows)
    assert BlockGzStreamWriter({"path": str(tmp_path), INPUT_TOPIC: "orders"}, rows).input_topic
