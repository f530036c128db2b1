"""Helpers of the S3 benchmarks (``test_s3_bench.py``): sizes, request accounting, CPU, report.

Kept apart from ``support.py`` (the file-based suite): the S3 benchmarks only borrow its
cached corpus. Their report goes to ``results/s3.md`` (full scale only) and to the terminal;
its shared pieces (tables, targets, head) are in :mod:`benchmarks.report`.
"""

from __future__ import annotations

import math
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
BLOCK_SIZE = MiB
PART_SIZE = 5 * MiB  # S3's minimum part size
WRITE_CHUNK = MiB
SEEK_OBJECT_BYTES = max(16 * MiB, int(GiB * SCALE))  # uncompressed
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
    """CPU seconds used by this process (client + proxy threads), by moto, and by the rest."""

    def __init__(self, moto_pid: int | None):
        self.me = psutil.Process()
        self.moto = psutil.Process(moto_pid) if moto_pid else None

    def snapshot(self) -> tuple[float, float, float, float]:
        mine = self.me.cpu_times()
        moto = self.moto.cpu_times() if self.moto else None
        machine = psutil.cpu_times()
        busy = machine.user + machine.nice + machine.system + machine.irq + machine.softirq
        busy += getattr(machine, "steal", 0.0)
        return (
            mine.user + mine.system,
            (moto.user + moto.system) if moto else 0.0,
            busy,
            time.monotonic(),
        )

    @staticmethod
    def cores(start, end) -> dict[str, float]:
        """Average cores used between two snapshots: ours, moto's, everything else's."""
        wall = max(1e-9, end[3] - start[3])
        mine, moto, busy = (end[i] - start[i] for i in range(3))
        return {
            "client_proxy_cores": mine / wall,
            "moto_cores": moto / wall,
            "other_cores": max(0.0, busy - mine - moto) / wall,
        }


# -- the report ---------------------------------------------------------------------------
RESULTS: dict[str, dict[str, Any]] = {}
PACKAGES = ("boto3", "moto", "isal", "werkzeug")
Results = dict[str, dict[str, Any]]


def _other_cores(r: dict[str, Any]) -> float | None:
    """CPU used by anything but moto and this process while the benchmark ran."""
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


def _seek_speedup(results: Results) -> rp.Outcome:
    seek, scan = results["seek"]["median_s"], results["scan"]["median_s"]
    return rp.at_least(
        f"{scan / seek:,.1f}× ({rp.ms(scan)} ms vs {rp.ms(seek)} ms)",
        scan / seek,
        SEEK_SPEEDUP_TARGET,
        f"≥ {SEEK_SPEEDUP_TARGET:g}×",
    )


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
        f"seek vs whole-object scan, ~{SEEK_OBJECT_BYTES / GiB:.2f} GiB",
        ("seek", "scan"),
        _seek_speedup,
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
        "moto's S3 server runs in a child process (`MotoS3(in_process=False)`); every "
        "benchmarked request goes through `FaultProxy` (a threaded Python reverse proxy in "
        f"the test process) with `latency_s={LATENCY_S}`: {LATENCY_S * 1e3:.0f} ms of sleep "
        "added to every request, about one real S3 round trip. Bandwidth is not limited.",
        "",
        *rp.run_lines(rp.versions_line(PACKAGES)),
        "- times: median over the measured rounds (warm-up round excluded); MB = 10^6 bytes",
        "- other cores: CPU used by anything but moto and this process while a benchmark ran "
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
        f"Object: `{obj['key']}`, {obj['uncompressed'] / GiB:.2f} GiB uncompressed "
        f"({obj['records']:,} records), {obj['compressed'] / MB:,.1f} MB block-GZIP "
        f"(isal fast preset, {BLOCK_SIZE // KiB} KiB blocks, {obj['blocks']:,} blocks), "
        f"index sidecar {obj['index_bytes']:,} B. Built once per session with "
        "`BlockGzipUpload` (the data object as a multipart upload, then its sidecar) straight "
        f"to moto in {obj['build_s']:.1f} s. Target record: offset {obj['target']:,} (the "
        "middle).",
        "",
        "- **blockgz cold seek**: `open_archive(...)` (new Archive, so a new boto3 "
        "client, empty caches) → `next(archive.seek(topic, 0, offset, count=1))`",
        "- **whole-object scan**: new store/client, one `GetObject` without Range, "
        "streamed through `isal.igzip.IGzipFile`, counting newlines until the target "
        "record; the body is closed right there (the scan does not download the second "
        "half, which makes the baseline faster, so the ratio is conservative)",
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
        f"{r['cpu']['moto_cores']:.2f} / {r['cpu']['client_proxy_cores']:.2f}",
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
    "cores moto / client+proxy",
    "other cores",
)


def seek_table_section(seek: dict[str, Any], scan: dict[str, Any]) -> list[str]:
    rows = [_seek_row("blockgz cold open + seek", seek), _seek_row("whole-object GET + scan", scan)]
    return [
        *rp.table(SEEK_HEADER, rows),
        "",
        f"Speedup: **{scan['median_s'] / seek['median_s']:,.1f}×** in time, "
        f"**{scan['bytes'] / max(1, seek['bytes']):,.0f}×** fewer bytes "
        "(bytes = response bodies the proxy sent in that round; the scan's count "
        "includes what was in flight when the body was closed).",
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
        "Diagnostics (measured directly against moto, no proxy, no added latency):",
        "",
        "- creating the store (`open_store`, i.e. a new boto3 client): "
        f"median {rp.ms(diag['client_s'])} ms",
        f"- ranged GET of the target block ({seek['block_bytes']:,} B) of the "
        f"{obj['compressed'] / MB:,.0f} MB object: median {rp.ms(diag['big_range_s'])} "
        f"ms; the same range of a {diag['small_object_bytes'] / MiB:.0f} MiB object: "
        f"{rp.ms(diag['small_range_s'])} ms. moto reads the **whole** object into memory "
        "to answer any ranged GET (`FakeKey.value`), so the difference is a moto "
        "artifact that real S3 does not have.",
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
            "leaves Nagle's algorithm on, so a small body waits for the client's "
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
    obj, seek, scan = results.get("object"), results.get("seek"), results.get("scan")
    lines = seek_intro_section(obj) if obj else []
    if obj and seek and scan:
        lines += seek_table_section(seek, scan)
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
    "moto cores",
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
        f"{r['cpu']['moto_cores']:.2f}",
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
        "request); timed from the first `write()` to `close()` returning (Create + "
        "parts + Complete). The store (boto3 client) is created before the clock "
        "starts; the object is deleted between rounds.",
        "",
        *rp.table(UPLOAD_HEADER, [_upload_row(r, serial) for r in uploads]),
        "",
        "'cores' = CPU seconds / wall seconds over the timed rounds, from psutil: moto's "
        "child process; this process (boto3 client threads + the proxy's threads); "
        "everything else on the machine. 'median UploadPart ms' is the proxy's view of one "
        "part request, from its headers arriving to the response sent (includes the 20 ms "
        "sleep). 'parts phase' = from the first `write()` to the last UploadPart "
        "answered, i.e. without CompleteMultipartUpload, which moto spends "
        "'Complete ms' on (it reads every part back, concatenates them in Python and "
        "writes the result to a temporary file).",
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
    seek, scan, diag = results.get("seek"), results.get("scan"), results.get("diagnostics")
    notes = []
    if seek and scan and diag:
        notes += _seek_notes(results["object"], seek, scan, diag)
    if seek and diag:
        notes += _blockgz_findings(seek, diag)
    serial, parallel = results.get("upload c=1"), results.get("upload c=4")
    if serial and parallel:
        notes.append(_upload_note(serial, parallel))
    return notes


def _seek_notes(obj: dict, seek: dict, scan: dict, diag: dict) -> list[str]:
    moto_extra = max(0.0, diag["big_range_s"] - diag["small_range_s"])
    adjusted = seek["median_s"] - moto_extra
    requests = sum(seek["kinds"].values())
    floor = 3 * LATENCY_S
    made = ", ".join(f"{v} {k}" for k, v in seek["kinds"].items() if v)
    seek_note = (
        f"**Seek.** A cold seek made {requests} requests ({made}); "
        f"the bytes are {seek['bytes']:,} B, i.e. the LIST page + the index "
        f"({seek['index_bytes']:,} B) + one block ({seek['block_bytes']:,} B), against "
        f"{scan['bytes']:,} B for the scan. The time is another matter: of the "
        f"{rp.ms(seek['median_s'])} ms, about {rp.ms(moto_extra)} ms is moto reading the whole "
        f"{obj['compressed'] / MB:,.0f} MB object to serve one ranged GET "
        f"(seek minus that: ~{rp.ms(adjusted)} ms, {scan['median_s'] / adjusted:.1f}× the "
        f"scan — an estimate, not a measurement) and ~{rp.ms(diag['client_s'])} ms is "
        "creating a new boto3 client before the first request."
    )
    made_here = (
        ""
        if requests == 3
        else f" ({scan['median_s'] / (requests * LATENCY_S):.0f}× with the {requests} "
        "requests made here)"
    )
    bound_note = (
        f"**Why ≥ {SEEK_SPEEDUP_TARGET:g}× cannot be met here.** Any index-based seek "
        f"needs at least 3 sequential round trips (LIST, index, block) = "
        f"{rp.ms(floor)} ms at {LATENCY_S * 1e3:.0f} ms each, even with zero local cost; "
        f"the scan baseline takes {rp.ms(scan['median_s'])} ms, so the best possible ratio "
        f"is {scan['median_s'] / floor:.0f}×{made_here}. {SEEK_SPEEDUP_TARGET:g}× would need "
        f"the scan to take ≥ {SEEK_SPEEDUP_TARGET * floor:.1f} s, i.e. a much slower download "
        "than loopback moto gives, or a seek target expressed in round trips and bytes rather "
        "than a time ratio."
    )
    return [seek_note, bound_note]


def _blockgz_findings(seek: dict, diag: dict) -> list[str]:
    """Costs of a cold seek that blockgz itself could avoid, when this run shows them."""
    findings = []
    head = dict(seek["phases"]).get("HEAD index")
    if head is not None:
        findings.append(
            f"the index costs two sequential requests, a HEAD ({rp.ms(head)} ms here) then a "
            "GET (`Archive.index` → `blockgz.objects.indexed.load_index` → `ObjectStore.get`). "
            "One plain GetObject would do (the LIST already gave the sidecar's size), saving "
            "a round trip on every cold seek"
        )
    if diag["client_s"] > 3 * diag["shared_client_s"]:
        findings.append(
            f"every `open_store` (so every `open_archive`) took {rp.ms(diag['client_s'])} ms "
            f"to make its boto3 client, against {rp.ms(diag['shared_client_s'])} ms for a "
            "client from an existing session: the session (botocore's service model) is "
            "not being reused across stores"
        )
    if not findings:
        return []
    return ["**Found in blockgz (not fixed here):** " + "; ".join(findings) + "."]


def _upload_note(serial: dict, parallel: dict) -> str:
    complete_share = parallel["complete_s"] / parallel["median_s"]
    moto_cores = parallel["cpu"]["moto_cores"]
    saturated = (
        "one Python process behind one GIL, so effectively saturated"
        if moto_cores >= 0.85
        else "not saturated on its own, but sharing 2 cores with the proxy and the client"
    )
    return (
        f"**Upload.** The uploader does overlap its parts: the proxy saw "
        f"{parallel['peak_in_flight']} UploadPart requests in flight at "
        f"s3.upload.concurrency=4 ({serial['peak_in_flight']} when serial). What limits "
        f"the gain is moto: its process ran at {moto_cores:.2f} cores with 4 parts in "
        f"flight ({saturated}), while this process (boto3 + proxy) used "
        f"{parallel['cpu']['client_proxy_cores']:.2f}. A part took "
        f"{serial['part_ms_median']:.0f} ms at the proxy when serial "
        f"({LATENCY_S * 1e3:.0f} ms of it the added latency) and "
        f"{parallel['part_ms_median']:.0f} ms with 4 in flight: the "
        f"~{serial['part_ms_median'] - LATENCY_S * 1e3:.0f} ms of work per 5 MiB part "
        "does not overlap. On top, moto spends "
        f"{parallel['complete_s']:.2f} s on CompleteMultipartUpload (concatenating the "
        f"parts), whatever the concurrency: {complete_share:.0%} "
        f"of the parallel upload's {parallel['median_s']:.2f} s. Without it (parts phase) "
        f"parallel is {parallel['parts_mb_per_s'] / serial['parts_mb_per_s']:.2f}× serial. "
        "Both costs are moto's (one Python process holding every object in memory), not "
        "the uploader's, so this harness understates what parallel parts gain against a "
        "real S3 endpoint — which this run does not measure."
    )
