"""Parquet, in one run: the Parquet export against the Avro export of the same topic, and a
cold seek in a large ``.parquet`` object against downloading it.

1. The Avro benchmark's dataset (:func:`benchmarks.avro_support.produce_avro_dataset`: 1M
   records × ``BLOCKGZ_BENCH_SCALE`` of a 10-field schema, confluent-kafka's
   ``AvroSerializer``, 4 partitions of Apache Kafka 4.1, the registry stand-in), exported to
   SeaweedFS by ``run_export`` with ``format.class=avro`` (``avro.codec=snappy``) and with
   ``format.class=parquet`` (``parquet.codec=snappy``, Confluent's default), after one
   untimed warm-up export; each timed once. Target: Parquet ≥ 0.8× Avro's records/s.
2. A Parquet object of ``1 GiB × scale`` stored bytes (at least 16 MiB), written by
   :class:`~blockgz.formats.parquet.writer.ParquetObjectWriter` (default 1 MiB row groups,
   snappy) into SeaweedFS, read through :class:`testkit.s3.FaultProxy` (20 ms per request,
   50 MB/s per connection): a cold seek (a new store: HEAD, the footer's ranged GET, one row
   group's ranged GET) against a GET of the whole object. Target: ≥ 50×.

Run ``BLOCKGZ_BENCH_SCALE=0.05 .venv/bin/python -m pytest benchmarks/test_parquet_bench.py
-p no:cacheprovider --benchmark-only -s``; the numbers are copied into ``benchmarks/README.md``.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks import avro_support as av
from benchmarks import support
from benchmarks.support import GiB, MiB
from testkit.s3 import s3_options

pytestmark = pytest.mark.timeout(3600)

TOPIC = "bench_parquet"
SEEK_OBJECT_BYTES = max(16 * MiB, int(GiB * support.SCALE))
EXPORT_TARGET = 0.8
SEEK_TARGET = 50.0
COLD_ROUNDS = 5
RESULTS: dict[str, Any] = {}


@pytest.fixture(scope="module", autouse=True)
def summary() -> Iterator[None]:
    RESULTS.clear()
    yield
    if RESULTS:
        print(f"\n\nParquet benchmark (BLOCKGZ_BENCH_SCALE={support.SCALE:g})")
        for key, value in RESULTS.items():
            print(f"  {key}: {value}")


@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17+")
    from blockgz.sink.session import spark_session

    session = spark_session(
        "local[2,3]",
        app_name="blockgz-bench-parquet",
        conf={"spark.sql.execution.arrow.maxRecordsPerBatch": str(av.ARROW_BATCH_ROWS)},
    )
    yield session
    session.stop()


def _job(kafka, s3, registry, bucket: str, fmt: str):
    from blockgz.sink.jobconfig.config import ExportSettings

    s3.client().create_bucket(Bucket=bucket)
    codec = {"avro": {"avro.codec": "snappy"}, "parquet": {"parquet.codec": "snappy"}}[fmt]
    return ExportSettings.from_mapping(
        {
            "name": f"bench-{fmt}-export",
            "topics": TOPIC,
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": bucket,
            **s3_options(s3.endpoint_url),
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": registry.url,
            "format.class": fmt,
            "maxOffsetsPerTrigger": str(av.MAX_OFFSETS_PER_TRIGGER),
            **codec,
        }
    )


def _export(spark, job, checkpoint) -> tuple[int, float, int]:
    """``(records committed, wall seconds, stored bytes)`` of one export run."""
    from blockgz.sink.export.job import run_export

    started = time.perf_counter()
    run_export(job, checkpoint=checkpoint, once=True, spark=spark, install_signal_handlers=False)
    seconds = time.perf_counter() - started
    store, prefix = job.sink.make_store()
    try:
        files = job.sink.manifest_log(store, prefix).committed_values()
    finally:
        store.close()
    return sum(f.records for f in files), seconds, sum(f.size for f in files)


@pytest.mark.benchmark(group="parquet")
def test_parquet_export_vs_avro_export(benchmark, spark, kafka, s3, registry, tmp_path):
    data = av.produce_avro_dataset(kafka, registry.url, TOPIC, av.PER_PARTITION)
    expected = sum(data.watermarks.values())
    _export(spark, _job(kafka, s3, registry, "bench-pq-warmup", "avro"), tmp_path / "warm")
    runs = {}
    for fmt in ("avro", "parquet"):
        job = _job(kafka, s3, registry, f"bench-pq-{fmt}", fmt)
        if fmt == "parquet":
            runs[fmt] = benchmark.pedantic(
                _export, (spark, job, tmp_path / fmt), rounds=1, iterations=1
            )
        else:
            runs[fmt] = _export(spark, job, tmp_path / fmt)
    for fmt, (records, seconds, size) in runs.items():
        assert records == expected, f"{fmt}: {records} records committed, {expected} produced"
        RESULTS[f"export {fmt}"] = (
            f"{records:,} records in {seconds:.1f} s = {records / seconds:,.0f} records/s, "
            f"{size / MiB:.1f} MiB stored"
        )
    ratio = runs["avro"][1] / runs["parquet"][1]
    verdict = "PASS" if ratio >= EXPORT_TARGET else "FAIL"
    RESULTS["export parquet/avro speed"] = f"{ratio:.2f}x (target >= {EXPORT_TARGET}): {verdict}"
    benchmark.extra_info.update({"scale": support.SCALE, "ratio_vs_avro": round(ratio, 3)})


def _build_seek_object(store, key: str) -> tuple[int, int]:
    """The seek object: ``(records, stored bytes)``."""
    from blockgz.formats.parquet.writer import ParquetObjectWriter
    from blockgz.sink.convert.schemas import ValueSchema

    make = av.record_maker(0)
    pool = [make(i) for i in range(4096)]
    writer = ParquetObjectWriter(store, key, ValueSchema.from_json(av.SCHEMA))
    start, batch = 0, 20_000
    while writer.stored_size < SEEK_OBJECT_BYTES:
        for offset, value in enumerate(av.seek_records(start, batch, pool), start):
            writer.write(value, offset, value["ts"])
        start += batch
    done = writer.close()
    return done.records, done.size


@pytest.mark.benchmark(group="parquet")
def test_parquet_cold_seek_vs_download(benchmark, s3):
    from blockgz.objects.indexed import IndexedReader
    from blockgz.store import open_store
    from testkit.s3 import FaultProxy

    bucket = "bench-parquet-seek"
    s3.client().create_bucket(Bucket=bucket)
    key = "topics/seek/partition=0/seek+0+0000000000.snappy.parquet"
    direct, _ = open_store(f"s3://{bucket}", s3_options(s3.endpoint_url))
    started = time.perf_counter()
    records, size = _build_seek_object(direct, key)
    RESULTS["seek object"] = (
        f"{records:,} records, {size / MiB:.1f} MiB stored, written in "
        f"{time.perf_counter() - started:.1f} s"
    )
    target = records // 2 + 17
    with FaultProxy(s3.endpoint_url, latency_s=av.LATENCY_S, bandwidth_bps=av.BANDWIDTH_BPS) as px:
        options = s3_options(px.endpoint_url)

        def cold_seek():
            store, _ = open_store(f"s3://{bucket}", options)  # nothing cached
            try:
                with IndexedReader.open_object(store, key) as obj:
                    (record,) = list(obj.seek(target, count=1))
                return record, store.requests
            finally:
                store.close()

        record, requests = cold_seek()  # untimed: the connection pool's first handshake
        assert record.offset == target and record.value["id"] == target
        seeks = []
        for _ in range(COLD_ROUNDS - 1):
            began = time.perf_counter()
            cold_seek()
            seeks.append(time.perf_counter() - began)
        seek_s = benchmark.pedantic(
            lambda: (lambda t0: (cold_seek(), time.perf_counter() - t0)[1])(time.perf_counter()),
            rounds=1,
            iterations=1,
        )
        seeks.append(seek_s)
        store, _ = open_store(f"s3://{bucket}", options)
        began = time.perf_counter()
        whole = store.get(key)
        download_s = time.perf_counter() - began
        store.close()
    assert len(whole) == size
    median = sorted(seeks)[len(seeks) // 2]
    ratio = download_s / median
    RESULTS["cold seek"] = (
        f"median {median * 1e3:.0f} ms of {len(seeks)} ({requests.summary()} each, "
        f"latency {av.LATENCY_S * 1e3:.0f} ms, {av.BANDWIDTH_BPS / 1e6:.0f} MB/s)"
    )
    RESULTS["download"] = f"{download_s:.2f} s for {size / MiB:.1f} MiB"
    verdict = "PASS" if ratio >= SEEK_TARGET else "FAIL"
    RESULTS["seek vs download"] = f"{ratio:.0f}x (target >= {SEEK_TARGET:.0f}x): {verdict}"
    benchmark.extra_info.update(
        {"scale": support.SCALE, "object_bytes": size, "speedup": round(ratio, 1)}
    )
