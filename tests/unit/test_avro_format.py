"""Seekable Avro container files: the writer, its index section, the upload and the reader."""

from __future__ import annotations

import datetime as dt
import io
import json
import uuid
from dataclasses import replace
from decimal import Decimal

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blockgz.blocks.avro.block_read import avro_block_values, read_avro_header
from blockgz.blocks.avro.container import (
    AVRO_CODECS,
    AvroBlockWriter,
    avro_sync_marker,
    check_avro_codec,
)
from blockgz.blocks.index import BlockIndex, Chunk
from blockgz.errors import (
    BadRecordError,
    ConfigError,
    CorruptBlockError,
    CorruptIndexError,
    IndexMismatchError,
    MissingDependencyError,
    OffsetNotFoundError,
    OffsetOrderError,
)
from blockgz.formats.avro.upload import AvroUpload
from blockgz.objects.indexed import FileRanges, IndexedReader
from blockgz.store import LocalStore
from blockgz.written.sidecars import data_key_for, sidecar_key
from testkit.ranges import CountingRanges

SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "price", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
}
KEY = "topics/o/partition=0/o+0+0000000000.avro"


def order(n: int) -> dict:
    return {
        "id": n,
        "name": f"item-{n}" * (n % 4 + 1),
        "price": n / 4,
        "note": None if n % 3 else "x",
    }


def gapped_offsets(count: int, start: int = 100) -> list[int]:
    """Offsets with holes of various sizes (as after compaction)."""
    offsets, o = [], start
    for n in range(count):
        offsets.append(o)
        o += 1 if n % 5 else 3 + n % 7
    return offsets


def codec_available(codec: str) -> bool:
    try:
        check_avro_codec(codec)
    except MissingDependencyError:
        return False
    return True


def write_file(
    records, offsets, *, key: str = KEY, schema=SCHEMA, many: bool = True, **options
) -> tuple[bytes, BlockIndex]:
    out = io.BytesIO()
    with AvroBlockWriter(out, schema, sync_marker=avro_sync_marker(key), **options) as writer:
        if many:
            writer.write_many(records, offsets)
        else:
            for record, offset in zip(records, offsets, strict=True):
                writer.write(record, offset)
    return out.getvalue(), writer.index


def stored(tmp_path, data: bytes, index: BlockIndex, key: str = "o+0+0000000000.avro"):
    store = LocalStore(tmp_path)
    store.put(key, data)
    store.put(sidecar_key(key), index.to_json().encode())
    return store, key


# -- round trips ---------------------------------------------------------------------------------
@pytest.mark.parametrize("codec", AVRO_CODECS)
def test_every_codec_round_trips_through_fastavro_and_seek(codec, tmp_path):
    if not codec_available(codec):
        pytest.skip(f"fastavro cannot use {codec} here (its library is not installed)")
    records = [order(n) for n in range(400)]
    offsets = gapped_offsets(400)
    data, index = write_file(records, offsets, codec=codec, block_size=1500)
    assert len(index.chunks) > 5
    assert index.avro is not None and index.avro.codec == codec and index.codec == codec
    assert index.byte_length == len(data)

    reader = fastavro.reader(io.BytesIO(data))  # a plain, valid container file
    assert reader.codec == codec and list(reader) == records

    store, key = stored(tmp_path, data, index)
    with IndexedReader.open_object(store, key) as obj:
        assert [(r.offset, r.value) for r in obj.records()] == list(
            zip(offsets, records, strict=True)
        )
        for target in range(offsets[0], offsets[-1] + 1, 7):
            first = next(n for n, o in enumerate(offsets) if o >= target)
            got = list(obj.seek(target, count=3))
            assert [(r.offset, r.value) for r in got] == list(
                zip(offsets[first : first + 3], records[first : first + 3], strict=True)
            )
        assert obj.verify().ok
    with IndexedReader.open_file(store.path(sidecar_key(key))) as f:  # by its sidecar's name
        assert f.verify().records == 400


def test_write_and_write_many_give_the_same_bytes():
    records, offsets = [order(n) for n in range(300)], gapped_offsets(300)
    for options in ({"block_size": 700}, {"block_size": 10**6, "max_records": 7}, {}):
        one = write_file(records, offsets, many=False, **options)
        many = write_file(records, offsets, **options)
        out = io.BytesIO()
        with AvroBlockWriter(out, SCHEMA, sync_marker=avro_sync_marker(KEY), **options) as w:
            for i in range(0, 300, 13):
                w.write_many(records[i : i + 13], offsets[i : i + 13])
        assert one == many == (out.getvalue(), w.index)


def test_blocks_are_cut_by_uncompressed_size():
    records, offsets = [order(n) for n in range(500)], list(range(500))
    _, index = write_file(records, offsets, codec="deflate", block_size=2000)
    sizes = []
    for record in records:
        one = io.BytesIO()
        fastavro.schemaless_writer(one, SCHEMA, record)
        sizes.append(len(one.getvalue()))
    done = 0
    for chunk in index.chunks:
        block = sizes[done : done + chunk.num_records]
        assert sum(block) == chunk.byte_length_uncompressed
        if chunk is not index.chunks[-1]:
            assert sum(block) >= 2000 > sum(block) - block[-1]  # cut by the record reaching it
        done += chunk.num_records
    assert done == 500
    assert index.byte_length_uncompressed == sum(sizes)


def test_max_records_caps_blocks():
    _, index = write_file([order(n) for n in range(50)], list(range(50)), max_records=8)
    assert [c.num_records for c in index.chunks] == [8] * 6 + [2]


def test_a_record_larger_than_a_block_gets_a_block_of_its_own():
    records = [{"s": "a"}, {"s": "b" * 5000}, {"s": "c"}]
    schema = {"type": "record", "name": "S", "fields": [{"name": "s", "type": "string"}]}
    _, index = write_file(records, [0, 1, 2], schema=schema, block_size=100)
    assert [c.num_records for c in index.chunks] == [2, 1]


def test_counters_follow_the_writes():
    out = io.BytesIO()
    writer = AvroBlockWriter(out, SCHEMA, block_size=500, sync_marker=bytes(16))
    header = writer.bytes_written
    assert header == len(out.getvalue()) and writer.records == 0
    writer.write_many([order(n) for n in range(40)], range(40))
    assert writer.records == 40 and writer.bytes_written == len(out.getvalue()) > header
    index = writer.close()
    assert writer.uncompressed_size == index.byte_length_uncompressed
    assert writer.bytes_written == len(out.getvalue()) == index.byte_length


def test_an_empty_file_is_a_header_and_an_empty_index(tmp_path):
    data, index = write_file([], [])
    assert index.chunks == () and index.byte_length == len(data) == index.avro.header_length
    assert list(fastavro.reader(io.BytesIO(data))) == []
    store, key = stored(tmp_path, data, index)
    with IndexedReader.open_object(store, key) as obj:
        assert list(obj.records()) == [] and obj.verify().ok
        with pytest.raises(OffsetNotFoundError):
            obj.seek(0)


# -- determinism ---------------------------------------------------------------------------------
def test_same_records_same_key_same_bytes_another_key_another_sync():
    records, offsets = [order(n) for n in range(100)], list(range(100))
    a, index_a = write_file(records, offsets, codec="deflate", block_size=800)
    b, index_b = write_file(records, offsets, codec="deflate", block_size=800)
    c, index_c = write_file(records, offsets, codec="deflate", block_size=800, key="other.avro")
    assert a == b and index_a.to_json() == index_b.to_json()
    assert a != c and len(a) == len(c)
    assert (
        index_a.avro.sync
        == avro_sync_marker(KEY)
        != index_c.avro.sync
        == avro_sync_marker("other.avro")
    )
    assert read_avro_header(a).sync == avro_sync_marker(KEY)


# -- schemas ---------------------------------------------------------------------------------------
def test_logical_types_round_trip(tmp_path):
    schema = {
        "type": "record",
        "name": "L",
        "fields": [
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {
                "name": "amount",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2},
            },
            {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        ],
    }
    base = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)
    records = [
        {
            "at": base + dt.timedelta(milliseconds=n * 1001),
            "day": dt.date(2026, 1, 1) + dt.timedelta(days=n),
            "amount": Decimal(n * 7) / 100,
            "id": uuid.UUID(int=n),
        }
        for n in range(60)
    ]
    data, index = write_file(records, range(60), schema=schema, block_size=300, codec="snappy")
    store, key = stored(tmp_path, data, index)
    with IndexedReader.open_object(store, key) as obj:
        assert [r.value for r in obj.seek(31)] == records[31:]
    assert list(fastavro.reader(io.BytesIO(data))) == records


def test_nested_records_arrays_maps_unions_and_named_types(tmp_path):
    schema = {
        "type": "record",
        "name": "Outer",
        "fields": [
            {
                "name": "inner",
                "type": {
                    "type": "record",
                    "name": "Inner",
                    "fields": [{"name": "tags", "type": {"type": "array", "items": "string"}}],
                },
            },
            {"name": "again", "type": ["null", "Inner"]},
            {"name": "counts", "type": {"type": "map", "values": "long"}},
            {
                "name": "choice",
                "type": ["null", "long", "string", {"type": "array", "items": "int"}],
            },
            {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
            {"name": "hash", "type": {"type": "fixed", "name": "H", "size": 4}},
        ],
    }
    choices = [None, 5, "five", [1, 2, 3]]
    records = [
        {
            "inner": {"tags": [f"t{i}" for i in range(n % 5)]},
            "again": None if n % 2 else {"tags": ["x"]},
            "counts": {f"k{i}": i * n for i in range(n % 4)},
            "choice": choices[n % 4],
            "kind": "AB"[n % 2],
            "hash": n.to_bytes(4, "big"),
        }
        for n in range(80)
    ]
    data, index = write_file(records, gapped_offsets(80), schema=schema, block_size=200)
    assert list(fastavro.reader(io.BytesIO(data))) == records
    store, key = stored(tmp_path, data, index)
    with IndexedReader.open_object(store, key) as obj:
        assert [r.value for r in obj.records()] == records


def test_schema_may_be_json_text_or_a_type_name():
    data, index = write_file(["a", "b"], [0, 1], schema='"string"')
    assert list(fastavro.reader(io.BytesIO(data))) == ["a", "b"]
    data, index = write_file([1, 2], [0, 1], schema="long")
    assert index.avro.schema == '"long"'
    assert write_file([order(1)], [0], schema=json.dumps(SCHEMA))[1].avro.schema == json.dumps(
        SCHEMA
    )


# -- seeking reads one range -----------------------------------------------------------------------
def test_a_seek_is_one_ranged_read_of_one_block(tmp_path):
    data, index = write_file([order(n) for n in range(300)], gapped_offsets(300), block_size=600)
    store, key = stored(tmp_path, data, index)
    ranges = CountingRanges(FileRanges(store.path(key)))
    with IndexedReader(ranges, index) as obj:
        for target in (100, 177, index.chunks[3].first_record_offset, index.last_offset):
            ranges.reads.clear()
            assert next(obj.seek(target)).offset >= target
            block = index.locate(target)
            chunk = index.chunks[block]
            assert ranges.reads == [(chunk.byte_offset, chunk.byte_end)]
        ranges.reads.clear()
        assert obj.verify().ok
        assert ranges.reads[0] == (0, index.avro.header_length)  # verify reads the header too
        assert len(ranges.reads) == 1 + len(index.chunks)


# -- corruption ------------------------------------------------------------------------------------
def corrupted(tmp_path, data, index, change):
    buf = bytearray(data)
    change(buf)
    return stored(tmp_path, bytes(buf), index)


def test_a_flipped_byte_in_a_block_is_a_clear_error(tmp_path):
    data, index = write_file(
        [order(n) for n in range(200)], list(range(200)), codec="deflate", block_size=800
    )
    chunk = index.chunks[2]

    def flip(buf):
        for i in range(chunk.byte_offset + 6, chunk.byte_end - 20):
            buf[i] ^= 0x5A

    store, key = corrupted(tmp_path, data, index, flip)
    with IndexedReader.open_object(store, key) as obj:
        with pytest.raises(CorruptBlockError, match="Avro block 2") as exc:
            obj.block_records(2)
        assert exc.value.block == 2 and exc.value.byte_offset == chunk.byte_offset
        report = obj.verify()
        assert report.blocks == len(index.chunks) and len(report.problems) == 1
        assert list(obj.seek(index.chunks[3].first_record_offset, count=1))  # others still read


def test_a_wrong_sync_marker_is_named(tmp_path):
    data, index = write_file([order(n) for n in range(100)], list(range(100)), block_size=500)
    chunk = index.chunks[1]

    def smash(buf):
        buf[chunk.byte_end - 1] ^= 0xFF

    store, key = corrupted(tmp_path, data, index, smash)
    with IndexedReader.open_object(store, key) as obj:
        with pytest.raises(CorruptBlockError, match="sync marker"):
            list(obj.seek(chunk.first_record_offset))
        problems = obj.verify().problems
        assert any("sync marker" in p for p in problems)


def test_another_files_index_is_refused(tmp_path):
    records, offsets = [order(n) for n in range(50)], list(range(50))
    data, _ = write_file(records, offsets, key="one.avro")
    _, index = write_file(records, offsets, key="two.avro")  # same layout, another sync
    store, key = stored(tmp_path, data, index)
    with IndexedReader.open_object(store, key) as obj:
        with pytest.raises(CorruptBlockError, match="sync marker"):
            list(obj.records())
        problems = obj.verify().problems
        assert "header's sync marker differs from the index's" in problems[0]


def test_a_count_or_length_the_block_does_not_hold_is_named():
    data, index = write_file([order(n) for n in range(20)], list(range(20)))
    chunk = index.chunks[0]
    raw = data[chunk.byte_offset : chunk.byte_end]
    wrong_count = Chunk(0, 19, chunk.byte_offset, chunk.byte_length, chunk.byte_length_uncompressed)
    with pytest.raises(CorruptBlockError, match="holds 20 records, the index promises 19"):
        avro_block_values(raw, wrong_count, index.avro)
    wrong_size = Chunk(0, 20, chunk.byte_offset, chunk.byte_length, 5)
    with pytest.raises(CorruptBlockError, match="the index promises 5"):
        avro_block_values(raw, wrong_size, index.avro)
    with pytest.raises(CorruptBlockError, match="truncated"):
        avro_block_values(raw[:-3], chunk, index.avro)


def test_a_truncated_object_is_caught(tmp_path):
    data, index = write_file([order(n) for n in range(100)], list(range(100)), block_size=500)
    store, key = stored(tmp_path, data[:-10], index)
    with pytest.raises(IndexMismatchError, match="truncated"):
        IndexedReader.open_file(store.path(key))
    with IndexedReader.open_object(store, key) as obj:
        with pytest.raises(CorruptBlockError, match="truncated"):
            list(obj.seek(index.last_offset))
        assert any("truncated" in p for p in obj.verify().problems)


def test_a_header_that_disagrees_with_the_index_is_reported(tmp_path):
    data, index = write_file([order(n) for n in range(10)], list(range(10)), codec="deflate")
    other = dict(SCHEMA, name="Other")
    lying = replace(index.avro, schema=json.dumps(other))
    store, key = stored(tmp_path, data, replace(index, avro=lying))
    with IndexedReader.open_object(store, key) as obj:
        assert obj.verify().problems == [
            f"{obj.source}: header's writer schema differs from the index's"
        ]
    with pytest.raises(CorruptBlockError, match="not an Avro"):
        read_avro_header(b"PK\x03\x04" + bytes(40))


# -- the index section -----------------------------------------------------------------------------
def test_the_avro_index_json_shape():
    _, index = write_file([order(n) for n in range(3)], [5, 6, 9], codec="deflate", schema_id=42)
    doc = json.loads(index.to_json())
    assert doc["format"] == "blockgz-index" and doc["version"] == 2
    assert doc["framing"] == {"kind": "avro"} and doc["codec"] == "deflate"
    assert doc["avro"] == {
        "schema": json.dumps(SCHEMA),
        "codec": "deflate",
        "sync": avro_sync_marker(KEY).hex(),
        "header_length": index.avro.header_length,
        "schema_id": 42,
    }
    assert doc["chunks"][0]["byte_offset"] == index.avro.header_length
    assert doc["chunks"][0]["offset_deltas"] == [1, 3]
    assert BlockIndex.from_json(index.to_json()) == index


def test_block_gzip_indexes_are_unchanged():
    index = BlockIndex([Chunk(0, 3, 0, 40, 12)], codec="isal", level=6, block_size=1024)
    assert index.to_json() == (
        '{"format":"blockgz-index","version":1,"codec":"isal","level":6,"block_size":1024,'
        '"framing":{"kind":"separator","separator":"\\n"},"record_count":3,'
        '"first_record_offset":0,"last_record_offset":2,"byte_length":40,'
        '"byte_length_uncompressed":12,"chunks":[{"first_record_offset":0,"num_records":3,'
        '"byte_offset":0,"byte_length":40,"byte_length_uncompressed":12}]}\n'
    )
    deviantart = {
        "chunks": [
            {
                "byte_length_uncompressed": 12,
                "num_records": 3,
                "byte_length": 40,
                "byte_offset": 0,
                "first_record_offset": 10,
            }
        ]
    }
    loaded = BlockIndex.from_json(json.dumps(deviantart))
    assert loaded.avro is None and loaded.byte_length == 40 and loaded.last_offset == 12


def avro_doc(**changes) -> dict:
    _, index = write_file([order(n) for n in range(3)], [0, 1, 2])
    doc = json.loads(index.to_json())
    for key, value in changes.items():
        if key.startswith("avro_"):
            if value is None:
                del doc["avro"][key[5:]]
            else:
                doc["avro"][key[5:]] = value
        else:
            doc[key] = value
    return doc


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"avro": "yes"}, "avro section must be an object"),
        ({"avro_schema": None}, "'schema' must be the writer schema as JSON text"),
        ({"avro_schema": "{not json"}, "'schema' must be the writer schema"),
        ({"avro_codec": "lz4"}, "codec 'lz4' is not known; allowed: null, deflate"),
        ({"codec": "deflate"}, "codec 'deflate' disagrees with the avro section's 'null'"),
        ({"avro_sync": "abcd"}, "'sync' must be 16 bytes as 32 hex digits"),
        ({"avro_sync": "zz" * 16}, "'sync' must be 16 bytes"),
        ({"avro_header_length": 0}, "'header_length' must be a positive integer"),
        ({"avro_header_length": "9"}, "'header_length' must be a positive integer"),
        ({"avro_schema_id": -1}, "'schema_id' must be a non-negative integer"),
        ({"framing": {"kind": "separator", "separator": "\n"}}, "must say framing"),
        ({"avro_header_length": 10}, "chunk 0 starts at byte"),
        ({"avro": None}, "framing is avro but the index has no 'avro' section"),
        ({"version": 4}, "index version 4 is newer"),
    ],
)
def test_bad_avro_sections_are_refused(changes, message):
    with pytest.raises(CorruptIndexError, match=message):
        BlockIndex.from_json(json.dumps(avro_doc(**changes)), source="x.avro.index.json")


def test_sidecar_keys_of_avro_objects():
    assert sidecar_key("t+0+0000000000.avro") == ".t+0+0000000000.avro.index.json"
    assert data_key_for("t+0+0000000000.avro.index.json") == "t+0+0000000000.avro"  # old name
    assert data_key_for(sidecar_key("t+0+0000000000.avro")) == "t+0+0000000000.avro"
    assert data_key_for(sidecar_key("t+0+0000000000.json.gz")) == "t+0+0000000000.json.gz"


# -- the writer's rules ----------------------------------------------------------------------------
def test_offsets_must_increase():
    writer = AvroBlockWriter(io.BytesIO(), SCHEMA, sync_marker=bytes(16))
    writer.write(order(1), 10)
    with pytest.raises(OffsetOrderError, match="got 10 after 10"):
        writer.write(order(2), 10)
    with pytest.raises(OffsetOrderError, match="in a batch starting at 11"):
        writer.write_many([order(3), order(4)], [11, 11])
    with pytest.raises(OffsetOrderError, match="not be negative"):
        AvroBlockWriter(io.BytesIO(), SCHEMA, sync_marker=bytes(16)).write(order(0), -1)
    with pytest.raises(ConfigError, match="2 records but 1 offsets"):
        writer.write_many([order(3), order(4)], [11])
    writer.write_many([order(3), order(4)], [11, 12])
    assert writer.close().chunks[0].record_offsets() == [10, 11, 12]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"codec": "gzip"}, "Avro codec 'gzip' is not known; allowed: null, deflate, snappy"),
        ({"codec": "snappy", "codec_level": 3}, "takes no compression level"),
        ({"codec": "deflate", "codec_level": 11}, "level 11 is out of range; allowed: 0..9"),
        ({"block_size": 0}, "block size must be at least 1"),
        ({"max_records": 0}, "max records per block"),
        ({"sync_marker": b"short"}, "sync marker is 16 bytes"),
        ({"metadata": {"avro.codec": "x"}}, "reserved"),
        ({"metadata": {"k": b"v"}}, "must be text"),
        ({"schema": {"type": "record", "name": "R", "fields": [{"name": "a"}]}}, "not a valid"),
        ({"schema": {"type": "nope"}}, "not a valid Avro schema"),
        ({"schema_id": -2}, "schema id"),
    ],
)
def test_bad_settings_are_config_errors(options, message):
    options = {"schema": SCHEMA, "sync_marker": bytes(16), **options}
    with pytest.raises(ConfigError, match=message):
        AvroBlockWriter(io.BytesIO(), options.pop("schema"), **options)


def test_metadata_goes_into_the_header():
    data, _ = write_file([order(1)], [0], metadata={"blockgz.topic": "o"})
    assert read_avro_header(data).metadata["blockgz.topic"] == "o"


@pytest.mark.parametrize("many", [False, True])
def test_a_bad_record_is_refused_and_the_writer_goes_on(many, tmp_path):
    out = io.BytesIO()
    writer = AvroBlockWriter(out, SCHEMA, block_size=10**6, sync_marker=bytes(16))
    writer.write_many([order(n) for n in range(5)], range(5))
    bad = {"id": 5, "name": "half", "price": "not a number"}  # fails after writing two fields
    with pytest.raises(BadRecordError, match="offset 6: the value does not match the Avro schema"):
        if many:
            writer.write_many([order(5), bad, order(7)], [5, 6, 7])
        else:
            writer.write(bad, 6)
    expected = [order(n) for n in range(5)] + ([order(5)] if many else [])
    assert writer.records == len(expected)
    writer.write(order(9), 9)
    index = writer.close()
    assert [c.num_records for c in index.chunks] == [len(expected), 1]  # cut at the bad record
    assert list(fastavro.reader(io.BytesIO(out.getvalue()))) == [*expected, order(9)]
    store, key = stored(tmp_path, out.getvalue(), index)
    with IndexedReader.open_object(store, key) as obj:
        assert [r.offset for r in obj.records()] == [0, 1, 2, 3, 4, *([5] if many else []), 9]
        assert obj.verify().ok


# -- the upload ------------------------------------------------------------------------------------
def test_upload_writes_data_then_sidecar(tmp_path):
    store = LocalStore(tmp_path)
    out = AvroUpload(store, "a+0+0000000000.avro", SCHEMA, codec="deflate", block_size=500)
    assert out.index_key == ".a+0+0000000000.avro.index.json"
    for n in range(100):
        out.write(order(n), n * 2)
    index = out.close()
    assert out.close() is index and out.uncompressed_size == index.byte_length_uncompressed
    assert out.bytes_written == store.head("a+0+0000000000.avro").size == index.byte_length
    loaded = BlockIndex.from_json(store.get(out.index_key))
    assert loaded == index and loaded.avro.sync == avro_sync_marker("a+0+0000000000.avro")
    with IndexedReader.open_object(store, out.index_key) as obj:
        assert [r.value["id"] for r in obj.seek(101, count=2)] == [51, 52]


def test_upload_without_index_and_abort(tmp_path):
    store = LocalStore(tmp_path)
    with AvroUpload(store, "plain.avro", SCHEMA, indexed=False) as out:
        out.write_many([order(1)], [0])
    assert out.index_key is None and [o.key for o in store.list("")] == ["plain.avro"]
    assert list(fastavro.reader(io.BytesIO(store.get("plain.avro")))) == [order(1)]
    with pytest.raises(RuntimeError), AvroUpload(store, "gone.avro", SCHEMA) as out:
        out.write(order(1), 0)
        raise RuntimeError("boom")
    with pytest.raises(ConfigError):
        AvroUpload(store, "bad.avro", SCHEMA, codec="gzip")
    assert [o.key for o in store.list("")] == ["plain.avro"]


def test_upload_deletes_data_whose_sidecar_fails(tmp_path, monkeypatch):
    store = LocalStore(tmp_path)
    out = AvroUpload(store, "x.avro", SCHEMA)
    out.write(order(1), 0)

    def fail(key, data):
        raise OSError("disk full")

    monkeypatch.setattr(store, "put", fail)
    with pytest.raises(OSError, match="disk full"):
        out.close()
    assert list(store.list("")) == []


# -- property --------------------------------------------------------------------------------------
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    gaps=st.lists(st.integers(1, 6), min_size=1, max_size=120),
    start=st.integers(0, 10**12),
    block_size=st.integers(1, 400),
    max_records=st.one_of(st.none(), st.integers(1, 9)),
    codec=st.sampled_from(["null", "deflate", "snappy"]),
    data=st.data(),
)
def test_seek_returns_exactly_the_records_from_an_offset(
    gaps, start, block_size, max_records, codec, data, tmp_path_factory
):
    offsets = [start]
    for gap in gaps[1:]:
        offsets.append(offsets[-1] + gap)
    records = [order(n) for n in range(len(offsets))]
    blob, index = write_file(
        records, offsets, codec=codec, block_size=block_size, max_records=max_records
    )
    store, key = stored(tmp_path_factory.mktemp("p"), blob, index)
    with IndexedReader.open_object(store, key) as obj:
        for target in data.draw(
            st.lists(st.integers(offsets[0], offsets[-1]), min_size=1, max_size=5)
        ):
            expected = [(o, r) for o, r in zip(offsets, records, strict=True) if o >= target]
            assert [(r.offset, r.value) for r in obj.seek(target)] == expected


def _encoded(records: list[dict]) -> tuple[bytes, list[int]]:
    ends, out = [], io.BytesIO()
    for record in records:
        fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMA), record)
        ends.append(out.tell())
    return out.getvalue(), ends


@settings(max_examples=80, deadline=None)
@given(
    calls=st.lists(
        st.tuples(st.sampled_from(["write", "write_many", "write_encoded"]), st.integers(1, 9)),
        min_size=1,
        max_size=12,
    ),
    block_size=st.integers(1, 300),
    max_records=st.one_of(st.none(), st.integers(1, 7)),
)
def test_encoded_runs_cut_blocks_where_record_writes_do(calls, block_size, max_records):
    """A file written with any mix of the three calls has the bytes and the index of the same
    records written one by one (the batch path and the record path meet in one file)."""
    total = sum(n for _, n in calls)
    records, offsets = [order(n) for n in range(total)], gapped_offsets(total)
    settings_ = {"block_size": block_size, "max_records": max_records}
    expected, expected_index = write_file(records, offsets, **settings_)
    out = io.BytesIO()
    writer = AvroBlockWriter(out, SCHEMA, sync_marker=avro_sync_marker(KEY), **settings_)
    at = 0
    for how, n in calls:
        part, part_offsets = records[at : at + n], offsets[at : at + n]
        if how == "write":
            for record, offset in zip(part, part_offsets, strict=True):
                writer.write(record, offset)
        elif how == "write_many":
            writer.write_many(part, part_offsets)
        else:
            data, ends = _encoded(part)
            writer.write_encoded(data, ends, part_offsets)
        at += n
    assert writer.records == total
    index = writer.close()
    assert out.getvalue() == expected
    assert index.to_json() == expected_index.to_json()


def test_a_bad_record_amid_encoded_runs_is_refused_alone():
    out = io.BytesIO()
    writer = AvroBlockWriter(out, SCHEMA, sync_marker=avro_sync_marker(KEY))
    data, ends = _encoded([order(0)])
    writer.write_encoded(data, ends, [0])
    with pytest.raises(BadRecordError, match="offset 1"):
        writer.write({"id": "not a number"}, 1)
    writer.write(order(2), 2)
    writer.close()
    assert [r["id"] for r in fastavro.reader(io.BytesIO(out.getvalue()))] == [0, 2]
