"""A narrow scan of a wide Parquet archive on S3: whole row groups vs only the wanted columns.

The Spark reader's Parquet column path (:mod:`blockgz.reader.spark.scan_parquet`) fetches only the
column chunks a query needs, reading through gaps shorter than ``COLUMN_GAP``. This measures
what that buys where it matters, a large column the query skips: two objects of 100,000
records each, ``id`` plus a ``blob`` of ``--blob`` characters of base64 (barely compressible),
on SeaweedFS behind :class:`testkit.s3.FaultProxy` (20 ms per request, 100 MB/s per
connection, as one stream to S3 in the same region gets). It reads ``id`` of every record
three times each way and prints the medians, the GETs and the bytes::

    PYTHONPATH=. .venv/bin/python -m benchmarks.parquet_wide_scan --blob 1500 --prefetch 2

The archive is written once into ``.bench-cache/``.
"""

from __future__ import annotations

import argparse
import base64
import os
import statistics
import time
from pathlib import Path

from benchmarks import support

SCHEMA = {
    "type": "record",
    "name": "Wide",
    "fields": [{"name": "id", "type": "long"}, {"name": "blob", "type": "string"}],
}
OBJECTS, PER_OBJECT = 2, 100_000
BUCKET = "wide-scan"


def write_archive(blob: int) -> Path:
    from blockgz.formats.parquet.writer import ParquetObjectWriter
    from blockgz.sink.convert.schemas import ValueSchema
    from blockgz.store import LocalStore

    root = support.CACHE_DIR / f"parquet-wide-{blob}"
    if (root / "done").exists():
        return root
    store = LocalStore(str(root))
    noise = os.urandom(1 << 20)
    raw = blob * 3 // 4
    for start in range(0, OBJECTS * PER_OBJECT, PER_OBJECT):
        key = f"topics/wide/partition=0/wide+0+{start:010d}.snappy.parquet"
        writer = ParquetObjectWriter(store, key, ValueSchema.from_json(SCHEMA))
        for n in range(start, start + PER_OBJECT):
            at = (n * 7919) % (len(noise) - raw)
            writer.write({"id": n, "blob": base64.b64encode(noise[at : at + raw]).decode()}, n, n)
        writer.close()
    (root / "done").write_text("")
    return root


def scan_ids(url: str, options: dict[str, str]) -> int:
    import pyarrow as pa

    from blockgz.reader import open_archive
    from blockgz.reader.spark import scan_parquet, scan_read
    from blockgz.reader.spark.scan_plan import ScanFilter, plan_scan

    rows = 0
    everything = ScanFilter()
    with open_archive(url, options) as archive:
        for split in plan_scan(archive, everything):
            for piece in split.pieces:
                batches = scan_parquet.parquet_batches(
                    archive,
                    piece,
                    everything.offsets,
                    pa.struct([("id", pa.int64())]),
                    keep=scan_read._filtered,
                    span_bytes=scan_read.SPAN_BYTES,
                )
                rows += sum(b.num_rows for b in batches or ())
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blob", type=int, default=1500, help="characters of each blob")
    parser.add_argument("--prefetch", default="2", help="the reader's prefetch option")
    args = parser.parse_args()

    from blockgz.local_servers.seaweed import SeaweedS3
    from blockgz.reader.spark import scan_parquet
    from testkit.s3 import FaultProxy, s3_options

    root = write_archive(args.blob)
    with (
        SeaweedS3() as s3,
        FaultProxy(s3.endpoint_url, latency_s=0.02, bandwidth_bps=100e6) as proxy,
    ):
        client = s3.client()
        client.create_bucket(Bucket=BUCKET)
        for path in sorted(root.rglob("*.parquet")):
            client.upload_file(str(path), BUCKET, str(path.relative_to(root)))
        options = {**s3_options(proxy.endpoint_url), "prefetch": args.prefetch}
        configured = scan_parquet.COLUMN_GAP
        for gap, name in ((1 << 40, "whole row groups"), (configured, "wanted columns")):
            scan_parquet.COLUMN_GAP = gap
            seconds = []
            for _ in range(3):
                before = len(proxy.requests)
                started = time.perf_counter()
                rows = scan_ids(f"s3://{BUCKET}", options)
                seconds.append(time.perf_counter() - started)
                gets = [r for r in proxy.requests[before:] if r.method == "GET"]
            assert rows == OBJECTS * PER_OBJECT, rows
            megabytes = sum(r.response_bytes for r in gets) / 1e6
            print(
                f"{name}: {statistics.median(seconds):.2f} s, {len(gets)} GETs, {megabytes:.1f} MB"
            )
        scan_parquet.COLUMN_GAP = configured


if __name__ == "__main__":
    main()
