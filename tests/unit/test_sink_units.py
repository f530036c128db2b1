"""The sink's write path without Spark: config, encoding, rotation, naming, commit, resume.

Everything here runs against a local directory store; the same code runs inside Spark tasks
(tests/test_export.py covers that end to end on Tansu, moto and Spark).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from blockgz.blocks.index import BlockIndex
from blockgz.errors import BadRecordError, ConfigError, OffsetOrderError
from blockgz.sink.jobconfig.config import ExportSettings, load_config_file, parse_properties
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.commit import TaskCommitMessage, write_manifest
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.partition_writer import TopicPartitionWriter
from blockgz.sink.write.rotation import next_scheduled_rotation

T0 = 1_763_800_000_000  # 2025-11-22T08:26:40Z, in ms


def rec(offset: int, value: bytes | None = None, *, ts: int | None = None, key=None, part=0):
    if value is None and ts is None:
        value = b'{"n": %d}' % offset
    return KafkaRecord("t", part, offset, T0 + offset if ts is None else ts, key, value)


def make(tmp_path: Path, **options):
    """A sink config; these tests are about the value files, so the timestamps files written
    beside them by default are left out (tests/unit/test_restore_bytes.py has theirs)."""
    cfg = SinkSettings.from_options(
        {"path": str(tmp_path), "store.kafka.timestamps": "false", **options}
    )
    store, prefix = cfg.make_store()
    return cfg, store, prefix


def write_all(tmp_path: Path, records, **options):
    cfg, store, prefix = make(tmp_path, **options)
    writer = TopicPartitionWriter("t", 0, cfg, store, prefix)
    for r in records:
        writer.write(r)
    return writer.close(), store


def read_lines(tmp_path: Path, key: str) -> list[bytes]:
    data = (tmp_path / key).read_bytes()
    if key.endswith(".gz"):
        data = gzip.decompress(data)
    return data.splitlines()


# -- config ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"s3.compression.type": "lz4"}, ["s3.compression.type", "none, gzip, blockgzip"]),
        ({"format.class": "orc"}, ["format.class", "json", "bytearray", "parquet"]),
        ({"format.class": "parquet"}, ["format.class=parquet", "AvroConverter"]),
        ({"format.class": "avro"}, ["format.class=avro", "AvroConverter", "value.converter"]),
        ({"format.class": "avro", "value.converter": "avro"}, ["schema.registry.url"]),
        ({"value.converter": "Protobuf"}, ["value.converter", "JsonConverter"]),
        ({"schema.compatibility": "SOME"}, ["BACKWARD", "FULL"]),
        ({"avro.codec": "lz4"}, ["snappy", "zstandard"]),
        ({"behavior.on.null.values": "drop"}, ["behavior.on.null.values", "fail, ignore, write"]),
        ({"flush.size": "-3"}, ["flush.size", "1 or more"]),
        ({"flush.size": "0"}, ["flush.size", "1 or more", "leave it out for no limit"]),
        ({"timezone": "Mars/Base"}, ["timezone", "IANA name", "PST"]),
        ({"flush.size": "three"}, ["flush.size", "whole number"]),
        ({"s3.compression.level": "23"}, ["s3.compression.level", "-1..22"]),
        ({"s3.compression.level": "12"}, ["s3.compression.level=12", "allowed: 0-9"]),
        (
            {"s3.compression.type": "blockzstd", "s3.compression.level": "0"},
            ["s3.compression.level=0", "1-22"],
        ),
        ({"rotate.schedule.interval.ms": "60000"}, ["timezone"]),
        ({"s3.compression.block.size": "1MiB"}, ["blockgzip"]),
        ({"format.json.envelope": "yes"}, ["format.json.envelope", "true, false"]),
        ({"flush.size.bytes": "lots"}, ["flush.size.bytes", "MiB"]),
    ],
)
def test_bad_config_names_the_key_and_allowed_values(tmp_path, options, words):
    with pytest.raises(ConfigError) as info:
        SinkSettings.from_options({"path": str(tmp_path), **options})
    for word in words:
        assert word in str(info.value)


def test_a_target_is_required():
    with pytest.raises(ConfigError, match=r"s3\.bucket\.name is required"):
        SinkSettings.from_options({"flush.size": "3"})


def test_confluent_class_names_and_extensions(tmp_path):
    cases = {
        ("io.confluent.connect.s3.format.json.JsonFormat", "none"): ".json",
        ("json", "gzip"): ".json.gz",
        ("json", "blockgzip"): ".json.gz",
        ("io.confluent.connect.s3.format.bytearray.ByteArrayFormat", "none"): ".bin",
        ("bytearray", "gzip"): ".bin.gz",
    }
    for (fmt, comp), ext in cases.items():
        cfg = SinkSettings.from_options(
            {"path": str(tmp_path), "format.class": fmt, "s3.compression.type": comp}
        )
        assert cfg.extension == ext
    cfg = SinkSettings.from_options(
        {"path": str(tmp_path), "format.class": "bytearray", "format.bytearray.extension": ".dat"}
    )
    assert cfg.extension == ".dat"


# -- naming and rotation --------------------------------------------------------------------
def test_quickstart_keys_match_confluent(tmp_path):
    files, _ = write_all(tmp_path, [rec(n) for n in range(9)], **{"flush.size": "3"})
    assert [f.key for f in files] == [
        "topics/t/partition=0/t+0+0000000000.json",
        "topics/t/partition=0/t+0+0000000003.json",
        "topics/t/partition=0/t+0+0000000006.json",
    ]
    assert [(f.first_offset, f.last_offset, f.records) for f in files] == [
        (0, 2, 3),
        (3, 5, 3),
        (6, 8, 3),
    ]
    assert read_lines(tmp_path, files[1].key) == [b'{"n": 3}', b'{"n": 4}', b'{"n": 5}']


def test_naming_options(tmp_path):
    files, _ = write_all(
        tmp_path,
        [rec(5)],
        **{
            "topics.dir": "",
            "file.delim": "_",
            "filename.offset.zero.pad.width": "4",
        },
    )
    assert files[0].key == "t/partition=0/t_0_0005.json"
    files, _ = write_all(tmp_path / "x", [rec(5)], **{"topics.dir": "exports/topics/"})
    assert files[0].key == "exports/topics/t/partition=0/t+0+0000000005.json"


def test_offsets_past_the_pad_width_still_name_the_file(tmp_path):
    files, _ = write_all(tmp_path, [rec(12_345_678_901)])
    assert files[0].key.endswith("t+0+12345678901.json")


def test_size_in_bytes_rotation(tmp_path):
    records = [rec(n, b'{"pad": "%s"}' % (b"x" * 90)) for n in range(10)]
    files, _ = write_all(tmp_path, records, **{"flush.size.bytes": "250"})
    assert [f.records for f in files] == [3, 3, 3, 1]
    assert all(f.uncompressed_size >= 250 for f in files[:-1])


def test_rotate_interval_uses_record_time(tmp_path):
    stamps = [0, 10, 59_999, 60_000, 60_001, 200_000]
    records = [rec(n, ts=T0 + s) for n, s in enumerate(stamps)]
    for r, n in zip(records, range(6), strict=True):
        r.value = b'{"n": %d}' % n
    files, _ = write_all(tmp_path, records, **{"rotate.interval.ms": "60000"})
    assert [(f.first_offset, f.records) for f in files] == [(0, 3), (3, 2), (5, 1)]


def test_scheduled_rotation_follows_the_wall_clock(tmp_path):
    cfg, store, prefix = make(
        tmp_path, **{"rotate.schedule.interval.ms": "60000", "timezone": "UTC"}
    )
    now = [1000.0]
    writer = TopicPartitionWriter("t", 0, cfg, store, prefix, clock=lambda: now[0])
    writer.write(rec(0))
    writer.write(rec(1))
    now[0] = 1060.5  # past the minute boundary at 1020 s
    writer.write(rec(2))
    assert [(f.first_offset, f.records) for f in writer.close()] == [(0, 2), (2, 1)]


def test_next_scheduled_rotation_is_aligned_to_local_midnight():
    hour = 3_600_000
    # 2026-11-22 10:30 in Berlin (UTC+1) is 09:30 UTC; the next 4 h mark is 12:00 Berlin.
    now = 1_795_339_800_000
    nxt = next_scheduled_rotation(now, 4 * hour, "Europe/Berlin")
    assert nxt - now == 90 * 60_000


def test_out_of_order_offsets_are_refused(tmp_path):
    cfg, store, prefix = make(tmp_path)
    writer = TopicPartitionWriter("t", 0, cfg, store, prefix)
    writer.write(rec(5))
    with pytest.raises(OffsetOrderError, match=r"t-0@5: offset 5 came after 5"):
        writer.write(rec(5))


# -- nulls ----------------------------------------------------------------------------------
def tombstone(offset: int) -> KafkaRecord:
    return KafkaRecord("t", 0, offset, T0, b"k", None)


def test_null_values_fail_by_default_naming_the_record(tmp_path):
    cfg, store, prefix = make(tmp_path)
    writer = TopicPartitionWriter("t", 0, cfg, store, prefix)
    with pytest.raises(BadRecordError, match=r"t-0@3: .*behavior\.on\.null\.values"):
        writer.write(tombstone(3))


def test_null_values_ignored(tmp_path):
    files, _ = write_all(
        tmp_path, [rec(0), tombstone(1), rec(2)], **{"behavior.on.null.values": "ignore"}
    )
    assert [(f.first_offset, f.last_offset, f.records) for f in files] == [(0, 2, 2)]


def test_null_values_written_to_the_tombstone_partition(tmp_path):
    files, _ = write_all(
        tmp_path, [rec(0), tombstone(1), rec(2)], **{"behavior.on.null.values": "write"}
    )
    keys = sorted(f.key for f in files)
    assert keys == [
        "topics/t/partition=0/t+0+0000000000.json",
        "topics/t/tombstone/t+0+0000000001.json",
    ]
    assert read_lines(tmp_path, keys[1]) == [b"null"]


# -- formats --------------------------------------------------------------------------------
def test_non_json_values_are_refused_with_the_offset(tmp_path):
    cfg, store, prefix = make(tmp_path)
    writer = TopicPartitionWriter("t", 0, cfg, store, prefix)
    with pytest.raises(BadRecordError, match=r"t-0@7: value is not valid JSON"):
        writer.write(rec(7, b"not json"))
    writer.abort()
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_multi_line_json_is_written_on_one_line(tmp_path):
    files, _ = write_all(tmp_path, [rec(0, b'{\n  "a": [1,\n 2]\n}')])
    assert read_lines(tmp_path, files[0].key) == [b'{"a":[1,2]}']


def test_connect_schema_envelope_is_unwrapped(tmp_path):
    value = b'{"schema": {"type": "struct"}, "payload": {"f1": "value1"}}'
    files, _ = write_all(tmp_path, [rec(0, value)], **{"value.converter.schemas.enable": "true"})
    assert read_lines(tmp_path, files[0].key) == [b'{"f1":"value1"}']


def test_json_envelope_keeps_key_and_metadata(tmp_path):
    r = KafkaRecord("t", 0, 4, T0, b"\xff\x00", b'{"a": 1}', [("h", b"v")])
    files, _ = write_all(tmp_path, [r], **{"format.json.envelope": "true"})
    (line,) = read_lines(tmp_path, files[0].key)
    assert json.loads(line) == {
        "topic": "t",
        "partition": 0,
        "offset": 4,
        "timestamp": T0,
        "key": {"base64": "/wA="},
        "headers": [["h", "v"]],
        "value": {"a": 1},
    }


def test_bytearray_with_custom_separator(tmp_path):
    records = [rec(n, b"bin\n%d" % n) for n in range(3)]
    files, _ = write_all(
        tmp_path,
        records,
        **{"format.class": "bytearray", "format.bytearray.separator": "\\u0000"},
    )
    assert files[0].key.endswith("t+0+0000000000.bin")
    assert (tmp_path / files[0].key).read_bytes() == b"bin\n0\x00bin\n1\x00bin\n2\x00"


def test_bytearray_value_holding_the_separator_is_refused(tmp_path):
    cfg, store, prefix = make(tmp_path, **{"format.class": "bytearray"})
    writer = TopicPartitionWriter("t", 0, cfg, store, prefix)
    with pytest.raises(BadRecordError, match=r"t-0@1: value contains the record separator"):
        writer.write(rec(1, b"two\nlines"))


@pytest.mark.parametrize("compression", ["gzip", "blockgzip"])
def test_compressed_objects_are_valid_gzip_and_deterministic(tmp_path, compression):
    records = [rec(n, b'{"n": %d, "pad": "%s"}' % (n, b"y" * (n % 50))) for n in range(5000)]
    options = {"s3.compression.type": compression, "flush.size": "2000"}
    if compression == "blockgzip":
        options["s3.compression.block.size"] = "16KiB"
    first, _ = write_all(tmp_path / "a", records, **options)
    second, _ = write_all(tmp_path / "b", records, **options)
    assert [f.key for f in first] == [f.key for f in second]
    for f in first:
        assert (tmp_path / "a" / f.key).read_bytes() == (tmp_path / "b" / f.key).read_bytes()
        lines = read_lines(tmp_path / "a", f.key)
        assert lines == [r.value for r in records[f.first_offset : f.last_offset + 1]]
    if compression == "blockgzip":
        index = BlockIndex.from_json((tmp_path / "a" / first[0].index_key).read_text())
        assert index.record_count == 2000 and len(index.chunks) > 1
    else:
        assert all(f.index_key is None for f in first)


def test_abort_removes_finished_and_open_files(tmp_path):
    cfg, store, prefix = make(tmp_path, **{"flush.size": "2", "s3.compression.type": "blockgzip"})
    writer = TopicPartitionWriter("t", 0, cfg, store, prefix)
    for n in range(5):
        writer.write(rec(n))
    assert len(writer.written) == 2
    writer.abort()
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


# -- commit and resume ----------------------------------------------------------------------
def test_manifest_is_idempotent_and_resume_uses_the_highest_offsets(tmp_path):
    cfg, store, prefix = make(tmp_path, **{"flush.size": "3"})
    files, _ = write_all(tmp_path, [rec(n) for n in range(6)], **{"flush.size": "3"})
    msg = TaskCommitMessage(files=files, next_offsets={"t": {0: 6}})
    key = write_manifest(cfg.manifest_log(store, prefix), 0, [msg, None])
    before = (tmp_path / key).read_bytes()
    assert write_manifest(cfg.manifest_log(store, prefix), 0, [msg, None]) == key
    assert (tmp_path / key).read_bytes() == before
    write_manifest(
        cfg.manifest_log(store, prefix), 1, [TaskCommitMessage(next_offsets={"t": {0: 9, 1: 2}})]
    )
    assert cfg.manifest_log(store, prefix).committed_offsets() == {"t": {0: 9, 1: 2}}
    assert [f.key for f in cfg.manifest_log(store, prefix).committed_files()] == [
        f.key for f in files
    ]


def test_epochs_keep_the_manifests_of_two_checkpoints_apart(tmp_path):
    a = SinkSettings.from_options({"path": str(tmp_path), "blockgz.epoch": "20261122T0000Z"})
    b = SinkSettings.from_options({"path": str(tmp_path), "blockgz.epoch": "20261123T0000Z"})
    store, prefix = a.make_store()
    ka = write_manifest(
        a.manifest_log(store, prefix), 0, [TaskCommitMessage(next_offsets={"t": {0: 5}})]
    )
    kb = write_manifest(
        b.manifest_log(store, prefix), 0, [TaskCommitMessage(next_offsets={"t": {0: 9}})]
    )
    assert ka != kb
    assert a.manifest_log(store, prefix).committed_offsets() == {"t": {0: 9}}


@pytest.mark.parametrize("partition_directories", [False, True])
def test_remove_uncommitted_deletes_only_objects_past_the_committed_offset(
    tmp_path, partition_directories
):
    files, store = write_all(
        tmp_path,
        [rec(n) for n in range(9)],
        **{"flush.size": "3", "s3.compression.type": "blockgzip"},
    )
    cfg, _, prefix = make(tmp_path)
    log = cfg.manifest_log(store, prefix)
    removed = log.remove_uncommitted({"t": {0: 3}}, partition_directories=partition_directories)
    assert sorted(removed) == sorted(
        k for f in files[1:] for k in (f.key, f.index_key) if k is not None
    )
    assert (tmp_path / files[0].key).exists() and (tmp_path / files[0].index_key).exists()
    assert cfg.manifest_log(store, prefix).remove_uncommitted({"other": {0: 0}}) == []


# -- the job's config file ------------------------------------------------------------------
QUICKSTART = """\
name=s3-sink
topics=s3_topic
kafka.bootstrap.servers=127.0.0.1:9092
s3.bucket.name=quickstart
store.url=http://127.0.0.1:9000
format.class=io.confluent.connect.s3.format.json.JsonFormat
partitioner.class=io.confluent.connect.storage.partitioner.DefaultPartitioner
flush.size=3
"""


def test_quickstart_properties_load(tmp_path):
    path = tmp_path / "s3-sink.properties"
    path.write_text(QUICKSTART)
    job = ExportSettings.from_file(path)
    assert job.name == "s3-sink"
    assert job.source_options == {
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "subscribe": "s3_topic",
        "startingOffsets": "earliest",
        "kafka.isolation.level": "read_committed",  # an archive holds committed records only
    }
    assert job.sink.target_url == "s3://quickstart"
    assert job.sink.flush_size == 3
    assert job.sink.target.s3.endpoint_url == "http://127.0.0.1:9000"


def test_connect_json_config_loads(tmp_path):
    path = tmp_path / "c.json"
    props = parse_properties(QUICKSTART)
    path.write_text(json.dumps({"name": "from-json", "config": {**props, "name": "from-json"}}))
    assert load_config_file(path)["flush.size"] == "3"
    job = ExportSettings.from_file(path, {"flush.size": "10", "startingOffsets": "s3"})
    assert job.name == "from-json" and job.sink.flush_size == 10
    assert job.source_options["startingOffsets"] == "s3"


@pytest.mark.parametrize(
    ("remove", "add", "words"),
    [
        ("topics", {}, ["exactly one of", "topics"]),
        ("", {"topics.regex": "s3_.*"}, ["exactly one of"]),
        ("kafka.bootstrap.servers", {}, ["kafka.bootstrap.servers is required"]),
        ("", {"s3.compression.type": "brotli"}, ["s3.compression.type", "allowed"]),
    ],
)
def test_job_config_errors(remove, add, words):
    props = parse_properties(QUICKSTART)
    props.pop(remove, None)
    props.update(add)
    with pytest.raises(ConfigError) as info:
        ExportSettings.from_mapping(props)
    for word in words:
        assert word in str(info.value)


def test_confluent_configs_keep_working_as_pasted(tmp_path):
    path = tmp_path / "pasted.properties"
    path.write_text(
        QUICKSTART
        + "connector.class=io.confluent.connect.s3.S3SinkConnector\ntasks.max=4\n"
        + "key.converter=org.apache.kafka.connect.storage.StringConverter\n"
        + "transforms=unwrap\ntransforms.unwrap.type=io.debezium.transforms.ExtractNewRecordState\n"
        + "partitioner.class=io.confluent.connect.storage.partitioner.DailyPartitioner\n"
        + "locale=en-US\ntimezone=PST\ntimestamp.extractor=Record\n"
    )
    job = ExportSettings.from_file(path)
    assert job.sink.partitioning.timezone == "PST"
    record = KafkaRecord("t", 0, 0, 1_795_305_600_000, None, b"{}")  # 2026-11-22T00:00Z
    assert job.sink.partitioner().encode_partition(record) == "year=2026/month=11/day=21"


# -- partitioner.max.open.files, rotate.file.on.partition.change, schema affix --------------
def country_records(countries: str) -> list[KafkaRecord]:
    return [rec(n, json.dumps({"country": c, "n": n}).encode()) for n, c in enumerate(countries)]


FIELD = {"partitioner.class": "field", "partition.field.name": "country"}


def test_max_open_files_commits_the_oldest_file_first(tmp_path):
    files, _ = write_all(
        tmp_path, country_records("ABCAD"), **FIELD, **{"partitioner.max.open.files": "2"}
    )
    # A, B open; C commits A (oldest); A reopens and commits B; D commits C.
    assert [(f.encoded_partition, f.first_offset, f.records) for f in files] == [
        ("country=A", 0, 1),
        ("country=B", 1, 1),
        ("country=C", 2, 1),
        ("country=A", 3, 1),
        ("country=D", 4, 1),
    ]


def test_partition_change_with_rotate_interval_commits_all_open_files(tmp_path):
    options = {**FIELD, "rotate.interval.ms": "3600000"}
    files, _ = write_all(tmp_path / "on", country_records("AABBA"), **options)
    assert [(f.encoded_partition, f.records) for f in files] == [
        ("country=A", 2),
        ("country=B", 2),
        ("country=A", 1),
    ]
    files, _ = write_all(
        tmp_path / "off",
        country_records("AABBA"),
        **options,
        **{"rotate.file.on.partition.change": "false"},
    )
    assert sorted((f.encoded_partition, f.records) for f in files) == [
        ("country=A", 3),
        ("country=B", 2),
    ]


def test_schema_name_affix_in_the_path(tmp_path):
    records = [KafkaRecord("t", 0, n, T0, None, b"v%d" % n) for n in range(2)]
    for affix, expected in (
        ("PREFIX", "topics/t/schema_name=string/partition=0/t+0+0000000000.avro"),
        ("SUFFIX", "topics/t/partition=0/schema_name=string/t+0+0000000000.avro"),
    ):
        files, _ = write_all(
            tmp_path / affix,
            records,
            **{
                "format.class": "avro",
                "value.converter": "string",
                "s3.schema.partition.affix.type": affix,
            },
        )
        assert [f.key for f in files] == [expected]
    with pytest.raises(ConfigError, match="values need a schema"):
        SinkSettings.from_options(
            {"path": str(tmp_path), "s3.schema.partition.affix.type": "PREFIX"}
        )


@pytest.mark.parametrize(
    ("add", "headers"),
    [
        ({}, None),
        ({"format.json.envelope": "true"}, "true"),
        ({"store.kafka.headers": "true"}, "true"),
        ({"format.json.envelope": "true", "includeHeaders": "false"}, "false"),  # said so
    ],
)
def test_the_json_envelope_reads_headers_from_kafka(add, headers):
    """The envelope exists to keep key, headers and timestamp: the job asks Spark's Kafka
    source for headers without includeHeaders=true also being set."""
    props = parse_properties(QUICKSTART)
    props.update(add)
    assert ExportSettings.from_mapping(props).source_options.get("includeHeaders") == headers
