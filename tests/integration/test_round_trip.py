"""Every format round-trips: produce → export → replay into a fresh topic → consume, on the
real servers (Apache Kafka, SeaweedFS, Spark local mode, the registry stand-in).

One property test per ``format.class`` (json, json with the envelope, bytearray, avro):
Hypothesis draws the examples — records with keys (null too), values, headers (null values
too), CreateTime timestamps — each example is produced to its own partition of one topic, the
topic is exported once with the format's options (keys, headers and timestamps kept),
replayed into a new topic, and both topics are read back by a consumer: key and value
bytes, headers, timestamp and timestamp type are equal, record for record, in every partition.
The replay's resume header (``blockgz.replay``) is left out of the comparison. An export takes
seconds, so the examples share one (no shrinking: a failure names its partition, that is its
example).
"""

from __future__ import annotations

import itertools
import json
import time

import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

from blockgz.reader import open_archive
from blockgz.reader.restore.markers import MARKER
from blockgz.reader.restore.send import SendSettings, send_records
from blockgz.registry import RegistrySettings
from blockgz.sink.export.job import run_export
from blockgz.sink.jobconfig.config import ExportSettings
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow

#: Examples drawn per format, one partition each (the first is Hypothesis's simplest).
EXAMPLES = 5
_names = itertools.count()


def examples(strategy: st.SearchStrategy, count: int = EXAMPLES) -> list:
    """``count`` examples Hypothesis generates from ``strategy`` (no database, no shrinking):
    the property is then checked on all of them with one export."""
    found: list = []

    @settings(max_examples=count, database=None, phases=[Phase.generate], deadline=None)
    @given(strategy)
    def collect(example):
        found.append(example)

    collect()
    return found


header = st.tuples(
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6),
    st.none() | st.binary(max_size=8),
)
keys = st.none() | st.binary(max_size=12)
stamps = st.integers(1, 4_000_000_000_000)  # CreateTime, epoch ms (0 would mean "now")
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=6,
).map(lambda doc: json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode())  # fmt: skip


def records(values) -> st.SearchStrategy:
    """Lists of ``(key, value, headers, timestamp)``."""
    return st.lists(
        st.tuples(keys, values, st.lists(header, max_size=3), stamps), min_size=1, max_size=12
    )


AVRO_SCHEMA = {
    "type": "record",
    "name": "Event",
    "namespace": "io.blockgz.test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "tag", "type": ["null", "bytes"], "default": None},
    ],
}
avro_values = st.fixed_dictionaries(
    {"id": st.integers(-(2**63), 2**63 - 1), "name": st.text(max_size=10),
     "tag": st.none() | st.binary(max_size=6)}
)  # fmt: skip


def produce(kafka, topic: str, partitions: list, serialize=None) -> None:
    """Each partition's rows to that partition, with their timestamps."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 5})
    for partition, rows in enumerate(partitions):
        for key, value, headers, stamp in rows:
            data = serialize(value, topic) if serialize is not None else value
            producer.produce(topic, data, key, partition, timestamp=stamp, headers=headers or None)
    assert producer.flush(30) == 0


def consumed(kafka, topic: str) -> dict[int, list[tuple]]:
    """Per partition, ``(key, value, headers, (type, timestamp))`` of every record."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "round-trip"})
    out: dict[int, list[tuple]] = {}
    try:
        for partition, end in kafka.high_watermarks(topic).items():
            consumer.assign([TopicPartition(topic, partition, 0)])
            got: list = []
            deadline = time.monotonic() + 30
            while len(got) < end:
                assert time.monotonic() < deadline, f"{topic}-{partition}: {len(got)} of {end}"
                got += [m for m in consumer.consume(500, timeout=1) if m.error() is None]
            out[partition] = [
                (m.key(), m.value(),
                 [(k, v) for k, v in m.headers() or [] if k != MARKER] or None, m.timestamp())
                for m in got
            ]  # fmt: skip
    finally:
        consumer.close()
    return out


def round_trip(spark, kafka, s3_server, bucket, tmp_path, partitions, options, *,
               serialize=None, registry=None, topic_config=None):  # fmt: skip
    """Produce each of ``partitions`` (lists of rows) to its partition, export them with
    ``options``, replay; what a consumer reads from the source topic and from the restored
    one, and the replay's result."""
    n = next(_names)
    source, target = f"rt_{options['format.class']}_{n}", f"rt_{options['format.class']}_{n}_out"
    kafka.create_topic(source, len(partitions), config=topic_config)
    kafka.create_topic(target, len(partitions))
    produce(kafka, source, partitions, serialize)
    rows = [row for part in partitions for row in part]
    job = ExportSettings.from_mapping(
        {
            "name": f"round-trip-{n}",
            "topics": source,
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": bucket,
            **s3_options(s3_server.endpoint_url),
            "store.kafka.keys": "true",
            "store.kafka.headers": "true",
            "store.kafka.timestamps": "true",
            **options,
        }
    )
    done = run_export(
        job, checkpoint=tmp_path / f"ckpt{n}", once=True, spark=spark,
        install_signal_handlers=False,
    )  # fmt: skip
    assert done.records == len(rows)
    with open_archive(f"s3://{bucket}", s3_options(s3_server.endpoint_url)) as archive:
        result = send_records(
            archive,
            SendSettings(
                source,
                target,
                registry=registry,
                producer={"bootstrap.servers": kafka.bootstrap_servers},
            ),
        )
    assert result.total_sent == len(rows) and result.not_kept == []
    return consumed(kafka, source), consumed(kafka, target), result


def assert_same(original: dict, restored: dict, partitions: list) -> None:
    for partition, rows in enumerate(partitions):  # partition n holds example n
        want = [(1, stamp) for *_, stamp in rows]  # CreateTime, as produced
        assert [t for *_, t in original[partition]] == want, f"example {partition}: {rows}"
        assert restored[partition] == original[partition], f"example {partition}: {rows}"


def test_json(spark, kafka, s3_server, bucket, tmp_path):
    rows = examples(records(json_values))
    *topics, _ = round_trip(spark, kafka, s3_server, bucket, tmp_path, rows,
                            {"format.class": "json", "keys.format.class": "json"})  # fmt: skip
    assert_same(*topics, rows)


def test_json_envelope_of_a_bytearray_topic(spark, kafka, s3_server, bucket, tmp_path):
    rows = examples(records(st.binary(max_size=20)))
    *topics, _ = round_trip(
        spark, kafka, s3_server, bucket, tmp_path, rows,
        {"format.class": "json", "format.json.envelope": "true",
         "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
         "s3.compression.type": "blockgzip"},
    )  # fmt: skip
    assert_same(*topics, rows)


def test_bytearray(spark, kafka, s3_server, bucket, tmp_path):
    rows = examples(records(st.binary(max_size=20)))
    *topics, _ = round_trip(
        spark, kafka, s3_server, bucket, tmp_path, rows,
        {"format.class": "bytearray", "format.bytearray.framing": "length-prefixed",
         "s3.compression.type": "blockgzip", "keys.format.class": "json"},
    )  # fmt: skip
    assert_same(*topics, rows)


def test_avro(spark, kafka, s3_server, bucket, tmp_path, registry):
    rows = examples(records(avro_values))
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    serializer = AvroSerializer(SchemaRegistryClient({"url": registry.url}),
                                json.dumps(AVRO_SCHEMA))  # fmt: skip

    def serialize(value, topic):
        return serializer(value, SerializationContext(topic, MessageField.VALUE))

    *topics, _ = round_trip(
        spark, kafka, s3_server, bucket, tmp_path, rows,
        {"format.class": "avro",
         "value.converter": "io.confluent.connect.avro.AvroConverter",
         "value.converter.schema.registry.url": registry.url},
        serialize=serialize, registry=RegistrySettings(url=registry.url),
    )  # fmt: skip
    assert_same(*topics, rows)


def test_log_append_times_come_back_as_create_times_of_the_same_instant(
    spark, kafka, s3_server, bucket, tmp_path
):
    """A topic stamped by the broker (LogAppendTime): each restored record has the time the
    source broker gave it, as CreateTime (no producer can set a log-append time), and the
    replay says so."""
    rows = [(b"k%d" % n, b'{"n":%d}' % n, [], 1) for n in range(5)]
    original, restored, result = round_trip(
        spark, kafka, s3_server, bucket, tmp_path, [rows], {"format.class": "json"},
        topic_config={"message.timestamp.type": "LogAppendTime"},
    )  # fmt: skip
    original, restored = original[0], restored[0]
    assert {kind for *_, (kind, _) in original} == {2}  # librdkafka's LOG_APPEND_TIME
    assert [(k, v, h) for k, v, h, _ in restored] == [(k, v, h) for k, v, h, _ in original]
    assert [(1, stamp) for *_, (_, stamp) in original] == [t for *_, t in restored]
    assert result.append_times
