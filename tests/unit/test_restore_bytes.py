"""Every format and converter the export accepts, written by the sink and read back as replay
sends it: the key and value bytes Kafka held, the headers, the timestamp and its type; or a
refusal in one line. No broker: the unit under test is what the archive gives back
(:class:`~blockgz.reader.restore.value_bytes.KafkaBytes`); ``tests/integration/test_round_trip.py``
sends it through a real broker."""

from __future__ import annotations

import pytest

from blockgz.errors import ConfigError
from blockgz.reader import open_archive
from blockgz.reader.restore.value_bytes import KafkaBytes
from blockgz.registry import RegistrySettings
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.commit import write_manifest
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from testkit.batches import arrow_batches

#: Never contacted: none of these archives holds Avro-converted entries.
NOWHERE = RegistrySettings(url="http://127.0.0.1:9")
AVRO = "io.confluent.connect.s3.format.avro.AvroFormat"
STRING = "org.apache.kafka.connect.storage.StringConverter"
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
JSON = "org.apache.kafka.connect.json.JsonConverter"


def records_of(values: list[bytes], keys: list[bytes | None]) -> list[KafkaRecord]:
    out = []
    for n, (value, key) in enumerate(zip(values, keys, strict=True)):
        headers = [("h", b"\x00%d" % n), ("empty", None)] if n % 2 else None
        record = KafkaRecord("t", 0, n, 1_700_000_000_000 + n * 7, key, value, headers)
        record.timestamp_type = n % 2  # CreateTime and LogAppendTime
        out.append(record)
    return out


TEXT = ["café".encode(), b"{not json", b'"quoted"', b"12"]
RAW = [b"\x00\xff\n", b"", b"plain", b"\xc3"]
JSON_TEXT = [b'{"a":1}', b"[1,2]", b'"s"', b"null"]
KEYS = [b"user-1", None, b"\x00\xfe", b"k"]
TEXT_KEYS = [b"user-1", None, "ключ".encode(), b"7"]

#: (id, options, values, keys): every combination whose bytes come back exactly.
EXACT = [
    ("json", {}, JSON_TEXT, KEYS),
    # An envelope cannot tell the JSON text null from a tombstone: no null value here.
    ("json-envelope", {"format.json.envelope": "true"}, [*JSON_TEXT[:3], b"true"], KEYS),
    ("json-envelope-bytes", {"format.json.envelope": "true", "value.converter": BYTES}, RAW, KEYS),
    ("json-bytes", {"value.converter": BYTES}, RAW, KEYS),
    ("json-string", {"value.converter": STRING}, TEXT, TEXT_KEYS),
    ("json-string-keys", {"value.converter": STRING, "key.converter": STRING,
                          "keys.format.class": "json"}, TEXT, TEXT_KEYS),
    ("json-bytes-keys", {"value.converter": BYTES, "key.converter": BYTES,
                         "keys.format.class": "json"}, RAW, KEYS),
    ("json-schemaless-json", {"value.converter": JSON,
                              "value.converter.schemas.enable": "false"}, JSON_TEXT, KEYS),
    ("bytearray", {"format.class": "bytearray", "s3.compression.type": "blockgzip",
                   "format.bytearray.framing": "length-prefixed"}, RAW, KEYS),
    ("bytearray-converter", {"format.class": "bytearray", "value.converter": BYTES,
                             "s3.compression.type": "blockgzip",
                             "format.bytearray.framing": "length-prefixed"}, RAW, KEYS),
    ("avro-string", {"format.class": AVRO, "value.converter": STRING}, TEXT, KEYS),
    ("avro-string-utf16", {"format.class": AVRO, "value.converter": STRING,
                           "value.converter.encoding": "UTF-16LE"},
     ["é".encode("utf-16-le"), "ab".encode("utf-16-le"), b"", "z".encode("utf-16-le")], KEYS),
    ("avro-bytes", {"format.class": AVRO, "value.converter": BYTES}, RAW, KEYS),
    ("avro-bytes-string-keys", {"format.class": AVRO, "value.converter": BYTES,
                                "key.converter": STRING}, RAW, TEXT_KEYS),
]  # fmt: skip


def archive(root, options: dict, records: list[KafkaRecord], *, batch_path: bool) -> None:
    config = SinkSettings.from_options(
        {"path": str(root), "flush.size": "3", "store.kafka.keys": "true",
         "store.kafka.headers": "true", "store.kafka.timestamps": "true", **options}
    )  # fmt: skip
    if "keys.format.class" not in options and options.get("format.class") == "bytearray":
        config = SinkSettings.from_options(
            {"path": str(root), "flush.size": "3", "store.kafka.keys": "true",
             "store.kafka.headers": "true", "store.kafka.timestamps": "true",
             "keys.format.class": "json", **options}
        )  # fmt: skip
    batches = arrow_batches(records, None if batch_path else [1] * len(records))
    committed(config, write_task(config, iter(batches)))


def committed(config: SinkSettings, message) -> None:
    """The batch's manifest, as the export commits it: it records each file's converter."""
    write_manifest(config.manifest_log(), 0, [message])


def restored(root, registry=NOWHERE) -> list[tuple]:
    out = []
    with open_archive(str(root)) as archive:
        kafka = KafkaBytes.check(archive, "t", [0], registry, "t2")
        for _, block in archive.record_blocks("t", [0]):
            values = kafka.values(0, block) or [r.value for r in block]
            keys = kafka.keys(0, block) or [r.key for r in block]
            for r, v, k in zip(block, values, keys, strict=True):
                out.append((r.offset, k, v, r.headers, r.timestamp, r.timestamp_type))
    return out


def expected(records: list[KafkaRecord]) -> list[tuple]:
    return [
        (r.offset, r.key, r.value, r.headers, r.timestamp_ms, r.timestamp_type) for r in records
    ]


@pytest.mark.parametrize("batch_path", [True, False], ids=["batch", "records"])
@pytest.mark.parametrize(("options", "values", "keys"), [c[1:] for c in EXACT],
                         ids=[c[0] for c in EXACT])  # fmt: skip
def test_what_replay_sends_is_what_kafka_held(tmp_path, options, values, keys, batch_path):
    records = records_of(values, keys)
    archive(tmp_path, options, records, batch_path=batch_path)
    want = expected(records)
    if "format.json.envelope" in options:  # it keeps the timestamp, not its type (CreateTime)
        want = [(*w[:5], None) for w in want]
    assert restored(tmp_path) == want


@pytest.mark.parametrize(
    ("options", "missing"),
    [
        ({"format.class": AVRO, "value.converter": JSON}, "JsonConverter with schemas.enable"),
        ({"value.converter": JSON}, "JsonConverter with schemas.enable"),
        ({"value.converter.schemas.enable": "true"}, "kept only their payloads"),
        ({"format.class": "parquet", "value.converter": JSON}, "values are Parquet columns"),
    ],
    ids=["avro-json-schemas", "json-json-schemas", "json-unwrapped", "parquet"],
)
def test_what_cannot_come_back_is_refused_in_one_line(tmp_path, options, missing):
    envelope = b'{"schema":{"type":"string","optional":false},"payload":"x"}'
    archive(tmp_path, options, records_of([envelope] * 2, [b"k", None]), batch_path=False)
    with pytest.raises(ConfigError, match=missing) as refused:
        restored(tmp_path)
    assert "\n" not in str(refused.value) and "t/0: cannot restore" in str(refused.value)


def test_timestamps_are_kept_in_the_values_format_by_default(tmp_path):
    """By default (``store.kafka.timestamps=true``) the export keeps the timestamps in the value
    object's sidecar (issue 44: no file of their own) and a time window works on a plain JSON
    archive."""
    records = records_of(JSON_TEXT, KEYS)
    options = {"s3.compression.type": "blockgzip"}
    config = SinkSettings.from_options({"path": str(tmp_path), **options})
    write_task(config, iter(arrow_batches(records)))
    names = sorted(p.name for p in tmp_path.rglob("*t+0+*") if not p.name.endswith(".index.json"))
    assert names == ["t+0+0000000000.json.gz"]
    assert [p.name for p in tmp_path.rglob("t+0+*.json.gz")] == ["t+0+0000000000.json.gz"]
    with open_archive(str(tmp_path)) as archive:
        window = list(archive.records("t", [0], from_time=1_700_000_000_007,
                                      to_time=1_700_000_000_015))  # fmt: skip
    assert [(r.offset, r.timestamp, r.timestamp_type) for _, r in window] == [
        (1, 1_700_000_000_007, 1), (2, 1_700_000_000_014, 0)
    ]  # fmt: skip


def test_an_archive_without_timestamps_files_reads_as_before(tmp_path):
    records = records_of(JSON_TEXT, KEYS)
    config = SinkSettings.from_options({"path": str(tmp_path), "store.kafka.timestamps": "false"})
    write_task(config, iter(arrow_batches(records)))
    assert not list(tmp_path.rglob("*.timestamps.*"))
    with open_archive(str(tmp_path)) as archive:
        got = [r for _, block in archive.record_blocks("t", [0]) for r in block]
    assert [(r.timestamp, r.holds) for r in got] == [(None, frozenset())] * 4


def test_tables_carry_the_timestamp_type(tmp_path):
    records = records_of(JSON_TEXT, KEYS)
    options = {"path": str(tmp_path), "store.kafka.timestamps": "true"}
    write_task(SinkSettings.from_options(options), iter(arrow_batches(records)))
    with open_archive(str(tmp_path)) as archive:
        table = archive.read_arrow("t", 0, start=0, end=4)
    assert table.column("timestampType").to_pylist() == [0, 1, 0, 1]
