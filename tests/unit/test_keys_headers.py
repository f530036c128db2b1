"""``store.kafka.keys`` / ``store.kafka.headers``: files beside each value file, read back.

Write tasks on local directories, in every keys/headers format and compression, then the
reader: every record comes back with the key and headers Kafka held, in step with its value.
"""

from __future__ import annotations

import io
import json

import fastavro
import pyarrow as pa
import pytest

from blockgz.errors import BadRecordError, ConfigError
from blockgz.formats.base import text_or_base64
from blockgz.reader import open_archive
from blockgz.sink.records import KafkaRecord, kafka_arrow_schema
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task


def records(n: int = 12) -> list[KafkaRecord]:
    out = []
    for i in range(n):
        key = None if i == 4 else (b"k\xff%d" % i if i % 3 == 0 else b"user-%d" % i)
        headers = None if i % 2 else [("trace", b"t%d" % i), ("bin", b"\x00\x01")]
        out.append(KafkaRecord("t", 0, 100 + i, 1000 + i, key, b'{"i": %d}' % i, headers))
    return out


def batch_of(recs: list[KafkaRecord]) -> pa.RecordBatch:
    """A Kafka-shaped Arrow batch with headers, as Spark's source gives with includeHeaders."""
    schema = kafka_arrow_schema(True)
    columns = {
        "key": [r.key for r in recs],
        "value": [r.value for r in recs],
        "topic": [r.topic for r in recs],
        "partition": [r.partition for r in recs],
        "offset": [r.offset for r in recs],
        "timestamp": [r.timestamp_ms * 1000 for r in recs],
        "timestampType": [0] * len(recs),
        "headers": [
            [{"key": k, "value": v} for k, v in r.headers] if r.headers is not None else None
            for r in recs
        ],
    }
    return pa.RecordBatch.from_pydict(columns, schema=schema)


def write(tmp_path, recs, **options):
    config = SinkSettings.from_options({"path": str(tmp_path), "flush.size": "5", **options})
    return write_task(config, iter([batch_of(recs)]))


@pytest.mark.parametrize("compression", ["none", "blockgzip"])
@pytest.mark.parametrize("keys_format", ["avro", "json"])
@pytest.mark.parametrize("headers_format", ["avro", "json"])
def test_keys_and_headers_come_back_with_every_record(
    tmp_path, compression, keys_format, headers_format
):
    recs = records()
    message = write(
        tmp_path,
        recs,
        **{
            "store.kafka.keys": "true",
            "store.kafka.headers": "true",
            "keys.format.class": keys_format,
            "headers.format.class": headers_format,
            "s3.compression.type": compression,
        },
    )
    roles = sorted((f.role, f.first_offset, f.records) for f in message.files)
    # Timestamps (on by default): in a block-GZIP value file's sidecar, else a file of their own
    stamps = ("timestamps",) if compression == "none" else ()
    assert roles == sorted(
        (role, first, n)
        for role in ("value", "keys", "headers", *stamps)
        for first, n in ((100, 5), (105, 5), (110, 2))
    )
    names = sorted(p.name for p in (tmp_path / "topics/t/partition=0").iterdir())
    ext = {"avro": ".avro", "json": ".json"}
    gz = ".gz" if compression == "blockgzip" else ""
    assert f"t+0+0000000105.keys{ext[keys_format]}{gz if keys_format == 'json' else ''}" in names
    assert f"t+0+0000000105.headers{ext[headers_format]}" in "".join(names)
    stamps_file = f".t+0+0000000105.timestamps.json{gz}"  # hidden from query engines
    assert (stamps_file in names) == (compression == "none")  # else in the value's sidecar
    with open_archive(str(tmp_path)) as archive:
        got = list(archive.seek("t", 0, 100))
        middle = list(archive.seek("t", 0, 107, count=2))
        stamped = list(archive.seek("t", 0, 107, count=2, timestamps=True))
    assert [(r.offset, r.value, r.key, r.headers) for r in got] == [
        (r.offset, r.value, r.key, r.headers) for r in recs
    ]
    assert {r.timestamp for r in got} == {None}  # not asked for: the file is not read
    assert [(r.offset, r.key) for r in middle] == [(107, b"user-7"), (108, b"user-8")]
    assert [(r.key, r.timestamp, r.timestamp_type) for r in stamped] == [
        (b"user-7", 1007, 0),
        (b"user-8", 1008, 0),
    ]


def test_bytearray_keys_with_length_prefixed_framing_keep_any_bytes(tmp_path):
    recs = [KafkaRecord("t", 0, i, 0, b"\n\x00%d" % i, b"v\n%d" % i) for i in range(7)]
    write(
        tmp_path,
        recs,
        **{
            "format.class": "bytearray",
            "format.bytearray.framing": "length-prefixed",
            "store.kafka.keys": "true",
            "keys.format.class": "bytearray",
        },
    )
    with open_archive(str(tmp_path), {"format.bytearray.framing": "length-prefixed"}) as archive:
        got = list(archive.seek("t", 0, 0))
    assert [(r.key, r.value) for r in got] == [(r.key, r.value) for r in recs]


def test_a_null_key_cannot_go_to_a_bytearray_keys_file(tmp_path):
    recs = [KafkaRecord("t", 0, 0, 0, None, b"{}")]
    with pytest.raises(BadRecordError, match="t-0@0: the key is null"):
        write(tmp_path, recs, **{"store.kafka.keys": "true", "keys.format.class": "bytearray"})
    assert not list(tmp_path.rglob("*.json"))


def test_avro_keys_from_a_key_converter_start_a_file_when_their_schema_changes(tmp_path):
    """A key converter gives typed keys; an Avro keys file holds one key schema."""
    recs = [KafkaRecord("t", 0, i, 0, b"k%d" % i, b"{}") for i in range(4)]
    message = write(
        tmp_path,
        recs,
        **{"store.kafka.keys": "true", "key.converter": "string", "flush.size": "10"},
    )
    (keys_file,) = [f for f in message.files if f.role == "keys"]
    reader = fastavro.reader(io.BytesIO((tmp_path / keys_file.key).read_bytes()))
    assert reader.writer_schema == ["null", "string"] and list(reader) == ["k0", "k1", "k2", "k3"]


def test_headers_cannot_be_bytearray(tmp_path):
    with pytest.raises(ConfigError, match=r"headers\.format\.class=bytearray is not allowed"):
        SinkSettings.from_options(
            {
                "path": str(tmp_path),
                "store.kafka.headers": "true",
                "headers.format.class": "bytearray",
            }
        )


def test_manifests_count_records_once_with_companions(tmp_path):
    from blockgz.sink.write.commit import write_manifest

    recs = records(6)
    config = SinkSettings.from_options(
        {"path": str(tmp_path), "store.kafka.keys": "true", "keys.format.class": "json"}
    )
    message = write_task(config, iter([batch_of(recs)]))
    store, prefix = config.make_store()
    log = config.manifest_log(store, prefix)
    write_manifest(log, 0, [message])
    manifest = log.read_batch(0)
    assert manifest.records == 6 and len(manifest.files) == 3
    assert {f.role for f in manifest.files} == {"value", "keys", "timestamps"}
    stored = json.loads(store.get(log.key(0)))["files"]
    assert sorted(str(f.get("role")) for f in stored) == ["None", "keys", "timestamps"]


@pytest.mark.parametrize("fmt", ["json", "avro"])
def test_tombstones_with_keys_stored_keep_only_their_keys_and_headers(tmp_path, fmt):
    """behavior.on.null.values=write with store.kafka.keys, as Confluent: a tombstone goes to
    tombstone.encoded.partition as keys (and headers) files, and no value file is written."""
    recs = records(12)
    for i in (2, 3, 7):  # tombstones
        r = recs[i]
        recs[i] = KafkaRecord(
            r.topic, r.partition, r.offset, r.timestamp_ms, r.key, None, r.headers
        )
    options = {"behavior.on.null.values": "write", "store.kafka.keys": "true"}
    options |= {"store.kafka.headers": "true", "keys.format.class": "json"}
    if fmt == "avro":
        options |= {"format.class": "avro", "value.converter": "string"}
    message = write(tmp_path, recs, **options)
    tombstone_files = [f for f in message.files if f.encoded_partition == "tombstone"]
    # a tombstone keeps its timestamp too (store.kafka.timestamps, on by default)
    assert sorted(f.role for f in tombstone_files) == ["headers", "keys", "timestamps"]
    assert all(f.records == 3 for f in tombstone_files)
    keys_file = next(f for f in tombstone_files if f.role == "keys")
    assert keys_file.key == "topics/t/tombstone/t+0+0000000102.keys.json"
    lines = (tmp_path / keys_file.key).read_bytes().splitlines()
    assert [json.loads(line) for line in lines] == [text_or_base64(recs[i].key) for i in (2, 3, 7)]
    values = sum(f.records for f in message.files if f.role == "value")
    assert values == 9  # the other records, no null entry among them
    tombstone_dir = sorted(p.name for p in (tmp_path / "topics/t/tombstone").iterdir())
    stamps = ".t+0+0000000102.timestamps" + (".avro" if fmt == "avro" else ".json")
    assert tombstone_dir == sorted(
        [
            ".t+0+0000000102.headers.avro.index.json",
            stamps,
            *([f".{stamps}.index.json"] if fmt == "avro" else []),
            "t+0+0000000102.headers.avro",
            "t+0+0000000102.keys.json",
        ]
    )


def test_a_record_whose_partition_is_the_tombstone_directory_is_refused_not_dropped(tmp_path):
    recs = [KafkaRecord("t", 0, 0, 1000, b"k", b'{"kind": "tombstone"}', None)]
    with pytest.raises(BadRecordError, match="t-0@0: its encoded partition 'kind=tombstone'"):
        write(
            tmp_path,
            recs,
            **{
                "behavior.on.null.values": "write",
                "store.kafka.keys": "true",
                "partitioner.class": "FieldPartitioner",
                "partition.field.name": "kind",
                "tombstone.encoded.partition": "kind=tombstone",
            },
        )
