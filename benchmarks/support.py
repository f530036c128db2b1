"""Shared machinery of the benchmark suite: scale, cached inputs and measuring.

Every file benchmark goes through :func:`measure`, which runs it in pedantic mode, fills
``benchmark.extra_info`` and records a :class:`Result`. At the end of the session
``conftest.py`` turns the results into one Markdown report (:mod:`benchmarks.file_report`):
throughput and ratio against the peers, and PASS/FAIL for each of its targets. The pieces
every report shares are in :mod:`benchmarks.report`.
"""

from __future__ import annotations

import hashlib
import math
import mmap
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import blockgz
from blockgz import sample
from blockgz.objects.compress import compress_file
from blockgz.objects.indexed import IndexedReader

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
        IndexedReader.open_file(path).close()  # exists, and the sidecar loads and matches
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
