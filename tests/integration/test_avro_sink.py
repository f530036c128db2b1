"""Converters x formats, schema evolution and bad Avro input, through the sink's write task.

Values are serialised by confluent-kafka's real ``AvroSerializer`` against the loopback
registry (``registry`` fixture), then written by :func:`blockgz.sink.write.task.write_task` — what
one Spark task runs — into a local directory, and read back with fastavro and the blockgz reader.
The Spark and Kafka round trip of the same path is in ``test_avro_export.py``.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import fastavro
import orjson
import pytest

from blockgz.archive.layout import Layout, parse_archive_key
from blockgz.errors import BadRecordError, RegistryError
from blockgz.objects.indexed import IndexedReader
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from testkit.avro_data import V1, V2, V3_INCOMPATIBLE, avro_value_for
from testkit.batches import arrow_batches
from testkit.kafka_data import read_avro

T0 = 1_795_305_600_000


class AvroTopic:
    """Serialises values for one topic with the real AvroSerializer (auto-registering)."""

    def __init__(self, registry, topic: str):
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.topic = topic
        self.client = SchemaRegistryClient({"url": registry.url})
        self._serializers: dict[str, object] = {}

    def value(self, doc: dict, schema: dict) -> bytes:
        from confluent_kafka.schema_registry.avro import AvroSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        text = json.dumps(schema)
        if text not in self._serializers:
            self._serializers[text] = AvroSerializer(self.client, text)
        context = SerializationContext(self.topic, MessageField.VALUE)
        return self._serializers[text](doc, context)

    def records(self, schemas: list[dict], partition: int = 0) -> list[KafkaRecord]:
        """One record per schema in ``schemas``, offsets 0, 1, 2, ..."""
        return [
            KafkaRecord(
                self.topic,
                partition,
                i,
                T0 + i,
                None,
                self.value(avro_value_for(partition, i, schema), schema),
            )
            for i, schema in enumerate(schemas)
        ]


def avro_options(registry, root: Path, **extra: str) -> dict[str, str]:
    return {
        "path": str(root),
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": registry.url,
        **extra,
    }


def write(options: dict[str, str], records: list[KafkaRecord], sizes=None):
    config = SinkSettings.from_options(options)
    return write_task(config, iter(arrow_batches(records, sizes))).files


def value_paths(root: Path, pattern: str) -> list[Path]:
    """The value objects among the files under ``root`` matching ``pattern``, as the layout
    parses them (not the hidden timestamps files beside them, nor sidecars)."""
    found = []
    for path in sorted(root.rglob(pattern)):
        ref = parse_archive_key(Layout(), path.relative_to(root).as_posix())
        if ref is not None and ref.role == "value":
            found.append(path)
    return found


def avro_objects(root: Path) -> dict[str, tuple[dict, list[dict]]]:
    """Every ``.avro`` value object under ``root``: (its header schema, its records)."""
    out = {}
    for path in value_paths(root, "*.avro"):
        reader = fastavro.reader(io.BytesIO(path.read_bytes()))
        out[str(path.relative_to(root))] = (reader.writer_schema, list(reader))
    return out


@pytest.fixture
def topic(registry, request) -> AvroTopic:
    name = "avro_" + request.node.name.replace("[", "_").replace("]", "").replace("-", "_")
    return AvroTopic(registry, name[:80])


# -- converters x formats -------------------------------------------------------------------------
@pytest.mark.parametrize("codec", ["null", "deflate", "snappy", "bzip2", "xz", "zstandard"])
def test_avro_to_avro_every_codec_reads_back_with_fastavro(registry, topic, tmp_path, codec):
    records = topic.records([V1] * 25)
    options = avro_options(
        registry, tmp_path, **{"format.class": "avro", "avro.codec": codec, "flush.size": "10"}
    )
    written = write(options, records)
    assert {f.role for f in written} == {"value"}  # timestamps kept by default, in the sidecars
    files = [f for f in written if f.role == "value"]
    assert [f.records for f in files] == [10, 10, 5]
    objects = avro_objects(tmp_path)
    assert [name.rsplit("/", 1)[1] for name in objects] == [
        f"{topic.topic}+0+0000000000.avro",
        f"{topic.topic}+0+0000000010.avro",
        f"{topic.topic}+0+0000000020.avro",
    ]
    got = [doc for _, docs in objects.values() for doc in docs]
    assert [d["i"] for d in got] == list(range(25))
    assert read_avro((tmp_path / files[0].key).read_bytes())[3] == avro_value_for(0, 3)
    header, _ = next(iter(objects.values()))
    assert header["connect.name"] == "com.example.Event"  # connect.meta.data=true
    # Each object is seekable through its sidecar: the reader decodes one block alone.
    with IndexedReader.open_file(tmp_path / files[1].key) as obj:
        assert [r.offset for r in obj.seek(13, count=2)] == [13, 14]


def test_same_records_give_the_same_bytes(registry, topic, tmp_path):
    """Replaying a batch overwrites each object with itself (the sync marker comes from the key)."""
    records = topic.records([V1] * 12)
    for run in ("a", "b"):
        write(avro_options(registry, tmp_path / run, **{"format.class": "avro"}), records)
    a = {p.relative_to(tmp_path / "a"): p.read_bytes() for p in (tmp_path / "a").rglob("*.*")}
    b = {p.relative_to(tmp_path / "b"): p.read_bytes() for p in (tmp_path / "b").rglob("*.*")}
    assert a == b and len(a) == 2  # data and sidecar (which keeps the record timestamps)


def test_avro_to_json_as_confluents_json_format(registry, topic, tmp_path):
    records = topic.records([V1] * 4)
    write(avro_options(registry, tmp_path, **{"format.class": "json"}), records)
    (path,) = value_paths(tmp_path, "*.json")
    lines = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert lines == [avro_value_for(0, i) for i in range(4)]  # ts as epoch millis


def test_avro_to_block_gzip_json_is_seekable(registry, topic, tmp_path):
    records = topic.records([V1] * 300)
    options = avro_options(
        registry,
        tmp_path,
        **{
            "format.class": "json",
            "s3.compression.type": "blockgzip",
            "s3.compression.block.size": "4KiB",
        },
    )
    (done,) = [f for f in write(options, records) if f.role == "value"]
    with IndexedReader.open_file(tmp_path / done.key) as obj:
        assert len(obj.index.chunks) > 3
        (rec,) = list(obj.seek(217, count=1))
    assert json.loads(rec.value) == avro_value_for(0, 217)


def test_field_and_time_partitioners_read_avro_fields(registry, topic, tmp_path):
    records = topic.records([V1] * 8)
    write(
        avro_options(
            registry,
            tmp_path / "field",
            **{
                "format.class": "avro",
                "partitioner.class": "field",
                "partition.field.name": "country,user.tier",
            },
        ),
        records,
    )
    dirs = sorted(p.parent.name for p in value_paths(tmp_path / "field", "*.avro"))
    assert "user.tier=0" in dirs and "user.tier=1" in dirs
    assert len({p.parent.parent.name for p in value_paths(tmp_path / "field", "*.avro")}) == 3
    write(
        avro_options(
            registry,
            tmp_path / "hourly",
            **{
                "format.class": "avro",
                "partitioner.class": "hourly",
                "locale": "en_US",
                "timezone": "UTC",
                "timestamp.extractor": "RecordField",
                "timestamp.field": "ts",  # an Avro timestamp-millis
            },
        ),
        records,
    )
    hours = sorted(
        str(p.parent.relative_to(tmp_path / "hourly"))
        for p in value_paths(tmp_path / "hourly", "*.avro")
    )
    assert hours[0].endswith("year=2026/month=11/day=22/hour=00")
    assert len(hours) == 8  # ts steps five hours per record


def test_string_bytearray_and_json_envelope_into_avro(tmp_path):
    def records(values: list[bytes]) -> list[KafkaRecord]:
        return [KafkaRecord("t", 0, i, T0, None, v) for i, v in enumerate(values)]

    base = {"format.class": "avro"}
    write({"path": str(tmp_path / "s"), **base, "value.converter": "string"}, records([b"a", b"b"]))
    ((schema, docs),) = avro_objects(tmp_path / "s").values()
    assert schema == "string" and docs == ["a", "b"]
    write(
        {"path": str(tmp_path / "b"), **base, "value.converter": "bytearray"},
        records([b"\x00\n", b"\xff"]),
    )
    ((schema, docs),) = avro_objects(tmp_path / "b").values()
    assert schema == "bytes" and docs == [b"\x00\n", b"\xff"]
    envelope = {
        "schema": {
            "type": "struct",
            "name": "Order",
            "fields": [{"field": "id", "type": "int64"}, {"field": "blob", "type": "bytes"}],
        },
        "payload": {"id": 9, "blob": base64.b64encode(b"\x01").decode()},
    }
    write(
        {"path": str(tmp_path / "j"), **base, "value.converter": "json"},
        records([orjson.dumps(envelope)]),
    )
    ((schema, docs),) = avro_objects(tmp_path / "j").values()
    assert schema["name"] == "Order" and docs == [{"id": 9, "blob": b"\x01"}]


# -- schema evolution ------------------------------------------------------------------------------
def evolve(registry, topic, tmp_path, mode: str, schemas: list[dict]):
    options = avro_options(
        registry, tmp_path, **{"format.class": "avro", "schema.compatibility": mode}
    )
    files = [f for f in write(options, topic.records(schemas)) if f.role == "value"]
    objects = avro_objects(tmp_path)
    return files, objects


def field_names(schema: dict) -> list[str]:
    return [f["name"] for f in schema["fields"]]


def test_none_starts_a_file_per_schema_change(registry, topic, tmp_path):
    files, objects = evolve(registry, topic, tmp_path, "NONE", [V1, V1, V2, V1])
    assert [f.first_offset for f in files] == [0, 2, 3]
    assert [len(docs) for _, docs in objects.values()] == [2, 1, 1]


@pytest.mark.parametrize("mode", ["BACKWARD", "FULL"])
def test_backward_alternating_producers_do_not_storm(registry, topic, tmp_path, mode):
    files, objects = evolve(registry, topic, tmp_path, mode, [V1, V2, V1, V2, V1, V1, V2])
    assert [f.first_offset for f in files] == [0, 1], "only the first newer schema rotates"
    (first_schema, first), (newest, rest) = objects.values()
    assert field_names(first_schema) == field_names(V1) and len(first) == 1
    assert field_names(newest) == field_names(V2)
    # Older records are projected to the newest schema, the default filled in.
    assert [d["channel"] for d in rest] == ["app", "web", "app", "web", "web", "app"]


def test_forward_projects_to_the_oldest(registry, topic, tmp_path):
    files, objects = evolve(registry, topic, tmp_path, "FORWARD", [V2, V1, V2, V2])
    assert [f.first_offset for f in files] == [0, 1]
    schema, docs = list(objects.values())[1]
    assert field_names(schema) == field_names(V1) and len(docs) == 3
    assert all("channel" not in d for d in docs)


def test_removed_field_and_promoted_type(registry, topic, tmp_path):
    """Field removed (v2 -> v3 without "country") and int promoted to long, under BACKWARD."""
    v_removed = {**V1, "fields": [f for f in V1["fields"] if f["name"] != "country"]}
    v_promoted = {
        **v_removed,
        "fields": [{**f, "type": "long"} if f["name"] == "p" else f for f in v_removed["fields"]],
    }
    _files, objects = evolve(
        registry, topic, tmp_path, "BACKWARD", [V1, v_removed, V1, v_promoted, V1]
    )
    schema, docs = list(objects.values())[-1]
    assert dict((f["name"], f["type"]) for f in schema["fields"])["p"] == "long"
    assert [d["i"] for d in docs] == [3, 4] and all("country" not in d for d in docs)


def test_incompatible_change_names_both_schema_ids(registry, topic, tmp_path):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    SchemaRegistryClient({"url": registry.url}).set_compatibility(
        f"{topic.topic}-value", "NONE"
    )  # the registry lets it in; the sink's BACKWARD must not
    records = topic.records([V1, V3_INCOMPATIBLE, V1])
    ids = [int.from_bytes(r.value[1:5], "big") for r in records]
    with pytest.raises(BadRecordError) as info:
        write(
            avro_options(
                registry, tmp_path, **{"format.class": "avro", "schema.compatibility": "BACKWARD"}
            ),
            records,
        )
    message = str(info.value)
    assert f"{topic.topic}-0@2" in message
    assert f"schema id {ids[0]}" in message and f"schema id {ids[1]}" in message
    assert not list(tmp_path.rglob("*.avro")), "a failed task leaves nothing behind"


# -- bad input -------------------------------------------------------------------------------------
def test_garbage_and_unknown_schema_ids_name_the_record(registry, topic, tmp_path):
    good = topic.records([V1])
    garbage = KafkaRecord(topic.topic, 0, 1, T0, None, b"not avro at all")
    unknown = KafkaRecord(topic.topic, 0, 1, T0, None, b"\x00\x00\x0f\x42\x40\x02")
    with pytest.raises(BadRecordError, match=rf"{topic.topic}-0@1: value is not in Confluent"):
        write(avro_options(registry, tmp_path, **{"format.class": "avro"}), [*good, garbage])
    with pytest.raises(BadRecordError, match=rf"{topic.topic}-0@1: schema id 1000000 is not"):
        write(avro_options(registry, tmp_path, **{"format.class": "avro"}), [*good, unknown])
    assert not list(tmp_path.rglob("*.*"))


def test_registry_down_fails_the_batch_and_one_request_per_schema_id(registry, topic, tmp_path):
    records = topic.records([V1] * 50)
    schema_id = int.from_bytes(records[0].value[1:5], "big")
    from blockgz import registry as registry_cache

    registry_cache._CACHES.clear()  # a fresh executor process: nothing cached yet
    before = registry.request_count(f"/schemas/ids/{schema_id}")
    write(avro_options(registry, tmp_path / "ok", **{"format.class": "avro"}), records)
    assert registry.request_count(f"/schemas/ids/{schema_id}") - before == 1

    registry_cache._CACHES.clear()
    options = avro_options(
        registry,
        tmp_path / "down",
        **{
            "format.class": "avro",
            "value.converter.max.retries": "1",
            "value.converter.retries.wait.ms": "10",
        },
    )
    with registry.outage(), pytest.raises(RegistryError) as info:
        write(options, records)
    assert str(info.value).startswith(f"{topic.topic}-0@0: cannot reach the schema registry")
    assert not list(tmp_path.glob("down/**/*.*"))
