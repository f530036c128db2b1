"""The report of the file benchmarks (``test_compress.py``, ``test_read_seek.py``): throughput
and ratio against the peers, bytes read by each seek method, and the targets of the issue.

``conftest.py`` renders it at the end of the session into ``results/latest.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from benchmarks import report as rp
from benchmarks.support import (
    CORPUS_BYTES,
    K_BGZIP_1,
    K_DECODE_2T,
    K_FAST_1T,
    K_FAST_2T,
    K_MEM_2T,
    K_ONE_BLOCK,
    K_PIGZ_1,
    K_PIGZ_6,
    K_RAW_ISAL_2T,
    K_SCAN,
    K_SEEK,
    K_SMALL_2T,
    MB,
    SEEK_FILE_BYTES,
    GiB,
    Result,
)

TITLE = "blockgz benchmark results"
PACKAGES = ("isal", "deflate", "numpy", "pgzip", "mgzip")
TOOLS = (("pigz", "--version"), ("bgzip", "--version"))

Results = Mapping[str, Result]


# -- targets --------------------------------------------------------------------------------
def _speedup(a: str, b: str, threshold: float) -> Callable[[Results], rp.Outcome]:
    def check(r: Results) -> rp.Outcome:
        x = r[a].mb_per_s / r[b].mb_per_s
        measured = f"{x:.2f}× ({r[a].mb_per_s:,.0f} vs {r[b].mb_per_s:,.0f} MB/s)"
        return rp.at_least(measured, x, threshold, f"≥ {threshold:g}×")

    return check


def _ratio_at_least(a: str, b: str) -> Callable[[Results], rp.Outcome]:
    def check(r: Results) -> rp.Outcome:
        ra, rb = r[a].ratio, r[b].ratio
        return rp.at_least(f"{ra:.3f} vs {rb:.3f} ({ra / rb:.3f}×)", ra / rb, 1.0, "≥ 1.000×")

    return check


def _one_block(r: Results) -> rp.Outcome:
    ms = r[K_ONE_BLOCK].seconds * 1e3
    return rp.at_most(f"{ms:.3f} ms ({r[K_ONE_BLOCK].mb_per_s:,.0f} MB/s)", ms, 2.0, "≤ 2 ms")


def _decode_2t(r: Results) -> rp.Outcome:
    gb_per_s = r[K_DECODE_2T].mb_per_s / 1000
    return rp.at_least(f"{gb_per_s:.2f} GB/s", gb_per_s, 1.0, "≥ 1 GB/s")


def _seek_time(r: Results) -> rp.Outcome:
    ms = r[K_SEEK].seconds * 1e3
    return rp.at_most(f"{ms:.2f} ms", ms, 5.0, "≤ 5 ms")


def _seek_speedup(r: Results) -> rp.Outcome:
    scan, seek = r[K_SCAN].seconds, r[K_SEEK].seconds
    measured = f"{scan / seek:,.0f}× ({scan * 1e3:,.0f} ms vs {seek * 1e3:.2f} ms)"
    return rp.at_least(measured, scan / seek, 100, "≥ 100×")


TARGETS: list[rp.Target] = [
    rp.Target(
        "fast (isal-1, 1 MiB, 2t) throughput vs pigz -p2 -1",
        (K_FAST_2T, K_PIGZ_1),
        _speedup(K_FAST_2T, K_PIGZ_1, 4),
    ),
    rp.Target(
        "fast ratio vs pigz -p2 -1", (K_FAST_2T, K_PIGZ_1), _ratio_at_least(K_FAST_2T, K_PIGZ_1)
    ),
    rp.Target(
        "fast (isal-1, 1 MiB, 2t) throughput vs bgzip -@2 -l1",
        (K_FAST_2T, K_BGZIP_1),
        _speedup(K_FAST_2T, K_BGZIP_1, 3),
    ),
    rp.Target(
        "fast ratio vs bgzip -@2 -l1",
        (K_FAST_2T, K_BGZIP_1),
        _ratio_at_least(K_FAST_2T, K_BGZIP_1),
    ),
    rp.Target(
        "fast: 2 threads vs 1 thread", (K_FAST_2T, K_FAST_1T), _speedup(K_FAST_2T, K_FAST_1T, 1.7)
    ),
    rp.Target(
        "in-memory writer (2t) vs raw isal on the same blocks (2t)",
        (K_MEM_2T, K_RAW_ISAL_2T),
        _speedup(K_MEM_2T, K_RAW_ISAL_2T, 0.9),
    ),
    rp.Target(
        "small (libdeflate-5, 1 MiB, 2t) ratio vs pigz -p2 -6",
        (K_SMALL_2T, K_PIGZ_6),
        _ratio_at_least(K_SMALL_2T, K_PIGZ_6),
    ),
    rp.Target(
        "small throughput vs pigz -p2 -6",
        (K_SMALL_2T, K_PIGZ_6),
        _speedup(K_SMALL_2T, K_PIGZ_6, 2),
    ),
    rp.Target("decode one 1 MiB block (read_block)", (K_ONE_BLOCK,), _one_block),
    rp.Target("whole-file decode, 2 threads", (K_DECODE_2T,), _decode_2t),
    rp.Target("seek one record from a cold open (~1 GiB file)", (K_SEEK,), _seek_time),
    rp.Target("seek vs decompressing from the start", (K_SEEK, K_SCAN), _seek_speedup),
]


# -- sections -------------------------------------------------------------------------------
def _other_load(r: Result) -> float | None:
    return r.extra.get("other_load")


def _best_mb_per_s(r: Result) -> float | None:
    return r.uncompressed / MB / r.min_seconds if r.uncompressed else None


def _group(results: Results, group: str) -> list[Result]:
    return [r for r in results.values() if r.group == group]


def head_section(results: Results) -> list[str]:
    lines = rp.report_head(TITLE, "The targets are defined at scale 1.0.")
    detail = (
        f": corpus {CORPUS_BYTES / MB:,.1f} MB of NDJSON events, "
        f"seek file {SEEK_FILE_BYTES / GiB:.2f} GiB uncompressed"
    )
    lines += rp.run_lines(rp.versions_line(PACKAGES, TOOLS), detail)
    lines += [
        "- times are medians over the rounds (best MB/s: the fastest round); MB/s = 10^6 bytes "
        "of *uncompressed* data per second; ratio = uncompressed / compressed bytes (data file "
        "only, sidecar not counted); margin: distance past the threshold, negative = shortfall",
        "- other load: CPU cores used by anything else (other processes, kernel threads, "
        "hypervisor steal) while the benchmark ran, from /proc/stat minus this process and its "
        f"children; above {rp.DISTURBED_CORES:g} the row is marked ⚠ and should be re-run",
        "",
    ]
    disturbed = [r.key for r in results.values() if rp.is_disturbed(_other_load(r))]
    return lines + rp.disturbed_warning(disturbed)


def compression_section(results: Results) -> list[str]:
    rows = _group(results, "compress")
    if not rows:
        return []
    pigz, bgzip = results.get(K_PIGZ_1), results.get(K_BGZIP_1)
    header = [
        "benchmark",
        "MB/s",
        "best MB/s",
        "ratio",
        "output MB",
        "speed vs pigz -p2 -1",
        "speed vs bgzip -@2 -l1",
        "median ms",
        "rounds",
        "other load",
    ]
    cells = [
        [
            r.key,
            rp.fmt(r.mb_per_s, ",.0f"),
            rp.fmt(_best_mb_per_s(r), ",.0f"),
            rp.fmt(r.ratio, ".3f"),
            rp.fmt(r.compressed / MB if r.compressed else None, ",.1f"),
            rp.times(r.mb_per_s, pigz.mb_per_s if pigz else None),
            rp.times(r.mb_per_s, bgzip.mb_per_s if bgzip else None),
            rp.fmt(r.seconds * 1e3, ",.0f"),
            str(r.rounds),
            rp.load_cell(_other_load(r)),
        ]
        for r in rows
    ]
    return ["## Compression", "", *rp.table(header, cells), ""]


def decompression_section(results: Results) -> list[str]:
    rows = _group(results, "read")
    if not rows:
        return []
    header = ["benchmark", "median ms", "MB/s", "best MB/s", "rounds", "other load"]
    cells = [
        [
            r.key,
            rp.fmt(r.seconds * 1e3, ",.3f"),
            rp.fmt(r.mb_per_s, ",.0f"),
            rp.fmt(_best_mb_per_s(r), ",.0f"),
            str(r.rounds),
            rp.load_cell(_other_load(r)),
        ]
        for r in rows
    ]
    return ["## Decompression", "", *rp.table(header, cells), ""]


def seek_section(results: Results) -> list[str]:
    rows = _group(results, "seek")
    if not rows:
        return []
    header = ["method", "median ms", "bytes read", "what is read", "rounds", "other load"]
    cells = [
        [
            r.key,
            rp.fmt(r.seconds * 1e3, ",.2f"),
            rp.fmt(r.extra.get("bytes_read"), ","),
            r.extra.get("reads", ""),
            str(r.rounds),
            rp.load_cell(_other_load(r)),
        ]
        for r in rows
    ]
    return ["## Seek (one record from the middle of the file)", "", *rp.table(header, cells), ""]


def render(results: Results) -> str:
    lines = head_section(results)
    lines += compression_section(results)
    lines += decompression_section(results)
    lines += seek_section(results)
    lines += rp.targets_section(TARGETS, results)
    return "\n".join(lines)
