"""Shared machinery of the benchmark suite: scale, cached inputs, measuring, and the report.

Every benchmark goes through :func:`measure`, which runs it in pedantic mode, fills
``benchmark.extra_info`` and records a :class:`Result`. At the end of the session
``conftest.py`` turns the results into one Markdown report (:func:`render_report`):
throughput and ratio against the peers, and PASS/FAIL for each target in :data:`TARGETS`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.metadata
import math
import mmap
import os
import platform
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import blockgz
from blockgz import sample
from blockgz.blockfile import BlockGzipFile
from blockgz.files import compress_file

MB = 1_000_000  # throughput is reported in MB/s of 10^6 bytes
KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = ROOT / ".bench-cache"
RESULTS_PATH = Path(__file__).resolve().parent / "results" / "latest.md"

FULL_CORPUS_BYTES = 200 * MB
FULL_SEEK_FILE_BYTES = GiB


def _read_scale() -> float:
    raw = os.environ.get("BLOCKGZ_BENCH_SCALE", "1.0")
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise pytest.UsageError(f"BLOCKGZ_BENCH_SCALE must be a positive number, got {raw!r}")
    return value


SCALE = _read_scale()
# The targets are defined on the full-size inputs; smaller runs only check the plumbing.
MEANINGFUL = SCALE >= 1.0
CORPUS_BYTES = max(256 * KiB, int(FULL_CORPUS_BYTES * SCALE))
SEEK_FILE_BYTES = max(4 * CORPUS_BYTES, int(FULL_SEEK_FILE_BYTES * SCALE))


# -- inputs ---------------------------------------------------------------------------------
def _generator_key() -> str:
    """Changes whenever the record generator does, so a stale cached corpus is never reused."""
    return hashlib.sha256(Path(sample.__file__).read_bytes()).hexdigest()[:10]


def corpus_path() -> Path:
    """The NDJSON corpus of about :data:`CORPUS_BYTES`, generated once and cached."""
    path = CACHE_DIR / f"corpus-{CORPUS_BYTES}-{_generator_key()}.ndjson"
    if path.exists():
        return path
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        sample.write_corpus(tmp, CORPUS_BYTES)
        _truncate_at_line(tmp, CORPUS_BYTES)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _truncate_at_line(path: Path, limit: int) -> None:
    """Cut ``path`` after the last newline at or before ``limit`` bytes (keep one record)."""
    with open(path, "r+b") as f:
        if os.fstat(f.fileno()).st_size <= limit:
            return
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            cut = mapped.rfind(b"\n", 0, limit) + 1 or mapped.find(b"\n") + 1
        f.truncate(cut)


def seek_file_path() -> Path:
    """A ~1 GiB (times the scale) block-GZIP file made of the corpus repeated, cached.

    Records are not generated afresh (too slow): the corpus is written ~5 times over,
    then the file is compressed once with the default settings (fast, 1 MiB, 2 threads).
    """
    corpus = corpus_path()
    key = f"seek-{SEEK_FILE_BYTES}-{_generator_key()}-{blockgz.__version__}"
    path = CACHE_DIR / f"{key}.ndjson.gz"
    try:
        BlockGzipFile(path).close()  # exists, and the sidecar loads and matches
        return path
    except Exception:
        pass
    tmp = CACHE_DIR / f".{key}.{os.getpid()}.ndjson"
    try:
        _replicate(corpus, tmp, SEEK_FILE_BYTES)
        compress_file(tmp, path, threads=2)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _replicate(corpus: Path, dst: Path, size: int) -> None:
    """Write whole copies of ``corpus``, then a line-aligned prefix, up to ``size`` bytes."""
    data = corpus.read_bytes()
    with open(dst, "wb") as out:
        left = size
        while left >= len(data):
            out.write(data)
            left -= len(data)
        cut = data.rfind(b"\n", 0, left) + 1
        out.write(memoryview(data)[:cut])


def cut_blocks(data: bytes, chunks) -> list[memoryview]:
    """Slice ``data`` into exactly the blocks an index describes (no copies)."""
    view, blocks, pos = memoryview(data), [], 0
    for chunk in chunks:
        blocks.append(view[pos : pos + chunk.byte_length_uncompressed])
        pos += chunk.byte_length_uncompressed
    if pos != len(data):
        raise AssertionError(f"the index covers {pos} bytes of a {len(data)}-byte corpus")
    return blocks


def remove(*paths: Path) -> None:
    for path in paths:
        Path(path).unlink(missing_ok=True)


def require_tool(name: str) -> str:
    """Path of a peer command-line tool, or skip the benchmark saying how to get it."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"peer tool {name!r} is not installed (scripts/install-tools installs it)")
    return path


class NullSink:
    """A file object that only counts what is written to it."""

    def __init__(self) -> None:
        self.size = 0

    def write(self, data) -> int:
        n = len(data)
        self.size += n
        return n


_PROC_IO = Path("/proc/self/io")


def _rchar() -> int | None:
    try:
        for line in _PROC_IO.read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def bytes_read_by(fn: Callable[[], Any]) -> int | None:
    """Bytes this process read through read()/pread() while ``fn`` ran (Linux ``rchar``)."""
    start = _rchar()
    if start is None:
        return None
    baseline = _rchar() - start  # what reading /proc/self/io itself costs
    start = _rchar()
    fn()
    end = _rchar()
    return max(0, end - start - baseline)


# -- interference --------------------------------------------------------------------------
_CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
DISTURBED_CORES = 0.2  # other processes (or the hypervisor) using more than this is flagged


def _cpu_snapshot() -> tuple[float, float, float] | None:
    """(CPU seconds busy machine-wide incl. steal, CPU seconds of this process and its
    reaped children, wall seconds); ``None`` off Linux."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
        user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[1:9])
    except (OSError, ValueError):
        return None
    own = os.times()
    return (
        (user + nice + system + irq + softirq + steal) / _CLK_TCK,
        own.user + own.system + own.children_user + own.children_system,
        time.monotonic(),
    )


def other_load(start, end) -> float | None:
    """Average CPU cores used by anything but this benchmark between two snapshots."""
    if start is None or end is None or end[2] <= start[2]:
        return None
    return max(0.0, ((end[0] - start[0]) - (end[1] - start[1])) / (end[2] - start[2]))


# -- measuring ------------------------------------------------------------------------------
@dataclass
class Result:
    """One benchmark's outcome; ``uncompressed`` is the volume throughput is counted on."""

    key: str
    group: str
    tool: str
    seconds: float  # median over the rounds
    min_seconds: float
    rounds: int
    uncompressed: int | None = None
    compressed: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def mb_per_s(self) -> float | None:
        if not self.uncompressed or not self.seconds:
            return None
        return self.uncompressed / MB / self.seconds

    @property
    def ratio(self) -> float | None:
        if not self.uncompressed or not self.compressed:
            return None
        return self.uncompressed / self.compressed


RESULTS: dict[str, Result] = {}


def measure(
    benchmark,
    key: str,
    fn: Callable[..., Any],
    *,
    group: str,
    tool: str,
    uncompressed: int | None = None,
    compressed: Callable[[Any], int] | int | None = None,
    setup: Callable[[], Any] | None = None,
    rounds: int = 5,
    warmup_rounds: int = 1,
    direction: str = "compress",
    **extra: Any,
) -> Result | None:
    """Time ``fn`` in pedantic mode and record it under ``key``.

    ``compressed`` is the compressed size, or a function of ``fn``'s return value that
    gives it. ``direction`` says which of the two is the input, for ``extra_info``.
    """
    before = _cpu_snapshot()
    value = benchmark.pedantic(
        fn, setup=setup, rounds=rounds, warmup_rounds=warmup_rounds, iterations=1
    )
    others = other_load(before, _cpu_snapshot())
    if callable(compressed):
        compressed = compressed(value)
    stats = getattr(benchmark.stats, "stats", None) if benchmark.stats else None
    if stats is None:  # --benchmark-disable: ran once, nothing to report
        return None
    result = Result(
        key,
        group,
        tool,
        stats.median,
        stats.min,
        rounds,
        uncompressed,
        compressed,
        {**extra, "other_load": None if others is None else round(others, 2)},
    )
    bytes_in, bytes_out = (
        (uncompressed, compressed) if direction == "compress" else (compressed, uncompressed)
    )
    benchmark.extra_info.update(
        {
            "name": key,
            "peer": tool,
            "bytes_in": bytes_in,
            "bytes_out": bytes_out,
            "ratio": round(result.ratio, 4) if result.ratio else None,
            "mb_per_s": round(result.mb_per_s, 1) if result.mb_per_s else None,
            "scale": SCALE,
            "other_load_cores": result.extra["other_load"],
            **extra,
        }
    )
    RESULTS[key] = result
    return result


def size_label(n: int) -> str:
    if n % MiB == 0:
        return f"{n // MiB}MiB"
    if n % KiB == 0:
        return f"{n // KiB}KiB"
    return f"{n}B"


def blockgz_key(preset: str, block_size: int, threads: int) -> str:
    return f"blockgz {preset} {size_label(block_size)} {threads}t"


# Rows the targets refer to.
K_FAST_2T = blockgz_key("fast", MiB, 2)
K_FAST_1T = blockgz_key("fast", MiB, 1)
K_SMALL_2T = blockgz_key("small", MiB, 2)
K_PIGZ_1 = "pigz -p2 -1"
K_PIGZ_6 = "pigz -p2 -6"
K_BGZIP_1 = "bgzip -@2 -l1"
K_BGZIP_6 = "bgzip -@2 -l6"
K_RAW_ISAL_1T = "raw isal-1 1MiB 1t"
K_RAW_ISAL_2T = "raw isal-1 1MiB 2t"
K_MEM_1T = "blockgz in-memory fast 1MiB 1t"
K_MEM_2T = "blockgz in-memory fast 1MiB 2t"
K_ONE_BLOCK = "read_block (one 1MiB block)"
K_DECODE_1T = "whole-file decode 1t"
K_DECODE_2T = "whole-file decode 2t"
K_IGZIP_STREAM = "igzip stream decode 1t (reference)"
K_SEEK = "blockgz cold open + seek"
K_SCAN = "decompress from start to the record"


# -- targets --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Target:
    """A goal from the issue: ``measure`` returns (measured text, required text, margin).

    ``margin`` is how far the measurement is past the threshold, as a fraction of it:
    ≥ 0 passes (headroom), < 0 fails (shortfall).
    """

    name: str
    needs: tuple[str, ...]
    measure: Callable[[dict[str, Result]], tuple[str, str, float]]


def _speedup(a: str, b: str, at_least: float) -> Callable[[dict[str, Result]], tuple]:
    def check(r: dict[str, Result]) -> tuple[str, str, bool]:
        x = r[a].mb_per_s / r[b].mb_per_s
        return (
            f"{x:.2f}× ({r[a].mb_per_s:,.0f} vs {r[b].mb_per_s:,.0f} MB/s)",
            f"≥ {at_least:g}×",
            x / at_least - 1,
        )

    return check


def _ratio_at_least(a: str, b: str) -> Callable[[dict[str, Result]], tuple]:
    def check(r: dict[str, Result]) -> tuple[str, str, bool]:
        ra, rb = r[a].ratio, r[b].ratio
        return f"{ra:.3f} vs {rb:.3f} ({ra / rb:.3f}×)", "≥ 1.000×", ra / rb - 1

    return check


def _one_block(r: dict[str, Result]) -> tuple[str, str, bool]:
    ms = r[K_ONE_BLOCK].seconds * 1e3
    return f"{ms:.3f} ms ({r[K_ONE_BLOCK].mb_per_s:,.0f} MB/s)", "≤ 2 ms", 2.0 / ms - 1


def _decode_2t(r: dict[str, Result]) -> tuple[str, str, bool]:
    rate = r[K_DECODE_2T].mb_per_s
    return f"{rate / 1000:.2f} GB/s", "≥ 1 GB/s", rate / 1000 - 1


def _seek_time(r: dict[str, Result]) -> tuple[str, str, bool]:
    ms = r[K_SEEK].seconds * 1e3
    return f"{ms:.2f} ms", "≤ 5 ms", 5.0 / ms - 1


def _seek_speedup(r: dict[str, Result]) -> tuple[str, str, bool]:
    x = r[K_SCAN].seconds / r[K_SEEK].seconds
    return (
        f"{x:,.0f}× ({r[K_SCAN].seconds * 1e3:,.0f} ms vs {r[K_SEEK].seconds * 1e3:.2f} ms)",
        "≥ 100×",
        x / 100 - 1,
    )


TARGETS: list[Target] = [
    Target(
        "fast (isal-1, 1 MiB, 2t) throughput vs pigz -p2 -1",
        (K_FAST_2T, K_PIGZ_1),
        _speedup(K_FAST_2T, K_PIGZ_1, 4),
    ),
    Target(
        "fast ratio vs pigz -p2 -1", (K_FAST_2T, K_PIGZ_1), _ratio_at_least(K_FAST_2T, K_PIGZ_1)
    ),
    Target(
        "fast (isal-1, 1 MiB, 2t) throughput vs bgzip -@2 -l1",
        (K_FAST_2T, K_BGZIP_1),
        _speedup(K_FAST_2T, K_BGZIP_1, 3),
    ),
    Target(
        "fast ratio vs bgzip -@2 -l1", (K_FAST_2T, K_BGZIP_1), _ratio_at_least(K_FAST_2T, K_BGZIP_1)
    ),
    Target(
        "fast: 2 threads vs 1 thread", (K_FAST_2T, K_FAST_1T), _speedup(K_FAST_2T, K_FAST_1T, 1.7)
    ),
    Target(
        "in-memory writer (2t) vs raw isal on the same blocks (2t)",
        (K_MEM_2T, K_RAW_ISAL_2T),
        _speedup(K_MEM_2T, K_RAW_ISAL_2T, 0.9),
    ),
    Target(
        "small (libdeflate-5, 1 MiB, 2t) ratio vs pigz -p2 -6",
        (K_SMALL_2T, K_PIGZ_6),
        _ratio_at_least(K_SMALL_2T, K_PIGZ_6),
    ),
    Target(
        "small throughput vs pigz -p2 -6", (K_SMALL_2T, K_PIGZ_6), _speedup(K_SMALL_2T, K_PIGZ_6, 2)
    ),
    Target("decode one 1 MiB block (read_block)", (K_ONE_BLOCK,), _one_block),
    Target("whole-file decode, 2 threads", (K_DECODE_2T,), _decode_2t),
    Target("seek one record from a cold open (~1 GiB file)", (K_SEEK,), _seek_time),
    Target("seek vs decompressing from the start", (K_SEEK, K_SCAN), _seek_speedup),
]


def evaluate_targets(results: dict[str, Result]) -> list[tuple[str, str, str, str, str]]:
    """(target, measured, required, margin, verdict) for every target."""
    rows = []
    for target in TARGETS:
        missing = [k for k in target.needs if k not in results]
        if missing:
            rows.append((target.name, "—", "", "", f"NOT RUN ({', '.join(missing)} missing)"))
            continue
        measured, required, margin = target.measure(results)
        verdict = "PASS" if margin >= 0 else "FAIL"
        if not MEANINGFUL:
            verdict += " (not meaningful at this scale)"
        rows.append((target.name, measured, required, f"{margin:+.1%}", verdict))
    return rows


# -- the report -----------------------------------------------------------------------------
def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def _fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _times(a: float | None, b: float | None) -> str:
    return "—" if not a or not b else f"{a / b:.2f}×"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _tool_version(argv: list[str]) -> str:
    if shutil.which(argv[0]) is None:
        return "not installed"
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    text = (done.stdout or done.stderr).strip().splitlines()
    return text[0] if text else "unknown"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024**2:.0f} GiB RAM"
    except OSError:
        pass
    return "RAM unknown"


def machine_line() -> str:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{cpus} CPUs ({_cpu_model()}), {_memory()}, Linux {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def versions_line() -> str:
    libs = ", ".join(
        f"{name} {_version(name)}" for name in ("isal", "deflate", "numpy", "pgzip", "mgzip")
    )
    return (
        f"blockgz {blockgz.__version__}; {libs}; {_tool_version(['pigz', '--version'])}; "
        f"{_tool_version(['bgzip', '--version'])}"
    )


def _is_disturbed(r: Result) -> bool:
    load = r.extra.get("other_load")
    return load is not None and load > DISTURBED_CORES


def _load(r: Result) -> str:
    load = r.extra.get("other_load")
    return "—" if load is None else f"{load:.2f}" + (" ⚠" if _is_disturbed(r) else "")


def render_report(results: dict[str, Result]) -> str:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# blockgz benchmark results", ""]
    if not MEANINGFUL:
        lines += [
            f"> **BLOCKGZ_BENCH_SCALE={SCALE:g}: smoke-test scale, the numbers and verdicts "
            "below are NOT meaningful.** The targets are defined at scale 1.0.",
            "",
        ]
    lines += [
        f"- run: {now}, `BLOCKGZ_BENCH_SCALE={SCALE:g}`: corpus {CORPUS_BYTES / MB:,.1f} MB "
        f"of NDJSON events, seek file {SEEK_FILE_BYTES / GiB:.2f} GiB uncompressed",
        f"- machine: {machine_line()}",
        f"- versions: {versions_line()}",
        "- times are medians over the rounds (best MB/s: the fastest round); MB/s = 10^6 bytes "
        "of *uncompressed* data per second; ratio = uncompressed / compressed bytes (data file "
        "only, sidecar not counted); margin: distance past the threshold, negative = shortfall",
        "- other load: CPU cores used by anything else (other processes, kernel threads, "
        "hypervisor steal) while the benchmark ran, from /proc/stat minus this process and its "
        f"children; above {DISTURBED_CORES:g} the row is marked ⚠ and should be re-run",
        "",
    ]
    disturbed = [r.key for r in results.values() if _is_disturbed(r)]
    if disturbed:
        lines += [
            f"> **⚠ {len(disturbed)} benchmark(s) ran while something else used the CPU "
            f"(> {DISTURBED_CORES:g} cores): {', '.join(disturbed)}. Their numbers are low; "
            "re-run on an idle machine.**",
            "",
        ]

    compress = [r for r in results.values() if r.group == "compress"]
    if compress:
        pigz = results.get(K_PIGZ_1)
        bgzip = results.get(K_BGZIP_1)
        rows = [
            [
                r.key,
                _fmt(r.mb_per_s, ",.0f"),
                _fmt(r.uncompressed / MB / r.min_seconds if r.uncompressed else None, ",.0f"),
                _fmt(r.ratio, ".3f"),
                _fmt(r.compressed / MB if r.compressed else None, ",.1f"),
                _times(r.mb_per_s, pigz.mb_per_s if pigz else None),
                _times(r.mb_per_s, bgzip.mb_per_s if bgzip else None),
                _fmt(r.seconds * 1e3, ",.0f"),
                str(r.rounds),
                _load(r),
            ]
            for r in compress
        ]
        lines += ["## Compression", ""]
        lines += _table(
            [
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
            ],
            rows,
        )
        lines.append("")

    read = [r for r in results.values() if r.group == "read"]
    if read:
        rows = [
            [
                r.key,
                _fmt(r.seconds * 1e3, ",.3f"),
                _fmt(r.mb_per_s, ",.0f"),
                _fmt(r.uncompressed / MB / r.min_seconds if r.uncompressed else None, ",.0f"),
                str(r.rounds),
                _load(r),
            ]
            for r in read
        ]
        lines += ["## Decompression", ""]
        lines += _table(
            ["benchmark", "median ms", "MB/s", "best MB/s", "rounds", "other load"], rows
        )
        lines.append("")

    seek = [r for r in results.values() if r.group == "seek"]
    if seek:
        rows = []
        for r in seek:
            read_bytes = r.extra.get("bytes_read")
            rows.append(
                [
                    r.key,
                    _fmt(r.seconds * 1e3, ",.2f"),
                    "—" if read_bytes is None else f"{read_bytes:,}",
                    r.extra.get("reads", ""),
                    str(r.rounds),
                    _load(r),
                ]
            )
        lines += ["## Seek (one record from the middle of the file)", ""]
        lines += _table(
            ["method", "median ms", "bytes read", "what is read", "rounds", "other load"], rows
        )
        lines.append("")

    lines += ["## Targets", ""]
    lines += _table(
        ["target", "measured", "required", "margin", "verdict"],
        [list(row) for row in evaluate_targets(results)],
    )
    lines.append("")
    return "\n".join(lines)


def report_head(title: str, reproduce: str, meaningful: bool, scale_note: str) -> list[str]:
    """The first lines of a results file: title, smoke-scale warning, how to reproduce."""
    lines = [f"# {title}", ""]
    if not meaningful:
        lines += [
            f"> **BLOCKGZ_BENCH_SCALE={SCALE:g}: smoke-test scale; numbers and verdicts are "
            f"NOT meaningful.** {scale_note}",
            "",
        ]
    return [*lines, "## Reproduce", "", "```sh", reproduce]


def publish_report(request, title: str, text: str, path: Path, written: bool) -> None:
    """Write ``text`` to ``path`` when ``written``, and print it at the end of the session."""
    if written:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    plugins = request.config.pluginmanager
    terminal = plugins.get_plugin("terminalreporter")
    capture = plugins.get_plugin("capturemanager")
    if terminal is None or capture is None:
        return
    where = path.relative_to(ROOT)
    with capture.global_and_fixture_disabled():
        terminal.write_line("")
        terminal.write_sep("=", title)
        for line in text.splitlines():
            terminal.write_line(line)
        terminal.write_line(
            f"(written to {where})"
            if written
            else f"({where} not written: only full-scale runs of every case are)"
        )
