"""A filtered Spark read of a Parquet archive: through blockgz against Spark's own Parquet
reader with predicate pushdown, on the same files, in one SparkSession, one run (issue 29).

The archive: one topic-partition in Confluent's layout, :data:`OBJECTS` ``.snappy.parquet``
objects of the Avro benchmark's 10-field records (:data:`RECORDS` in all, ``8M ×
BLOCKGZ_BENCH_SCALE``), written by :class:`~blockgz.formats.parquet.writer.ParquetObjectWriter`
at its defaults (4 MiB row groups, ``__kafka_offset`` and ``__kafka_timestamp`` columns), each
record's timestamp 10 ms after the one before. Cases, each run once untimed (warm-up), then
:data:`ROUNDS` times with the two readers taking turns (medians reported):

* **offset window**: :data:`WINDOW` offsets from the middle. blockgz:
  ``spark.read.format("blockgz")...where("offset BETWEEN a AND b")`` (the footers choose the
  row groups); Spark: ``spark.read.parquet(<the objects>).where("__kafka_offset BETWEEN a AND
  b")`` (Parquet's row-group statistics filter, ``spark.sql.parquet.filterPushdown``, on by
  default). Both collect ``offset`` and ``id`` of every row.
* **time window**: the same records by ``timestamp`` / ``__kafka_timestamp``.
* **full scan**: every row, ``count(*)`` and ``sum(id)``.

Local files, and the same objects on SeaweedFS (blockgz through ``s3://``, Spark through
``s3a://``, :mod:`benchmarks.read_s3`; skipped when the ``hadoop-aws`` jars cannot be had).

Run ``BLOCKGZ_BENCH_SCALE=0.05 .venv/bin/python -m pytest benchmarks/test_parquet_read_bench.py
-p no:cacheprovider --benchmark-only -s``; the numbers are copied into ``benchmarks/README.md``.
"""

from __future__ import annotations

import shutil
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from benchmarks import avro_support as av
from benchmarks import read_s3, support
from testkit.s3 import s3_options

pytestmark = pytest.mark.timeout(3600)

TOPIC = "pqread"
OBJECTS = 4
RECORDS = max(200_000, int(8_000_000 * support.SCALE))
WINDOW = 10_000
ROUNDS = 3
STEP_MS = 10
BUCKET = "bench-parquet-read"
RESULTS: dict[str, str] = {}
S3A: dict[str, str | None] = {"missing": None}


@pytest.fixture(scope="module", autouse=True)
def summary() -> Iterator[None]:
    RESULTS.clear()
    yield
    if RESULTS:
        print(f"\n\nParquet filtered read (BLOCKGZ_BENCH_SCALE={support.SCALE:g})")
        for key, value in RESULTS.items():
            print(f"  {key}: {value}")


@pytest.fixture(scope="module")
def archive() -> Path:
    """The archive's root (``topics/pqread/partition=0/*.snappy.parquet``), written once and
    cached under the benchmarks' cache directory."""
    from blockgz.formats.parquet.writer import ParquetObjectWriter
    from blockgz.sink.convert.schemas import ValueSchema
    from blockgz.store import LocalStore

    root = support.CACHE_DIR / f"parquet-read-{RECORDS}"
    done = root / "done"
    if done.exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    store = LocalStore(str(root))
    make = av.record_maker(0)
    pool = [make(i) for i in range(4096)]
    per_object = RECORDS // OBJECTS
    started = time.perf_counter()
    for start in range(0, per_object * OBJECTS, per_object):
        key = f"topics/{TOPIC}/partition=0/{TOPIC}+0+{start:010d}.snappy.parquet"
        writer = ParquetObjectWriter(store, key, ValueSchema.from_json(av.SCHEMA))
        for at in range(start, start + per_object, 20_000):
            count = min(20_000, start + per_object - at)
            for offset, value in enumerate(av.seek_records(at, count, pool), at):
                writer.write(value, offset, av.TS0 + offset * STEP_MS)
        writer.close()
    print(f"\nwrote {RECORDS:,} records in {time.perf_counter() - started:.1f} s")
    done.write_text(str(RECORDS))
    return root


@pytest.fixture(scope="module")
def spark():
    yield from read_s3.s3a_spark("blockgz-bench-parquet-read", S3A)


def _stored(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*.parquet"))


def _cases(total: int) -> dict[str, tuple[str, str, list[int] | None]]:
    """``case: (blockgz condition, Spark condition, the offsets expected)``."""
    low = total // 2 + 7
    high = low + WINDOW - 1
    t_low, t_high = av.TS0 + low * STEP_MS, av.TS0 + high * STEP_MS
    time_cond = "{} BETWEEN timestamp_millis({}) AND timestamp_millis({})"
    return {
        "offset window": (
            f"offset BETWEEN {low} AND {high}",
            f"__kafka_offset BETWEEN {low} AND {high}",
            list(range(low, high + 1)),
        ),
        "time window": (
            time_cond.format("timestamp", t_low, t_high),
            time_cond.format("__kafka_timestamp", t_low, t_high),
            list(range(low, high + 1)),
        ),
        "full scan": ("true", "true", None),
    }


def _interleaved(runs: dict[str, Callable[[], Any]]) -> tuple[dict[str, float], dict[str, Any]]:
    """Each of ``runs`` once untimed (planning caches, class loading), then :data:`ROUNDS`
    timed rounds taking turns, so the machine's load falls on both readers alike: the median
    seconds and the last result of each."""
    results = {name: run() for name, run in runs.items()}
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(ROUNDS):
        for name, run in runs.items():
            started = time.perf_counter()
            results[name] = run()
            times[name].append(time.perf_counter() - started)
    return {name: statistics.median(t) for name, t in times.items()}, results


def _compare(spark, where: str, blockgz_df, native_df, total: int) -> None:
    """Every case on both readers, the ratio of each recorded under ``where``. ``blockgz_df``
    and ``native_df`` make a new DataFrame each: a query without filters on a blockgz
    DataFrame that earlier ran a filtered query was planned with that query's pruning
    (pyspark 4.3.0's Python data source keeps the first plan; blockgz's sessions now guard
    against it, :mod:`blockgz.reader.spark.plan_guard`), so each query loads anew."""
    for case, (ours, theirs, expected) in _cases(total).items():
        if expected is None:

            def query(df, offset):
                return tuple(df.selectExpr("count(*)", "sum(id)").first())

            want = (total, total * (total - 1) // 2)
        else:

            def query(df, offset):
                return sorted(tuple(r) for r in df.select(offset, "id").collect())

            want = [(n, n) for n in expected]
        seconds, results = _interleaved(
            {
                "blockgz": lambda c=ours: query(blockgz_df().where(c), "offset"),
                "spark": lambda c=theirs: query(native_df().where(c), "__kafka_offset"),
            }
        )
        for name, got in results.items():
            assert got == want, f"{where} {case} {name}: wrong rows"
        ratio = seconds["spark"] / seconds["blockgz"]
        RESULTS[f"{where} {case}"] = (
            f"blockgz {seconds['blockgz']:.2f} s, spark.read.parquet {seconds['spark']:.2f} s: "
            f"blockgz {ratio:.2f}x Spark's speed"
        )


def _blockgz(reader, url: str):
    """The blockgz reader's rows with the value's ``id`` field (values parsed into a struct of
    that one field, as a user of the reader names the fields wanted)."""
    options = {"value.format": "json", "value.schema": "id BIGINT"}
    return reader.options(**options).load(url).selectExpr("offset", "timestamp", "value.id AS id")


@pytest.mark.benchmark(group="parquet-read")
def test_filtered_read_local(benchmark, spark, archive):
    total = int((archive / "done").read_text())
    RESULTS["archive"] = (
        f"{total:,} records in {OBJECTS} objects, {_stored(archive) / 2**20:.1f} MiB stored"
    )

    def blockgz_df():
        return _blockgz(spark.read.format("blockgz"), str(archive))

    def native_df():
        return spark.read.parquet(str(archive / "topics" / TOPIC / "partition=0"))

    benchmark.pedantic(
        _compare, (spark, "local", blockgz_df, native_df, total), rounds=1, iterations=1
    )


@pytest.fixture(scope="module")
def s3(spark):
    from blockgz.local_servers.seaweed import SeaweedS3

    if S3A["missing"]:
        pytest.skip(f"no s3a for spark.read.parquet: {S3A['missing']}")
    reason = SeaweedS3.unavailable_reason()
    if reason:
        pytest.skip(reason)
    with SeaweedS3() as server:
        server.client().create_bucket(Bucket=BUCKET)
        read_s3.set_hadoop_conf(spark, read_s3.s3a_conf(server.endpoint_url))
        yield server


@pytest.mark.benchmark(group="parquet-read")
def test_filtered_read_s3(benchmark, spark, archive, s3):
    total = int((archive / "done").read_text())
    stored = read_s3.upload_tree(s3.client(), archive, BUCKET, "pq/")
    assert stored == _stored(archive)

    def blockgz_df():
        reader = spark.read.format("blockgz").options(**s3_options(s3.endpoint_url))
        return _blockgz(reader, f"s3://{BUCKET}/pq")

    def native_df():
        return spark.read.parquet(f"s3a://{BUCKET}/pq/topics/{TOPIC}/partition=0")

    benchmark.pedantic(
        _compare, (spark, "S3", blockgz_df, native_df, total), rounds=1, iterations=1
    )
