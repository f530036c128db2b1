"""``format.class=parquet``: the sink writes Parquet that pyarrow and pandas read as it is, and
the readers seek it by offset from its footer, one row group at a time."""

from __future__ import annotations

import json
from hashlib import sha1
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from blockgz.errors import ConfigError, CorruptBlockError, CorruptIndexError
from blockgz.formats.by_name import FORMATS
from blockgz.formats.parquet.parquet_format import PARQUET_EXTENSIONS
from blockgz.formats.parquet.read import FOOTER_READ, parquet_index
from blockgz.formats.parquet.schema import (
    OFFSET_COLUMN,
    TIMESTAMP_COLUMN,
    arrow_schema,
    value_columns,
)
from blockgz.formats.parquet.writer import ParquetObjectWriter
from blockgz.reader import open_archive
from blockgz.sink.convert.schemas import ValueSchema
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.partition_writer import TopicPartitionWriter
from blockgz.store import LocalStore
from testkit.connect_orders import CONNECT_JSON

T0 = 1_763_800_000_000
CONNECT_SCHEMA = {
    "type": "struct",
    "name": "shop.Order",
    "version": 1,
    "fields": [
        {"field": "id", "type": "int64", "optional": False},
        {"field": "name", "type": "string", "optional": True},
    ],
}
PARQUET = {
    "format.class": "io.confluent.connect.s3.format.parquet.ParquetFormat",
    **CONNECT_JSON,
}


def connect_value(n: int, schema: dict = CONNECT_SCHEMA) -> bytes:
    payload = {"id": n, "name": f"item-{n}" * (n % 3 + 1)}
    if len(schema["fields"]) > 2:
        payload["qty"] = n
    return json.dumps({"schema": schema, "payload": payload}).encode()


def write(tmp_path: Path, offsets, *, schema_of=lambda n: CONNECT_SCHEMA, **options):
    cfg = SinkSettings.from_options({"path": str(tmp_path), **PARQUET, **options})
    store, prefix = cfg.make_store()
    writer = TopicPartitionWriter("t", 0, cfg, store, prefix)
    for n in offsets:
        writer.write(KafkaRecord("t", 0, n, T0 + n, b"k%d" % n, connect_value(n, schema_of(n))))
    return writer.close()


# -- the files as other tools see them ----------------------------------------------------------
def test_the_sink_writes_parquet_that_pyarrow_and_pandas_read_as_it_is(tmp_path):
    files = write(tmp_path, range(50), **{"s3.compression.block.records": "20"})
    assert [f.key for f in files] == ["topics/t/partition=0/t+0+0000000000.snappy.parquet"]
    path = tmp_path / files[0].key
    parquet = pq.ParquetFile(path)
    assert parquet.num_row_groups == 3  # 20 + 20 + 10 rows: cut by s3.compression.block.records
    assert parquet.schema_arrow.names == ["id", "name", OFFSET_COLUMN, TIMESTAMP_COLUMN]
    assert parquet.metadata.row_group(0).column(0).compression == "SNAPPY"
    frame = pd_read(path)
    assert frame["id"].tolist() == list(range(50))
    assert frame[OFFSET_COLUMN].tolist() == list(range(50))
    assert frame[TIMESTAMP_COLUMN].iloc[7].value // 1_000_000 == T0 + 7
    assert (files[0].first_offset, files[0].last_offset, files[0].records) == (0, 49, 50)
    assert (files[0].min_timestamp, files[0].max_timestamp) == (T0, T0 + 49)


def pd_read(path: Path):
    import pandas as pd

    return pd.read_parquet(path)


@pytest.mark.parametrize("codec", sorted(PARQUET_EXTENSIONS))
def test_each_codec_has_confluents_extension_and_reads_back(tmp_path, codec):
    files = write(tmp_path, range(5), **{"parquet.codec": codec})
    assert files[0].key.endswith(f"t+0+0000000000{PARQUET_EXTENSIONS[codec]}")
    table = pq.read_table(tmp_path / files[0].key)
    assert table.column("id").to_pylist() == list(range(5))
    with open_archive(str(tmp_path)) as archive:
        assert [r.value["id"] for r in archive.seek("t", 0, 3)] == [3, 4]


def test_row_groups_are_cut_by_uncompressed_size(tmp_path):
    files = write(tmp_path, range(3000), **{"parquet.block.size": "16KiB"})
    meta = pq.ParquetFile(tmp_path / files[0].key).metadata
    sizes = [meta.row_group(n).num_rows for n in range(meta.num_row_groups)]
    assert len(sizes) > 3 and sum(sizes) == 3000


def test_the_kafka_columns_are_delta_encoded_and_the_values_dictionary_encoded(tmp_path):
    files = write(tmp_path, range(0, 4000, 2))  # a gap between every two offsets
    meta = pq.ParquetFile(tmp_path / files[0].key).metadata
    group = meta.row_group(0)
    encodings = {group.column(n).path_in_schema: group.column(n).encodings for n in range(4)}
    assert "DELTA_BINARY_PACKED" in encodings[OFFSET_COLUMN]
    assert "DELTA_BINARY_PACKED" in encodings[TIMESTAMP_COLUMN]
    assert "RLE_DICTIONARY" in encodings["id"] and "RLE_DICTIONARY" in encodings["name"]
    # 2,000 offsets and times in a few hundred bytes each, where the ids take kilobytes
    assert group.column(2).total_compressed_size < 600 > group.column(3).total_compressed_size
    assert group.column(0).total_compressed_size > 4000
    table = pq.read_table(tmp_path / files[0].key)
    assert table.column(OFFSET_COLUMN).to_pylist() == list(range(0, 4000, 2))
    assert table.column(TIMESTAMP_COLUMN).cast("int64").to_pylist()[-1] == T0 + 3998


def test_the_same_records_give_the_same_bytes(tmp_path):
    one = write(tmp_path / "a", range(100), **{"s3.compression.block.records": "30"})
    two = write(tmp_path / "b", range(100), **{"s3.compression.block.records": "30"})
    assert (tmp_path / "a" / one[0].key).read_bytes() == (tmp_path / "b" / two[0].key).read_bytes()


def test_a_schema_change_rotates_the_file_as_avro_does(tmp_path):
    wider = {
        **CONNECT_SCHEMA,
        "fields": [*CONNECT_SCHEMA["fields"], {"field": "qty", "type": "int32", "optional": True}],
        "version": 2,
    }
    files = write(tmp_path, range(6), schema_of=lambda n: CONNECT_SCHEMA if n < 3 else wider)
    assert [(f.first_offset, f.records) for f in files] == [(0, 3), (3, 3)]
    assert pq.read_schema(tmp_path / files[1].key).names[:3] == ["id", "name", "qty"]


def test_backward_compatibility_keeps_one_file_and_projects(tmp_path):
    wider = {
        **CONNECT_SCHEMA,
        "fields": [*CONNECT_SCHEMA["fields"], {"field": "qty", "type": "int32", "optional": True}],
        "version": 2,
    }
    schemas = [wider, CONNECT_SCHEMA, wider]
    files = write(
        tmp_path, range(3), schema_of=lambda n: schemas[n], **{"schema.compatibility": "BACKWARD"}
    )
    assert len(files) == 1
    assert pq.read_table(tmp_path / files[0].key).column("qty").to_pylist() == [0, None, 2]


# -- config ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"format.class": "parquet", "value.converter": None}, ["needs values with a schema"]),
        ({"s3.compression.type": "gzip"}, ["parquet.codec", "snappy"]),
        ({"parquet.codec": "lzo"}, ["parquet.codec", "brotli"]),
        ({"s3.compression.block.size": "8MiB"}, ["parquet.block.size"]),
        ({"store.kafka.keys": "true", "keys.format.class": "parquet"}, ["keys.format.class"]),
        ({"behavior.on.null.values": "write"}, ["store.kafka.keys=true"]),
    ],
)
def test_bad_settings_are_refused_naming_the_allowed(tmp_path, options, words):
    merged = {"path": str(tmp_path), **PARQUET, **options}
    with pytest.raises(ConfigError) as caught:
        SinkSettings.from_options({k: v for k, v in merged.items() if v is not None})
    for word in words:
        assert word in str(caught.value)


def test_parquet_is_known_by_both_names():
    assert FORMATS.get("parquet") is FORMATS.get(
        "io.confluent.connect.s3.format.parquet.ParquetFormat"
    )


def test_columns_refuse_what_parquet_cannot_hold():
    with pytest.raises(Exception, match="union of 2 non-null types"):
        value_columns(
            {"type": "record", "name": "U", "fields": [{"name": "u", "type": ["int", "string"]}]}
        )
    with pytest.raises(Exception, match="__kafka_offset"):
        value_columns(
            {"type": "record", "name": "U", "fields": [{"name": "__kafka_offset", "type": "int"}]}
        )
    assert arrow_schema(value_columns("bytes")).names[0] == "value"


# -- reading by offset -----------------------------------------------------------------------
def parquet_object(store: LocalStore, key: str, offsets, *, schema="string", pad=0, **kw):
    w = ParquetObjectWriter(store, key, ValueSchema.from_json(schema), **kw)
    for n in offsets:
        w.write(f"v{n}" + ("-" + sha1(b"%d" % n).hexdigest() * pad if pad else ""), n, T0 + n)
    return w.close()


def test_a_seek_reads_the_footer_and_one_row_group(tmp_path):
    store = LocalStore(tmp_path)
    key = "topics/t/partition=0/t+0+0000000000.snappy.parquet"
    done = parquet_object(store, key, range(10_000), block_records=500, pad=4)
    assert done.size > 2 * FOOTER_READ  # the footer read is not the whole object
    with open_archive(str(tmp_path)) as archive:
        archive.store.requests.ranged_gets = archive.store.requests.bytes_read = 0
        got = list(archive.seek("t", 0, 4321, count=3))
        counts = archive.store.requests
    assert [(r.offset, r.value.split("-")[0], r.timestamp) for r in got] == [
        (n, f"v{n}", T0 + n) for n in (4321, 4322, 4323)
    ]
    assert counts.ranged_gets == 2  # the footer, then row group 8
    assert counts.bytes_read < FOOTER_READ + done.size // 10


def test_a_seek_inside_gapped_row_groups_is_exact(tmp_path):
    store = LocalStore(tmp_path)
    offsets = [n * 2 + n // 5 for n in range(2000)]  # gaps of 1 and 2, as a compacted topic
    key = "topics/t/partition=0/t+0+0000000000.parquet"
    parquet_object(store, key, offsets, block_records=128, codec="none")
    index = parquet_index(lambda a, b: store.get_range(key, a, b), store.head(key).size)
    assert index.chunks[1].offset_deltas is not None
    assert [c.record_offsets() for c in index.chunks] == [
        offsets[n : n + 128] for n in range(0, 2000, 128)
    ]
    with open_archive(str(tmp_path)) as archive:
        want = [o for o in offsets if o >= 1001][:300]
        assert [r.offset for r in archive.seek("t", 0, 1001, count=300)] == want


def test_a_time_window_skips_row_groups_by_their_statistics(tmp_path):
    store = LocalStore(tmp_path)
    parquet_object(
        store, "topics/t/partition=0/t+0+0000000000.parquet", range(1000), block_records=100
    )
    with open_archive(str(tmp_path)) as archive:
        blocks = list(archive.seek_blocks("t", 0, 0, times=(T0 + 450, T0 + 520)))
    assert [(b[0].offset, b[-1].offset) for b in blocks] == [(400, 499), (500, 599)]


def test_keys_kept_beside_the_parquet_file_come_back_with_the_values(tmp_path):
    write(tmp_path, range(10), **{"store.kafka.keys": "true", "keys.format.class": "json"})
    with open_archive(str(tmp_path)) as archive:
        got = list(archive.seek("t", 0, 6, count=2))
    assert [(r.offset, r.key, r.value["id"]) for r in got] == [(6, b"k6", 6), (7, b"k7", 7)]


def test_verify_cat_and_ls_know_parquet(tmp_path):
    from blockgz.objects.indexed import IndexedReader

    store = LocalStore(tmp_path)
    key = "topics/t/partition=0/t+0+0000000005.parquet"
    parquet_object(store, key, range(5, 405), block_records=64)
    with IndexedReader.open_object(store, key) as obj:
        report = obj.verify()
        assert (report.ok, report.blocks, report.records) == (True, 7, 400)
        assert [r.offset for r in obj.seek(398)] == [398, 399, 400, 401, 402, 403, 404]
    with open_archive(str(tmp_path)) as archive:
        (row,) = archive.ls("t")
        assert (row.first_offset, row.last_offset, row.records, row.indexed) == (5, 404, 400, True)


def test_a_damaged_object_is_a_clear_error(tmp_path):
    from blockgz.objects.indexed import IndexedReader

    store = LocalStore(tmp_path)
    key = "t+0+0000000000.parquet"
    parquet_object(store, key, range(300), block_records=100, codec="none")
    data = bytearray(store.get(key))
    index = parquet_index(lambda a, b: bytes(data[a:b]), len(data))
    chunk = index.chunks[1]
    data[chunk.byte_offset + 10 : chunk.byte_offset + 40] = b"\xff" * 30
    store.put(key, bytes(data))
    with IndexedReader.open_object(store, key) as obj, pytest.raises(CorruptBlockError):
        list(obj.seek(150))
    store.put(key, bytes(data[:-20]))
    with pytest.raises(CorruptIndexError, match="PAR1"):
        IndexedReader.open_object(store, key)


def test_the_cli_seeks_and_cats_a_parquet_object(tmp_path):
    from click.testing import CliRunner

    from blockgz.cli import main

    store = LocalStore(tmp_path)
    key = "t+0+0000000000.parquet"
    parquet_object(store, key, range(100), block_records=10)
    path = str(tmp_path / key)
    out = CliRunner().invoke(main, ["seek", "--offset", "42", "--count", "2", path])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines() == ['"v42"', '"v43"']
    out = CliRunner().invoke(main, ["cat", "--output", "json", path])
    assert out.exit_code == 0, out.output
    lines = [json.loads(line) for line in out.output.splitlines()]
    assert len(lines) == 100 and lines[99] == {"offset": 99, "value": "v99", "timestamp": T0 + 99}


def test_an_aborted_object_leaves_nothing(tmp_path):
    store = LocalStore(tmp_path)
    w = ParquetObjectWriter(store, "t+0+0000000000.parquet", ValueSchema.from_json("string"))
    for n in range(3000):
        w.write(f"v{n}", n)
    w.abort()
    assert list(store.list("")) == []


def test_without_pyarrow_parquet_is_a_clear_error(monkeypatch):
    import sys

    from blockgz.errors import MissingDependencyError
    from blockgz.formats.parquet.parquet_format import need_pyarrow

    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(MissingDependencyError, match=r"blockgz\[spark\]"):
        need_pyarrow()
