"""One loaded ``format("blockgz")`` DataFrame queried again and again: every query gets the
rows of its own conditions, whatever an earlier query on it pushed down.

Spark 4.3 keeps a Python data source's pushed-down read plan on the DataFrame and reused it
for a later query without a pushable condition (20,158 of 200,000 rows, exit code 0); see
:mod:`blockgz.reader.spark.plan_guard`. Each archive format the reader handles is checked:
block-GZIP JSON, Avro and Parquet.
"""

from __future__ import annotations

import datetime as dt

import pytest

from testkit.archives import write_once
from testkit.connect_orders import CONNECT_JSON, orders, timestamp_of

RECORDS = 1000
FORMATS = {
    "json": {"s3.compression.type": "blockgzip"},
    "avro": {"format.class": "avro", **CONNECT_JSON},
    "parquet": {"format.class": "parquet", **CONNECT_JSON},
}


@pytest.fixture(scope="module")
def archives(tmp_path_factory) -> dict[str, str]:
    """An archive per format: 1000 records a second apart, 2 objects of 20 blocks each."""
    root = tmp_path_factory.mktemp("requery")
    records = orders(RECORDS)
    paths = {}
    for name, options in FORMATS.items():
        paths[name] = str(root / name)
        sink = {"s3.compression.block.records": "50", "flush.size": "500", **options}
        write_once(records, {"path": paths[name], **sink})
    return paths


def since(seconds: int) -> str:
    """``timestamp >= `` the record ``seconds`` after the first."""
    return f"timestamp >= '{timestamp_of(seconds).isoformat()}'"


#: Avro and Parquet go through the record reader, several seconds a query on 2 cores.
SLOW_FORMATS = [pytest.param(f, marks=pytest.mark.slow) if f != "json" else f for f in FORMATS]


@pytest.mark.parametrize("fmt", SLOW_FORMATS)
def test_each_query_on_one_dataframe_reads_by_its_own_conditions(spark, archives, fmt):
    frame = spark.read.format("blockgz").option("blockgz.split.size", "2000").load(archives[fmt])
    offsets = [  # (condition or None, offsets it allows), in the order the queries run
        (since(500), range(500, RECORDS)),
        (None, range(RECORDS)),
        ("offset < 100", range(100)),
        (None, range(RECORDS)),
        ("offset >= 900", range(900, RECORDS)),
        ("offset BETWEEN 250 AND 259", range(250, 260)),
        (since(990), range(990, RECORDS)),
    ]
    for condition, wanted in offsets:
        query = frame if condition is None else frame.where(condition)
        got = sorted(r.offset for r in query.select("offset").collect())
        assert got == list(wanted), (fmt, condition, len(got))
    assert frame.count() == RECORDS


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_two_scans_of_one_dataframe_in_one_query_each_keep_their_rows(spark, archives, fmt):
    frame = spark.read.format("blockgz").load(archives[fmt])
    both = frame.where("offset < 10").union(frame.where("offset >= 990")).select("offset")
    assert sorted(r.offset for r in both.collect()) == [*range(10), *range(990, RECORDS)]
    assert frame.where("offset < 10").join(frame, "offset").count() == 10


def test_a_filtered_query_after_a_full_one_still_prunes(spark, archives):
    frame = spark.read.format("blockgz").option("blockgz.split.size", "2000").load(archives["json"])
    assert frame.count() == RECORDS
    everything = frame.rdd.getNumPartitions()
    narrow = frame.where("offset BETWEEN 250 AND 259")
    assert narrow.rdd.getNumPartitions() == 1 < everything
    assert narrow.count() == 10
    assert frame.rdd.getNumPartitions() == everything


def test_parquet_columns_read_into_the_declared_struct(spark, archives):
    """The Parquet row groups go to Spark as columns (blockgz.reader.spark.scan_parquet): Spark
    takes the batches, and they hold the records' fields, offsets and timestamps."""
    frame = (
        spark.read.format("blockgz")
        .option("value.schema", "id BIGINT, item STRING, absent INT")
        .load(archives["parquet"])
        .where("offset >= 480 AND offset < 530")
    )
    picked = frame.selectExpr("offset", "timestamp", "value.id", "value.item", "value.absent")
    got = sorted(tuple(r) for r in picked.collect())
    assert [(o, t.astimezone(dt.UTC), i, s, a) for o, t, i, s, a in got] == [
        (n, timestamp_of(n), n, f"i{n}", None) for n in range(480, 530)
    ]
