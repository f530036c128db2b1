"""Parquet row groups read from their columns (:mod:`blockgz.reader.spark.scan_parquet`) give
exactly
the batches the record reader's JSON round trip gives, or are left to it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from blockgz.formats.parquet.writer import ParquetObjectWriter
from blockgz.reader import open_archive
from blockgz.reader.spark import scan_parquet, scan_read
from blockgz.reader.spark.scan_plan import ScanFilter, plan_scan
from blockgz.reader.spark.scan_read import split_batches
from blockgz.sink.convert.schemas import ValueSchema
from blockgz.store import LocalStore

T0 = 1_763_800_000_000
SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "qty", "type": "int"},
        {"name": "item", "type": ["null", "string"], "default": None},
        {"name": "price", "type": "double"},
        {"name": "ratio", "type": "float"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {
            "name": "where",
            "type": {"type": "record", "name": "Where", "fields": [{"name": "x", "type": "long"}]},
        },
    ],
}
#: Spark's types for ``value.schema`` "id BIGINT, qty BIGINT, item STRING, price DOUBLE, ratio
#: DOUBLE, tags ARRAY<STRING>, where STRUCT<x: BIGINT>, absent STRING".
WANTED = pa.struct(
    [
        ("id", pa.int64()),
        ("qty", pa.int64()),
        ("item", pa.string()),
        ("price", pa.float64()),
        ("ratio", pa.float64()),
        ("tags", pa.list_(pa.field("element", pa.string()))),
        ("where", pa.struct([("x", pa.int64())])),
        ("absent", pa.string()),
    ]
)

#: Two of the fields, one nested: the column path decodes only their columns and the Kafka ones.
NARROW = pa.struct([("where", pa.struct([("x", pa.int64())])), ("id", pa.int64())])


def order(n: int) -> dict:
    return {
        "id": n,
        "qty": n % 7,
        "item": None if n % 5 == 0 else f"i{n}",
        "price": n / 4,
        "ratio": 0.5 + n % 3,
        "tags": [f"t{n % 3}"] * (n % 3),
        "where": {"x": -n},
    }


@pytest.fixture(scope="module")
def archive_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("pq")
    store = LocalStore(str(root))
    for start in (0, 300):
        key = f"topics/o/partition=0/o+0+{start:010d}.snappy.parquet"
        writer = ParquetObjectWriter(store, key, ValueSchema.from_json(SCHEMA), block_records=40)
        for n in range(start, start + 300):
            writer.write(order(n), n, T0 + n * 10)
        writer.close()
    return root


def both_paths(root, scan: ScanFilter, value_type) -> tuple[pa.Table, pa.Table, int]:
    """The scan's rows through split_batches and, piece by piece, through the record path;
    and how many pieces the column path took."""
    taken = 0
    fast, slow = [], []
    with open_archive(str(root)) as archive:
        for split in plan_scan(archive, scan, split_bytes=20_000):
            fast += split_batches(archive, split, scan.offsets, value_type=value_type)
            for piece in split.pieces:
                got = scan_parquet.parquet_batches(
                    archive,
                    piece,
                    scan.offsets,
                    value_type,
                    keep=scan_read._filtered,
                    span_bytes=scan_read.SPAN_BYTES,
                )
                taken += got is not None
                slow += scan_read._record_path(archive, piece, scan.offsets, value_type)
    return pa.Table.from_batches(fast), pa.Table.from_batches(slow), taken


@pytest.mark.parametrize(
    "scan",
    [
        ScanFilter(),
        ScanFilter().with_range("offset", low=250, high=377),
        ScanFilter().with_range("offset", points=[0, 299, 300, 599]),
        ScanFilter().with_range("timestamp", low=T0 + 1000, high=T0 + 1500),
    ],
)
@pytest.mark.parametrize(
    "value_type",
    [WANTED, NARROW],
    ids=["every field", "two of them (only their columns decoded)"],
)
def test_row_groups_become_the_same_batches_as_through_json(archive_root, scan, value_type):
    fast, slow, taken = both_paths(archive_root, scan, value_type)
    assert taken > 0  # the columns were read, not the records
    assert fast.num_rows == slow.num_rows > 0
    assert fast.schema == slow.schema
    assert fast.to_pylist() == slow.to_pylist()


def test_the_batches_hold_the_kafka_columns(archive_root):
    fast, _, _ = both_paths(archive_root, ScanFilter().with_range("offset", low=5, high=6), WANTED)
    row = fast.to_pylist()[0]
    assert (row["offset"], row["topic"], row["partition"], row["key"]) == (5, "o", 0, None)
    assert row["timestamp"].timestamp() * 1000 == T0 + 50
    assert row["value"] == {**order(5), "qty": 5, "ratio": 2.5, "absent": None}


@pytest.mark.parametrize(
    "value_type",
    [
        None,  # values as JSON bytes: the record reader's text
        pa.struct([("id", pa.string())]),  # a long as text: what JSON parsing makes of it
        pa.struct([("qty", pa.int16())]),  # narrowing could change a value
        pa.struct([("where", pa.struct([("y", pa.int64())]))]),  # another shape
    ],
)
def test_what_the_columns_cannot_give_exactly_goes_through_the_records(archive_root, value_type):
    with open_archive(str(archive_root)) as archive:
        (split,) = plan_scan(archive, ScanFilter().with_range("offset", high=3))
        got = scan_parquet.parquet_batches(
            archive, split.pieces[0], ScanFilter().offsets, value_type, keep=None, span_bytes=1
        )
    assert got is None


def test_widening_is_only_what_keeps_every_value():
    assert scan_parquet._widens(pa.int32(), pa.int64())
    assert scan_parquet._widens(pa.uint32(), pa.int64())
    assert not scan_parquet._widens(pa.uint64(), pa.int64())
    assert not scan_parquet._widens(pa.int64(), pa.int32())
    assert not scan_parquet._widens(pa.int8(), pa.uint16())
    assert scan_parquet._widens(pa.float32(), pa.float64())
    assert not scan_parquet._widens(pa.float64(), pa.float32())


@pytest.mark.parametrize("gap", [0, 1 << 20], ids=["each column chunk apart", "merged"])
def test_only_the_wanted_column_chunks_are_fetched(archive_root, monkeypatch, gap):
    monkeypatch.setattr(scan_parquet, "COLUMN_GAP", gap)
    fetched: list[tuple[int, int]] = []
    rows, slow = [], []
    whole = 0
    with open_archive(str(archive_root)) as archive:
        real = archive.store.get_range

        def counted(key, start, end):
            fetched.append((start, end))
            return real(key, start, end)

        for split in plan_scan(archive, ScanFilter()):
            for piece in split.pieces:
                whole += sum(c.byte_length for _, c in piece.chunks)
                monkeypatch.setattr(archive.store, "get_range", counted)
                got = scan_parquet.parquet_batches(
                    archive, piece, ScanFilter().offsets, NARROW, keep=scan_read._filtered,
                    span_bytes=scan_read.SPAN_BYTES,
                )  # fmt: skip
                rows += got
                monkeypatch.setattr(archive.store, "get_range", real)
                slow += scan_read._record_path(archive, piece, ScanFilter().offsets, NARROW)
    assert pa.Table.from_batches(rows).to_pylist() == pa.Table.from_batches(slow).to_pylist()
    assert len(pa.Table.from_batches(rows)) == 600
    got_bytes = sum(end - start for start, end in fetched)
    if gap == 0:
        # id, where.x, the offsets and the timestamps: 4 of 9 leaf columns, in 2 ranges per
        # row group (id; where.x to the timestamps), and a row group's last range touches the
        # next one's first: 9 requests for each object's 8 row groups
        assert len(fetched) == 2 * 9
        assert got_bytes < whole * 0.6
    else:
        # the skipped columns are shorter than the gap: one request per object, as before
        assert (len(fetched), got_bytes) == (2, whole)
