"""blockzstd against block-GZIP and the ``zstd`` command line, on the JSON corpus, 2 threads.

Issue 29's targets, measured in one run (``results/zstd.md`` gets the table and verdicts):

* blockzstd at its fast level (zstd 1, 1 MiB blocks, 2 threads) vs blockgzip fast (ISA-L 1,
  1 MiB, 2 threads): compress >= 1.5x faster at >= the ratio; whole-file decode >= 2x faster;
* blockzstd vs ``zstd -T2 -1`` (the CLI, one multi-threaded frame) at the same level: >= 0.9x.

File to file as in ``test_compress.py`` (the corpus warm in the page cache, the output deleted
before each round, outside the timing); decode as ``whole-file decode 2t`` in
``test_read_seek.py`` (every block through ``IndexedReader.read_block`` on a 2-thread pool).

    BLOCKGZ_BENCH_SCALE=0.25 .venv/bin/python -m pytest benchmarks/test_zstd_bench.py \\
        -p no:cacheprovider --benchmark-only
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks import support
from blockgz.blocks.codecs.gzip_members import Compression
from blockgz.objects.compress import compress_file
from blockgz.objects.indexed import IndexedReader
from blockgz.written.sidecars import sidecar_key
from testkit.tools import require_tool

pytestmark = pytest.mark.benchmark(group="zstd")

ROUNDS = 5
THREADS = 2
ZSTD_FAST_LEVEL = 1
REPORT = Path(__file__).resolve().parent / "results" / "zstd.md"

GZIP_FAST = "blockgzip fast (isal-1) 1MiB 2t"
ZSTD_FAST = f"blockzstd zstd-{ZSTD_FAST_LEVEL} 1MiB 2t"
ZSTD_CLI = f"zstd -T2 -{ZSTD_FAST_LEVEL} (CLI)"
CODECS = {GZIP_FAST: Compression(), ZSTD_FAST: Compression("zstd", ZSTD_FAST_LEVEL)}


@dataclass
class Row:
    seconds: float  # median of the rounds
    uncompressed: int
    compressed: int
    other_load: float | None

    @property
    def mb_per_s(self) -> float:
        return self.uncompressed / self.seconds / support.MB

    @property
    def ratio(self) -> float:
        return self.uncompressed / self.compressed


COMPRESS: dict[str, Row] = {}
DECODE: dict[str, Row] = {}


def _time(benchmark, fn, setup=None, rounds=ROUNDS):
    before = support._cpu_snapshot()
    value = benchmark.pedantic(fn, setup=setup, rounds=rounds, warmup_rounds=1, iterations=1)
    others = support.other_load(before, support._cpu_snapshot())
    return value, benchmark.stats.stats.median, others


@pytest.fixture(scope="module")
def outputs(workdir):
    return {key: workdir / f"zstd-bench-{n}.ndjson{'.zst' if 'zstd' in key else '.gz'}"
            for n, key in enumerate(CODECS)}  # fmt: skip


@pytest.mark.parametrize("key", list(CODECS))
def test_compress(benchmark, corpus, outputs, key):
    dst = outputs[key]
    sidecar = Path(sidecar_key(str(dst)))

    def run() -> int:
        return compress_file(corpus, dst, compression=CODECS[key], threads=THREADS).byte_length

    size, median, others = _time(benchmark, run, setup=lambda: support.remove(dst, sidecar))
    assert dst.stat().st_size == size
    COMPRESS[key] = Row(median, corpus.stat().st_size, size, others)
    benchmark.extra_info.update(mb_per_s=COMPRESS[key].mb_per_s, ratio=COMPRESS[key].ratio)


def test_compress_zstd_cli(benchmark, corpus, workdir):
    exe = require_tool("zstd")
    dst = workdir / "zstd-cli.ndjson.zst"
    argv = [exe, "-q", f"-T{THREADS}", f"-{ZSTD_FAST_LEVEL}", "-c", str(corpus)]

    def run() -> int:
        with open(dst, "wb") as out:
            subprocess.run(argv, stdout=out, check=True)
        return os.path.getsize(dst)

    size, median, others = _time(benchmark, run, setup=lambda: support.remove(dst))
    COMPRESS[ZSTD_CLI] = Row(median, corpus.stat().st_size, size, others)
    support.remove(dst)


@pytest.mark.parametrize("key", list(CODECS))
def test_decode_whole_file(benchmark, corpus, outputs, key):
    path = outputs[key]
    if not path.exists():
        compress_file(corpus, path, compression=CODECS[key], threads=THREADS)
    reader = IndexedReader.open_file(path)
    blocks = range(len(reader.index.chunks))

    def run() -> int:
        with ThreadPoolExecutor(THREADS) as pool:
            return sum(map(len, pool.map(reader.read_block, blocks)))

    try:
        size, median, others = _time(benchmark, run)
    finally:
        reader.close()
    assert size == corpus.stat().st_size
    DECODE[key] = Row(median, size, reader.index.byte_length, others)
    support.remove(path, Path(sidecar_key(str(path))))


@pytest.fixture(scope="module", autouse=True)
def report():
    """After the module's benchmarks: the table and the verdicts, printed and written to
    ``results/zstd.md`` (only when every row ran)."""
    yield
    if len(COMPRESS) == 3 and len(DECODE) == 2:
        text = render()
        REPORT.write_text(text)
        print("\n" + text)


def render() -> str:
    lines = [
        "# blockzstd vs blockgzip and zstd -T2",
        "",
        f"- scale: `BLOCKGZ_BENCH_SCALE={support.SCALE:g}` (corpus "
        f"{support.CORPUS_BYTES / support.MB:,.1f} MB of NDJSON events)"
        + ("" if support.MEANINGFUL else "; a smaller run than the full 200 MB"),
        f"- machine: {_machine()}",
        "- MB/s of uncompressed data, median of 5 rounds; ratio = uncompressed / compressed "
        "(data file only); other load: CPU cores used by anything else meanwhile",
        "",
        "| row | MB/s | ratio | median ms | other load |",
        "|---|---|---|---|---|",
    ]
    for kind, rows in (("compress", COMPRESS), ("decode", DECODE)):
        for key, row in rows.items():
            load = "–" if row.other_load is None else f"{row.other_load:.2f}"
            lines.append(
                f"| {kind}: {key} | {row.mb_per_s:,.0f} | {row.ratio:.3f} | "
                f"{row.seconds * 1000:,.0f} | {load} |"
            )
    z, g, cli = COMPRESS[ZSTD_FAST], COMPRESS[GZIP_FAST], COMPRESS[ZSTD_CLI]
    targets = [
        ("compress speed, blockzstd vs blockgzip fast", z.mb_per_s / g.mb_per_s, 1.5),
        ("ratio, blockzstd vs blockgzip fast", z.ratio / g.ratio, 1.0),
        ("decode speed (2t), blockzstd vs blockgzip", _speed(DECODE, ZSTD_FAST, GZIP_FAST), 2.0),
        ("compress speed, blockzstd vs zstd -T2 -1", z.mb_per_s / cli.mb_per_s, 0.9),
    ]
    lines += ["", "| target | measured | required | verdict |", "|---|---|---|---|"]
    for name, value, need in targets:
        lines.append(
            f"| {name} | {value:.2f}× | ≥ {need}× | {'PASS' if value >= need else 'FAIL'} |"
        )
    return "\n".join(lines) + "\n"


def _speed(rows: dict[str, Row], a: str, b: str) -> float:
    return rows[a].mb_per_s / rows[b].mb_per_s


def _machine() -> str:
    from benchmarks import report

    return report.machine_line()
