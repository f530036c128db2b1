"""Probe (not a pytest-benchmark suite yet): seek vs download and parallel upload on SeaweedFS.

Uploads the cached ~1 GiB seek file (run ``make bench`` once to build it) to a local SeaweedFS,
then, through the test proxy adding 20 ms per request and a per-connection bandwidth limit,
times a cold seek (new archive per round), a warm seek (one request), reading the object from
the start to the middle record, and a 200 MiB upload with 1 and 4 parts in flight.

    .venv/bin/python -m benchmarks.probe_seaweed_s3 --bandwidth-mb 50
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from benchmarks import support
from benchmarks.test_s3_bench import set_nagle
from blockgz.layout import Layout, sidecar_key
from blockgz.local_servers.seaweed import SeaweedS3
from blockgz.objects.stream import stream_object
from blockgz.store import open_store
from reader import open_archive
from testkit.s3 import FaultProxy, s3_options

MiB = 1 << 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bandwidth-mb", type=float, default=50.0, help="MB/s per connection")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    args = parser.parse_args()
    seek_file = support.seek_file_path()
    key = Layout().data_key("", "ev/partition=0", "ev", 0, 0, ".json.gz")
    with SeaweedS3() as s3:
        s3.client().create_bucket(Bucket="probe-seek")
        store, _ = open_store("s3://probe-seek", s3_options(s3.endpoint_url))
        with open(seek_file, "rb") as f, store.open_upload(key) as upload:
            while chunk := f.read(8 * MiB):
                upload.write(chunk)
        index = seek_file.with_name(seek_file.name.replace(".ndjson.gz", ".ndjson.index.json"))
        store.put(sidecar_key(key), index.read_bytes())
        with FaultProxy(
            s3.endpoint_url,
            latency_s=args.latency_ms / 1000,
            bandwidth_bps=args.bandwidth_mb * 1e6,
        ) as proxy:
            set_nagle(proxy, enabled=False)
            report(proxy, key)


def report(proxy: FaultProxy, key: str) -> None:
    options = s3_options(proxy.endpoint_url)
    with open_archive("s3://probe-seek", options) as archive:
        target = archive.index(archive.objects("ev", 0)[0]).record_count // 2
        list(archive.seek("ev", 0, target, count=1))
        proxy.clear_log()
        started = time.perf_counter()
        next(archive.seek("ev", 0, target + 7, count=1))
        warm, warm_requests = time.perf_counter() - started, len(proxy.requests)
    cold = []
    for _ in range(5):
        started = time.perf_counter()
        with open_archive("s3://probe-seek", options) as archive:
            next(archive.seek("ev", 0, target, count=1))
        cold.append(time.perf_counter() - started)
    started = time.perf_counter()
    store, _ = open_store("s3://probe-seek", options)
    seen = 0
    with stream_object(store, key, compressed=True) as f:
        while seen <= target:
            seen += int(np.count_nonzero(np.frombuffer(f.read(MiB), np.uint8) == 10))
    scan = time.perf_counter() - started
    upload = {}
    data = os.urandom(MiB) * 200
    for concurrency in (1, 4):
        extra = {"s3.part.size": str(5 * MiB), "s3.upload.concurrency": str(concurrency)}
        store, _ = open_store("s3://probe-seek", s3_options(proxy.endpoint_url, **extra))
        started = time.perf_counter()
        with store.open_upload(f"upload-{concurrency}") as up:
            for n in range(0, len(data), MiB):
                up.write(data[n : n + MiB])
        upload[concurrency] = time.perf_counter() - started
    seek = statistics.median(cold)
    print(
        f"cold seek {seek * 1e3:.0f} ms, warm seek {warm * 1e3:.0f} ms ({warm_requests} request),"
        f" read to the middle record {scan:.2f} s ({scan / seek:.0f}x); upload 200 MiB:"
        f" 1 in flight {upload[1]:.2f} s, 4 in flight {upload[4]:.2f} s"
        f" ({upload[1] / upload[4]:.2f}x)"
    )


if __name__ == "__main__":
    main()
