"""blockgz against a real S3 server: SeaweedFS behind a proxy that adds 20 ms per request
and holds every connection to a bandwidth, as a link to real S3 would.

1. Seek: a 1 GiB block-GZIP object (1 GiB stored) in Confluent's layout, read cold by
   offset (LIST + index + one ranged GET), against downloading the whole object, and
   against one whole-object GET streamed through igzip until the same record. The proxy's
   log gives the bytes and requests of each round.
2. Upload: ~200 MB through ``store.open_upload`` in 5 MiB parts, one part in flight
   (``s3.upload.concurrency=1``) against 4 (the default) and 8.

Run ``.venv/bin/python -m pytest benchmarks/test_s3_bench.py -p no:cacheprovider
--benchmark-only``; at full scale the report goes to ``benchmarks/results/s3.md``.
"""

from __future__ import annotations

import os
import statistics
import time
from collections import Counter
from dataclasses import dataclass

import boto3
import pytest
from isal import igzip

from benchmarks import report as rp
from benchmarks import s3_support as s3b
from benchmarks import support
from blockgz.archive.layout import Layout, default_partition
from blockgz.blocks.index import BlockIndex
from blockgz.reader import open_archive
from blockgz.store import open_store
from blockgz.written.sidecars import sidecar_key
from blockgz.written.upload import BlockGzipUpload
from testkit.s3 import FaultProxy, s3_options

BUCKET = "bench"
UPLOAD_BUCKET = "bench-upload"
PREFIX = "archive/"
LAYOUT = Layout()  # the default key layout: topics/<topic>/partition=<p>/<topic>+<p>+<start>
TOPIC = "events"
PARTITION = 0
SCAN_CHUNK = 1024 * 1024
SEEK_ROUNDS = 9
SCAN_ROUNDS = 3
DOWNLOAD_ROUNDS = 2
UPLOAD_ROUNDS = 3
DIAGNOSTIC_REPEATS = 7


# -- fixtures ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(s3):
    """SeaweedFS (``weed mini``) in its own process: the session's (benchmarks/conftest.py)."""
    return s3


@pytest.fixture(scope="module")
def proxy(server):
    """The link: +20 ms per request, each connection held to :data:`s3b.BANDWIDTH_BPS`,
    its client sockets with TCP_NODELAY (see :func:`set_nagle`)."""
    with FaultProxy(
        server.endpoint_url, latency_s=s3b.LATENCY_S, bandwidth_bps=s3b.BANDWIDTH_BPS
    ) as p:
        set_nagle(p, enabled=False)
        yield p


def set_nagle(proxy: FaultProxy, *, enabled: bool) -> None:
    """Turn Nagle's algorithm on or off for the connections ``proxy`` accepts from now on.

    ``FaultProxy`` writes a response's headers and body in separate ``send()`` calls and
    leaves Nagle on, so a small body waits for the client's delayed ACK of the headers:
    ~40 ms (Linux's delayed-ACK timer) on every GET that returns a small body. That is
    the test proxy's doing, not S3's or blockgz's, so the benchmarks switch it off on this
    instance (through its ``socketserver`` handler class, ``disable_nagle_algorithm``);
    the seek test measures the stall separately for the report.
    """
    server = proxy._server
    assert server is not None, "the proxy is not started"
    handler = server.RequestHandlerClass
    base = getattr(handler, "nagle_base", handler)
    if enabled:
        server.RequestHandlerClass = base
    else:
        server.RequestHandlerClass = type(
            "NoDelayProxyHandler",
            (base,),
            {"disable_nagle_algorithm": True, "nagle_base": base},
        )


@pytest.fixture(scope="module")
def cpu_meter(server) -> s3b.CpuMeter:
    process = getattr(server, "_proc", None)
    return s3b.CpuMeter(process.pid if process is not None else None)


@pytest.fixture(scope="module")
def report(request):
    """Collects the results; at the end prints the report (and writes it at full scale)."""
    s3b.RESULTS.clear()
    yield s3b.RESULTS
    results = s3b.RESULTS
    if not results:
        return
    text = s3b.render(results)
    complete = all(k in results for k in ("seek", "scan", "download", "upload c=1", "upload c=4"))
    written = support.MEANINGFUL and complete
    rp.publish_report(request.config, "blockgz on S3", text, s3b.RESULTS_PATH, written)


@dataclass(frozen=True)
class SeekObject:
    key: str
    index_key: str
    index: BlockIndex
    index_bytes: int
    target: int
    build_s: float


@pytest.fixture(scope="module")
def seek_object(server, report) -> SeekObject:
    """The 1 GiB (stored) block-GZIP object and its sidecar, uploaded once, straight to the
    server: the corpus written over and over until the compressed object reaches the size."""
    corpus = support.corpus_path().read_bytes()
    server.client().create_bucket(Bucket=BUCKET)
    store, prefix = open_store(
        f"s3://{BUCKET}/{PREFIX}",
        s3_options(server.endpoint_url, **{"s3.part.size": "67108864"}),
    )
    key = LAYOUT.data_key(
        prefix, f"{TOPIC}/{default_partition(PARTITION)}", TOPIC, PARTITION, 0, ".json.gz"
    )
    started = time.perf_counter()
    try:
        with BlockGzipUpload(store, key, block_size=s3b.BLOCK_SIZE, threads=2) as out:
            while out.bytes_written < s3b.SEEK_OBJECT_BYTES:
                out.write_delimited(corpus)
        build_s = time.perf_counter() - started  # the data object, then its sidecar
        index = out.index
        index_bytes = store.head(sidecar_key(key)).size
        assert store.head(key).size == index.byte_length
    finally:
        store.close()
    target = (index.first_offset or 0) + index.record_count // 2
    s3b.RESULTS["object"] = {
        "key": key,
        "uncompressed": index.byte_length_uncompressed,
        "compressed": index.byte_length,
        "records": index.record_count,
        "blocks": len(index.chunks),
        "index_bytes": index_bytes,
        "target": target,
        "build_s": build_s,
    }
    return SeekObject(key, sidecar_key(key), index, index_bytes, target, build_s)


@pytest.fixture(scope="module")
def upload_data() -> bytes:
    """:data:`s3b.UPLOAD_BYTES` of what an export uploads: the corpus gzip-compressed
    (repeated as needed). Compressed, because the server must not get an easier job than
    real S3 has: SeaweedFS gzips text it stores, which costs it a core on plain NDJSON."""
    compressed = igzip.compress(support.corpus_path().read_bytes(), compresslevel=1)
    copies = -(-s3b.UPLOAD_BYTES // len(compressed))
    return (compressed * copies)[: s3b.UPLOAD_BYTES]


# -- helpers ----------------------------------------------------------------------------------
class RoundLog:
    """Per-round proxy logs for a pedantic benchmark: ``settle()`` between rounds."""

    def __init__(self, proxy: FaultProxy):
        self.proxy = proxy
        self.rounds: list[s3b.Round] = []
        self.to_close: list = []

    def settle(self) -> None:
        """File the previous round's requests, close what it opened, clear the proxy log."""
        self.proxy.wait_idle(timeout_s=60)
        if self.rounds and not self.rounds[-1].requests:
            self.rounds[-1].requests = self.proxy.requests
            self.rounds[-1].extra["peak_in_flight"] = self.proxy.peak_in_flight
        for thing in self.to_close:
            thing.close()
        self.to_close.clear()
        self.proxy.clear_log()

    def measured(self, warmup_rounds: int) -> list[s3b.Round]:
        return self.rounds[warmup_rounds:] or self.rounds


def scan_to_record(fileobj, line_number: int) -> bytes:
    """Decompress ``fileobj`` (multi-member gzip) until line ``line_number`` (0-based)."""
    seen = 0
    carry = b""
    with igzip.IGzipFile(fileobj=fileobj, mode="rb") as gz:
        while chunk := gz.read(SCAN_CHUNK):
            n = chunk.count(b"\n")
            if seen + n > line_number:
                skip = line_number - seen
                start = 0
                for _ in range(skip):
                    start = chunk.index(b"\n", start) + 1
                end = chunk.index(b"\n", start)
                return (carry if skip == 0 else b"") + chunk[start:end]
            seen += n
            tail = chunk.rfind(b"\n")
            carry = chunk[tail + 1 :] if tail >= 0 else carry + chunk
    raise AssertionError(f"the object has only {seen} lines, wanted line {line_number}")


def _timed(fn, repeats: int = DIAGNOSTIC_REPEATS) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _phases(rounds: list[s3b.Round], obj: SeekObject) -> list[tuple[str, float]]:
    """Median of each step over rounds that made the same requests in the same order."""
    per_round = [r.phases(obj.key, obj.index_key) for r in rounds]
    shapes = Counter(tuple(label for label, _ in p) for p in per_round)
    shape = shapes.most_common(1)[0][0]
    same = [p for p in per_round if tuple(label for label, _ in p) == shape]
    return [(label, s3b.median(p[i][1] for p in same)) for i, label in enumerate(shape)]


def _summary(rounds: list[s3b.Round], obj: SeekObject, cpu: dict[str, float]) -> dict:
    kinds = [r.kinds(obj.key, obj.index_key) for r in rounds]
    seconds = [r.seconds for r in rounds]
    return {
        "median_s": statistics.median(seconds),
        "min_s": min(seconds),
        "max_s": max(seconds),
        "rounds": len(rounds),
        "seconds": seconds,
        "bytes": int(statistics.median(r.response_bytes for r in rounds)),
        "bytes_per_round": [r.response_bytes for r in rounds],
        "kinds": dict(kinds[0]),
        "kinds_differ": any(k != kinds[0] for k in kinds),
        "min_ranged_gets": min(k["ranged GET data"] for k in kinds),
        "max_ranged_gets": max(k["ranged GET data"] for k in kinds),
        "max_whole_gets": max(k["whole GET data"] for k in kinds),
        "cpu": cpu,
    }


# -- 1. seek ----------------------------------------------------------------------------------
@pytest.mark.benchmark(group="s3-seek")
def test_s3_cold_seek(benchmark, server, proxy, seek_object, cpu_meter, report):
    """Time to the first record from a cold ``open_archive``: LIST, index, one ranged GET."""
    obj = seek_object
    url = f"s3://{BUCKET}/{PREFIX}"
    options = s3_options(proxy.endpoint_url)
    log = RoundLog(proxy)
    records = []

    def cold_seek():
        t0 = time.monotonic()
        archive = open_archive(url, options)
        record = next(archive.seek(TOPIC, PARTITION, obj.target, count=1))
        t1 = time.monotonic()
        log.to_close.append(archive)
        log.rounds.append(s3b.Round(t0, t1))
        records.append(record)

    cpu_start = cpu_meter.snapshot()
    benchmark.pedantic(
        cold_seek, setup=log.settle, rounds=SEEK_ROUNDS, warmup_rounds=1, iterations=1
    )
    cpu = s3b.CpuMeter.cores(cpu_start, cpu_meter.snapshot())
    log.settle()
    rounds = log.measured(1)

    assert all(r.offset == obj.target for r in records)
    chunk = obj.index.chunks[obj.index.locate(obj.target)]
    result = _summary(rounds, obj, cpu)
    result["phases"] = _phases(rounds, obj)
    result["block_bytes"] = chunk.byte_length
    result["index_bytes"] = obj.index_bytes
    result["value"] = records[-1].value
    s3b.RESULTS["seek"] = result
    diagnostics = _diagnostics(server, obj, chunk)
    diagnostics.update(_nagle_effect(proxy, url, options, obj))
    with open_archive(url, options) as archive:  # listing and index cached after this
        next(archive.seek(TOPIC, PARTITION, obj.target, count=1))
        diagnostics["warm_seek_s"] = _timed(
            lambda: next(archive.seek(TOPIC, PARTITION, obj.target, count=1))
        )
    s3b.RESULTS["diagnostics"] = diagnostics
    benchmark.extra_info.update(
        {
            "scale": s3b.SCALE,
            "latency_s": s3b.LATENCY_S,
            "bandwidth_bps": s3b.BANDWIDTH_BPS,
            "bytes_transferred": result["bytes"],
            "requests": result["kinds"],
            "round_seconds": result["seconds"],
            **{f"cores_{k}": round(v, 2) for k, v in cpu.items()},
        }
    )
    for r in rounds:  # exactly one block of the data object, never the whole of it
        kinds = r.kinds(obj.key, obj.index_key)
        assert kinds["ranged GET data"] == 1, kinds
        assert kinds["whole GET data"] == 0, kinds
        ranged = [
            q for q in r.requests if s3b.classify(q, obj.key, obj.index_key) == "ranged GET data"
        ]
        assert ranged[0].header("Range") == f"bytes={chunk.byte_offset}-{chunk.byte_end - 1}"
        assert ranged[0].response_bytes == chunk.byte_length


def _nagle_effect(proxy: FaultProxy, url: str, options: dict[str, str], obj: SeekObject) -> dict:
    """GETs through the proxy with Nagle on (FaultProxy's default) and off (these benchmarks):
    a 1 KiB object (like a LIST page or a small object's index) and this object's index."""
    out = {}
    store, prefix = open_store(url, options)
    tiny_key = f"{prefix}diagnostics/tiny.json"
    store.put(tiny_key, b"x" * 1024)
    store.close()
    try:
        for enabled in (True, False):
            set_nagle(proxy, enabled=enabled)
            store, _ = open_store(url, options)  # a new client: new connections, new handler
            try:
                for name, key in (("tiny", tiny_key), ("index", obj.index_key)):

                    def get(store=store, key=key):
                        return store.get(key)

                    get()  # connect
                    out[f"nagle_{'on' if enabled else 'off'}_{name}_s"] = _timed(get, 15)
            finally:
                store.close()
    finally:
        set_nagle(proxy, enabled=False)
        store, _ = open_store(url, options)
        store.delete(tiny_key)
        store.close()
    proxy.clear_log()
    return out


def _diagnostics(server, obj: SeekObject, chunk) -> dict:
    """What the server itself costs per request (no proxy), and what a new boto3 client costs."""
    url = f"s3://{BUCKET}/{PREFIX}"
    options = s3_options(server.endpoint_url)
    client_s = _timed(lambda: open_store(url, options)[0].close())
    shared = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    )
    shared_client_s = _timed(lambda: shared.client("s3", endpoint_url=server.endpoint_url))
    store, prefix = open_store(url, options)
    try:
        small_key = f"{prefix}diagnostics/small.bin"
        small = os.urandom(max(2 * s3b.MiB, chunk.byte_length + 1))
        store.put(small_key, small)
        length = chunk.byte_length
        big_range_s = _timed(lambda: store.get_range(obj.key, chunk.byte_offset, chunk.byte_end))
        small_range_s = _timed(lambda: store.get_range(small_key, 0, length))
        head_s = _timed(lambda: store.head(obj.index_key))
        partition = LAYOUT.partition_prefix(prefix, TOPIC, PARTITION)
        list_s = _timed(lambda: list(store.list(partition)))
        store.delete(small_key)
    finally:
        store.close()
    return {
        "client_s": client_s,
        "shared_client_s": shared_client_s,
        "big_range_s": big_range_s,
        "small_range_s": small_range_s,
        "small_object_bytes": len(small),
        "head_s": head_s,
        "list_s": list_s,
    }


@pytest.mark.benchmark(group="s3-seek")
def test_s3_whole_object_scan(benchmark, proxy, seek_object, cpu_meter, report):
    """The baseline: one GET of the whole object, igzip-streamed until the same record."""
    obj = seek_object
    url = f"s3://{BUCKET}/{PREFIX}"
    options = s3_options(proxy.endpoint_url)
    line = obj.target - (obj.index.first_offset or 0)
    log = RoundLog(proxy)
    values = []

    def scan():
        t0 = time.monotonic()
        store, _ = open_store(url, options)  # a new client, as a cold open_archive makes
        body = store.client.get_object(Bucket=BUCKET, Key=obj.key)["Body"]
        try:
            value = scan_to_record(body, line)
        finally:
            body.close()  # stop the download: the rest of the object is not needed
        t1 = time.monotonic()
        log.to_close.append(store)
        log.rounds.append(s3b.Round(t0, t1))
        values.append(value)

    cpu_start = cpu_meter.snapshot()
    benchmark.pedantic(scan, setup=log.settle, rounds=SCAN_ROUNDS, warmup_rounds=1, iterations=1)
    cpu = s3b.CpuMeter.cores(cpu_start, cpu_meter.snapshot())
    log.settle()
    rounds = log.measured(1)

    result = _summary(rounds, obj, cpu)
    s3b.RESULTS["scan"] = result
    benchmark.extra_info.update(
        {
            "scale": s3b.SCALE,
            "latency_s": s3b.LATENCY_S,
            "bandwidth_bps": s3b.BANDWIDTH_BPS,
            "bytes_transferred": result["bytes"],
            "requests": result["kinds"],
            "round_seconds": result["seconds"],
            **{f"cores_{k}": round(v, 2) for k, v in cpu.items()},
        }
    )
    seek = s3b.RESULTS.get("seek")
    if seek is not None:
        assert values[-1] == seek["value"], "the scan and the seek found different records"
    for r in rounds:
        kinds = r.kinds(obj.key, obj.index_key)
        assert kinds["whole GET data"] == 1 and kinds["ranged GET data"] == 0, kinds


@pytest.mark.benchmark(group="s3-seek")
def test_s3_whole_object_download(benchmark, proxy, seek_object, cpu_meter, report):
    """ "Downloading it": one GET of the whole object, every byte read (nothing decompressed)."""
    obj = seek_object
    url = f"s3://{BUCKET}/{PREFIX}"
    options = s3_options(proxy.endpoint_url)
    log = RoundLog(proxy)
    sizes = []

    def download():
        t0 = time.monotonic()
        store, _ = open_store(url, options)  # a new client, as a cold open_archive makes
        body = store.client.get_object(Bucket=BUCKET, Key=obj.key)["Body"]
        size = 0
        with body:
            while chunk := body.read(SCAN_CHUNK):
                size += len(chunk)
        t1 = time.monotonic()
        log.to_close.append(store)
        log.rounds.append(s3b.Round(t0, t1))
        sizes.append(size)

    cpu_start = cpu_meter.snapshot()
    benchmark.pedantic(
        download, setup=log.settle, rounds=DOWNLOAD_ROUNDS, warmup_rounds=1, iterations=1
    )
    cpu = s3b.CpuMeter.cores(cpu_start, cpu_meter.snapshot())
    log.settle()
    rounds = log.measured(1)

    result = _summary(rounds, obj, cpu)
    s3b.RESULTS["download"] = result
    benchmark.extra_info.update(
        {
            "scale": s3b.SCALE,
            "latency_s": s3b.LATENCY_S,
            "bandwidth_bps": s3b.BANDWIDTH_BPS,
            "bytes_transferred": result["bytes"],
            "round_seconds": result["seconds"],
            **{f"cores_{k}": round(v, 2) for k, v in cpu.items()},
        }
    )
    assert all(size == obj.index.byte_length for size in sizes), sizes
    for r in rounds:
        kinds = r.kinds(obj.key, obj.index_key)
        assert kinds["whole GET data"] == 1 and kinds["ranged GET data"] == 0, kinds


# -- 2. upload --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def upload_bucket(server) -> str:
    server.client().create_bucket(Bucket=UPLOAD_BUCKET)
    return UPLOAD_BUCKET


@pytest.mark.benchmark(group="s3-upload")
@pytest.mark.parametrize("concurrency", s3b.UPLOAD_CONCURRENCIES)
def test_s3_upload(
    benchmark, server, proxy, upload_bucket, upload_data, cpu_meter, report, concurrency
):
    """``store.open_upload``: 1 MiB writes, 5 MiB parts, ``concurrency`` parts in flight."""
    key = f"uploads/c{concurrency}.json.gz"
    direct = server.client()
    options = s3_options(
        proxy.endpoint_url,
        **{"s3.part.size": str(s3b.PART_SIZE), "s3.upload.concurrency": str(concurrency)},
    )
    view = memoryview(upload_data)
    log = RoundLog(proxy)

    def setup():
        log.settle()
        direct.delete_object(Bucket=upload_bucket, Key=key)
        store, _ = open_store(f"s3://{upload_bucket}", options)  # client made off the clock
        log.to_close.append(store)
        return (store,), {}

    def upload(store):
        cpu_start = cpu_meter.snapshot()
        t0 = time.monotonic()
        with store.open_upload(key) as up:
            for pos in range(0, len(view), s3b.WRITE_CHUNK):
                up.write(view[pos : pos + s3b.WRITE_CHUNK])
        t1 = time.monotonic()
        log.rounds.append(s3b.Round(t0, t1, extra={"cpu": (cpu_start, cpu_meter.snapshot())}))

    benchmark.pedantic(upload, setup=setup, rounds=UPLOAD_ROUNDS, warmup_rounds=1, iterations=1)
    log.settle()
    rounds = log.measured(1)
    size = direct.head_object(Bucket=upload_bucket, Key=key)["ContentLength"]
    direct.delete_object(Bucket=upload_bucket, Key=key)
    assert size == len(upload_data)

    seconds = [r.seconds for r in rounds]
    part_ms, complete_s, parts, parts_phase_s = [], [], [], []
    for r in rounds:
        part_requests = [q for q in r.requests if q.method == "PUT" and "partNumber" in q.query]
        parts.append(len(part_requests))
        parts_phase_s.append(max(q.finished for q in part_requests) - r.t0)
        part_ms += [(q.finished - q.started) * 1e3 for q in part_requests]
        complete_s += [
            q.finished - q.started
            for q in r.requests
            if q.method == "POST" and "uploadId" in q.query
        ]
    cores = [s3b.CpuMeter.cores(*r.extra["cpu"]) for r in rounds]
    cpu = {k: statistics.median(c[k] for c in cores) for k in cores[0]}
    median_s = statistics.median(seconds)
    result = {
        "concurrency": concurrency,
        "median_s": median_s,
        "seconds": seconds,
        "mb_per_s": len(upload_data) / s3b.MB / median_s,
        "best_mb_per_s": len(upload_data) / s3b.MB / min(seconds),
        "parts": max(parts),
        "peak_in_flight": max(r.extra.get("peak_in_flight", 0) for r in rounds),
        "part_ms_median": statistics.median(part_ms),
        "complete_s": statistics.median(complete_s),
        "parts_phase_s": statistics.median(parts_phase_s),
        "parts_mb_per_s": len(upload_data) / s3b.MB / statistics.median(parts_phase_s),
        "cpu": cpu,
        "rounds": len(rounds),
    }
    s3b.RESULTS[f"upload c={concurrency}"] = result
    benchmark.extra_info.update(
        {
            "scale": s3b.SCALE,
            "latency_s": s3b.LATENCY_S,
            "bytes": len(upload_data),
            "part_size": s3b.PART_SIZE,
            "mb_per_s": round(result["mb_per_s"], 1),
            "peak_in_flight": result["peak_in_flight"],
            "round_seconds": seconds,
            **{f"cores_{k}": round(v, 2) for k, v in cpu.items()},
        }
    )
    assert result["peak_in_flight"] >= min(concurrency, max(parts)), (
        f"never more than {result['peak_in_flight']} requests in flight with "
        f"s3.upload.concurrency={concurrency}"
    )
