"""The sink's batch path (whole Arrow batches of one topic-partition) against the record path.

``write_task`` hands a batch of one topic-partition to ``TopicPartitionWriter.write_values``
when it can; these tests check that what lands is byte for byte what writing the same records
one at a time gives, and that every case the batch path declines still gets the record path's
behaviour (errors naming the record included).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from blockgz.errors import BadRecordError, OffsetOrderError
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.partition_writer import TopicPartitionWriter
from blockgz.sink.write.task import single_partition_run, write_task
from testkit.batches import arrow_batches

T0 = 1_700_000_000_000


def tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def one_at_a_time(root: Path, records: list[KafkaRecord], options: dict[str, str]):
    config = SinkSettings.from_options({"path": str(root), **options})
    store, prefix = config.make_store()
    writers: dict[tuple[str, int], TopicPartitionWriter] = {}
    for record in records:
        tp = (record.topic, record.partition)
        if tp not in writers:
            writers[tp] = TopicPartitionWriter(*tp, config, store, prefix)
        writers[tp].write(record)
    return [f for _, w in sorted(writers.items()) for f in w.close()]


def in_batches(root: Path, records: list[KafkaRecord], options: dict[str, str], sizes: list[int]):
    config = SinkSettings.from_options({"path": str(root), **options})
    return write_task(config, iter(arrow_batches(records, sizes))).files


def json_records(count: int, *, first: int = 0, part: int = 0, seed: int = 1) -> list[KafkaRecord]:
    rng = random.Random(seed)
    offset, out = first, []
    for n in range(count):
        value = b'{"n":%d,"pad":"%s"}' % (n, b"x" * rng.randrange(0, 120))
        key = None if n % 11 == 3 else b"k%d" % n
        headers = [("trace", b"%x" % n), ("flag", None)][: n % 3] if n % 4 else None
        out.append(KafkaRecord("t", part, offset, T0 + n, key, value, headers))
        offset += rng.choice((1, 1, 1, 2, 5))  # compaction gaps and transaction markers
    return out


CASES = {
    "json-blockgzip-flush": {"flush.size": "37", "s3.compression.block.size": "700"},
    "json-blockgzip-records": {"s3.compression.block.records": "5", "flush.size": "50"},
    "json-gzip-bytes": {"s3.compression.type": "gzip", "flush.size.bytes": "2000"},
    "json-none": {"s3.compression.type": "none", "flush.size": "120"},
    "keys-headers-avro": {
        "store.kafka.keys": "true",
        "store.kafka.headers": "true",
        "flush.size": "60",
        "s3.compression.block.size": "700",
    },
    "keys-json-headers-avro": {
        "store.kafka.keys": "true",
        "keys.format.class": "json",
        "store.kafka.headers": "true",
        "flush.size": "70",
        "s3.compression.block.records": "9",
    },
    "keys-headers-json": {
        "store.kafka.keys": "true",
        "keys.format.class": "json",
        "store.kafka.headers": "true",
        "headers.format.class": "json",
        "s3.compression.type": "gzip",
        "flush.size.bytes": "3000",
    },
    "json-pad-delims": {
        "filename.offset.zero.pad.width": "4",
        "file.delim": "-",
        "flush.size": "99",
    },
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_batches_write_what_single_records_write(tmp_path, case):
    options = {"s3.compression.type": "blockgzip", **CASES[case]}
    records = json_records(400)
    sizes = [random.Random(case).randrange(1, 90) for _ in range(30)]
    expected = one_at_a_time(tmp_path / "a", records, options)
    got = in_batches(tmp_path / "b", records, options, sizes)
    assert got == expected
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    assert len(got) > 1
    assert tree(tmp_path / "b") == tree(tmp_path / "a")


@pytest.mark.parametrize("separator", ["\n", "||", "ab"])
def test_bytearray_batches_match_for_any_separator(tmp_path, separator):
    options = {
        "format.class": "bytearray",
        "format.bytearray.separator": separator,
        "s3.compression.type": "blockgzip",
        "s3.compression.block.size": "300",
        "flush.size": "64",
    }
    rng = random.Random(7)
    records = [
        KafkaRecord(
            "t", 3, n, T0, None, bytes(rng.choice(b"xyzab|") for _ in range(rng.randrange(30)))
        )
        for n in range(300)
    ]
    records = [r for r in records if separator.encode() not in r.value]
    expected = one_at_a_time(tmp_path / "a", records, options)
    assert in_batches(tmp_path / "b", records, options, [17, 50, 3, 200]) == expected
    assert tree(tmp_path / "b") == tree(tmp_path / "a")


def test_batches_that_need_changes_take_the_record_path(tmp_path):
    """A multi-line JSON value is re-serialised; null values follow behavior.on.null.values."""
    records = json_records(60)
    records[10].value = b'{"a":\n 1}'
    records[40].value = None
    options = {"behavior.on.null.values": "write", "flush.size": "9"}
    expected = one_at_a_time(tmp_path / "a", records, options)
    assert in_batches(tmp_path / "b", records, options, [20, 20]) == expected
    assert tree(tmp_path / "b") == tree(tmp_path / "a")
    lines = [line for data in tree(tmp_path / "b").values() for line in data.splitlines()]
    assert b'{"a":1}' in lines and b"null" in lines


def test_a_batch_of_several_partitions_is_split_per_partition(tmp_path):
    records = [
        r
        for pair in zip(json_records(50, part=0), json_records(50, part=1), strict=True)
        for r in pair
    ]
    assert single_partition_run(arrow_batches(records, [])[0]) is None
    options = {"flush.size": "10"}
    expected = one_at_a_time(tmp_path / "a", records, options)
    assert in_batches(tmp_path / "b", records, options, [33]) == expected
    assert tree(tmp_path / "b") == tree(tmp_path / "a")


def test_invalid_json_in_a_batch_names_the_record_and_leaves_nothing(tmp_path):
    records = json_records(80)
    records[57].value = b"{not json"
    with pytest.raises(BadRecordError, match=f"t-0@{records[57].offset}: value is not valid JSON"):
        in_batches(tmp_path, records, {"flush.size": "10"}, [30, 30])
    assert tree(tmp_path) == {}


def test_offsets_out_of_order_across_batches_are_refused(tmp_path):
    records = json_records(30)
    records = records[15:] + records[:15]
    with pytest.raises(OffsetOrderError, match="came after"):
        in_batches(tmp_path, records, {}, [15])
    assert tree(tmp_path) == {}


def test_clean_batches_of_one_partition_skip_the_record_path(tmp_path, monkeypatch):
    """The comparisons above are only worth something if the batch path really ran."""

    def refuse(self, record):
        raise AssertionError(f"record path used for offset {record.offset}")

    monkeypatch.setattr(TopicPartitionWriter, "write", refuse)
    files = in_batches(tmp_path, json_records(200), {"flush.size": "64"}, [50, 50, 50])
    assert [f.records for f in files if f.role == "value"] == [64, 64, 64, 8]


def test_rows_that_are_not_kafka_records_need_an_input_reader(tmp_path):
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    from blockgz.errors import ConfigError
    from blockgz.sink.write.datasource import BlockGzStreamWriter

    ranges = StructType(
        [
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("startOffset", LongType()),
            StructField("endOffset", LongType()),
        ]
    )
    with pytest.raises(ConfigError, match=r"missing: value, offset .*blockgz\.input\.reader"):
        BlockGzStreamWriter({"path": str(tmp_path)}, ranges)
    writer = BlockGzStreamWriter(
        {
            "path": str(tmp_path),
            "blockgz.input.reader": "blockgz.sink.kafka.ranges:read_range_rows",
            "blockgz.source.kafka.bootstrap.servers": "127.0.0.1:1",
        },
        ranges,
    )
    assert writer.config.input_options == {"kafka.bootstrap.servers": "127.0.0.1:1"}


def test_keys_and_headers_of_clean_batches_are_laid_out_from_arrow(tmp_path, monkeypatch):
    """No entry is made one record at a time when the columns allow the vectorized form."""
    from blockgz.blocks.avro.container import AvroBlockWriter
    from blockgz.formats.json import json_format

    def refuse(*args, **kwargs):
        raise AssertionError("an entry was made one record at a time")

    monkeypatch.setattr(AvroBlockWriter, "write_many", refuse)
    monkeypatch.setattr(json_format, "text_or_base64", refuse)  # the JSON keys one by one
    options = {**CASES["keys-json-headers-avro"], "s3.compression.type": "blockgzip"}
    files = in_batches(tmp_path, json_records(300), options, [50, 120])
    assert {f.role for f in files} == {"value", "keys", "headers"}  # timestamps: in the sidecar
    assert sum(f.records for f in files if f.role == "headers") == 300


@pytest.mark.parametrize("sizes", [None, [13, 40, 7, 100]], ids=["records", "batches"])
def test_each_file_keeps_the_time_range_of_its_records(tmp_path, sizes):
    """Timestamps out of order within a file: the range is min..max, not first..last."""
    records = json_records(300)
    rng = random.Random(5)
    for r in records:
        r.timestamp_ms = T0 + rng.randrange(0, 10_000)
    records[7].timestamp_ms = None  # a record without a timestamp does not widen the range
    options = {"flush.size": "50"}
    if sizes is None:
        files = one_at_a_time(tmp_path, records, options)
    else:
        files = in_batches(tmp_path, records, options, sizes)
    by_offset = {r.offset: r.timestamp_ms for r in records}
    files = [f for f in files if f.role == "value"]  # the timestamps files keep no range
    assert len(files) == 6
    for f in files:
        stamps = [
            t
            for o, t in by_offset.items()
            if f.first_offset <= o <= f.last_offset and t is not None
        ]
        assert (f.min_timestamp, f.max_timestamp) == (min(stamps), max(stamps))
        assert f.to_dict()["min_timestamp"] == min(stamps)
