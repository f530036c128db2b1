"""Compression throughput (MB/s of input) and ratio: blockgz against its peers, same corpus.

Every file-to-file benchmark reads the cached corpus (warm in the page cache) and writes
a fresh output file in the same temporary directory; the output is deleted before each
round, outside the timing.
"""

from __future__ import annotations

import gzip
import importlib
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from isal import isal_zlib

from benchmarks import support
from benchmarks.support import KiB, MiB
from blockgz.blocks.codecs.gzip_members import Compression
from blockgz.blocks.writer import BlockGzipWriter
from blockgz.objects.compress import compress_file
from blockgz.written.sidecars import sidecar_key
from testkit.tools import require_tool

pytestmark = pytest.mark.benchmark(group="compress")

COPY_CHUNK = 4 * MiB
# Sub-second runs get more rounds: on a 2-vCPU VM their median moves by a few percent.
FAST_ROUNDS = 9
SLOW_ROUNDS = 5

BLOCKGZ_CASES = [
    ("fast", 64 * KiB, 1),
    ("fast", 64 * KiB, 2),
    ("fast", MiB, 1),
    ("fast", MiB, 2),
    ("fast", 4 * MiB, 1),
    ("fast", 4 * MiB, 2),
    ("small", MiB, 2),
]


@pytest.mark.parametrize(
    ("preset", "block_size", "threads"),
    BLOCKGZ_CASES,
    ids=[f"{p}-{support.size_label(b)}-{t}t" for p, b, t in BLOCKGZ_CASES],
)
def test_blockgz_compress_file(benchmark, corpus, workdir, preset, block_size, threads):
    compression = Compression.preset(preset)
    dst = workdir / f"blockgz-{preset}-{block_size}-{threads}.ndjson.gz"
    sidecar = Path(sidecar_key(str(dst)))

    def run() -> int:
        index = compress_file(
            corpus, dst, block_size=block_size, compression=compression, threads=threads
        )
        return index.byte_length

    result = support.measure(
        benchmark,
        support.blockgz_key(preset, block_size, threads),
        run,
        setup=lambda: support.remove(dst, sidecar),
        group="compress",
        tool=f"blockgz {compression.codec}-{compression.level}",
        uncompressed=corpus.stat().st_size,
        compressed=lambda size: size,
        rounds=SLOW_ROUNDS if preset == "small" else FAST_ROUNDS,
        threads=threads,
        block_size=block_size,
    )
    if result is not None:
        assert dst.stat().st_size == result.compressed
        result.extra["index_bytes"] = benchmark.extra_info["index_bytes"] = sidecar.stat().st_size
    support.remove(dst, sidecar)


CLI_PEERS = {
    support.K_PIGZ_1: ["pigz", "-p", "2", "-1", "-c"],
    support.K_PIGZ_6: ["pigz", "-p", "2", "-6", "-c"],
    support.K_BGZIP_1: ["bgzip", "-@", "2", "-l", "1", "-c"],
    support.K_BGZIP_6: ["bgzip", "-@", "2", "-l", "6", "-c"],
}


@pytest.mark.parametrize("key", list(CLI_PEERS))
def test_peer_cli(benchmark, corpus, workdir, key):
    exe = require_tool(CLI_PEERS[key][0])
    argv = [exe, *CLI_PEERS[key][1:], str(corpus)]
    dst = workdir / f"{key.replace(' ', '_')}.ndjson.gz"

    def run() -> int:
        with open(dst, "wb") as out:
            subprocess.run(argv, stdout=out, check=True)
        return os.path.getsize(dst)

    support.measure(
        benchmark,
        key,
        run,
        setup=lambda: support.remove(dst),
        group="compress",
        tool=CLI_PEERS[key][0],
        uncompressed=corpus.stat().st_size,
        compressed=lambda size: size,
        rounds=FAST_ROUNDS if key.endswith("1") else SLOW_ROUNDS,
        threads=2,
        command=" ".join(CLI_PEERS[key]),
    )
    support.remove(dst)


PYTHON_PEERS = {
    # key: (module, threads, extra keyword arguments of module.open)
    "stdlib gzip -6 (whole file, 1t)": ("gzip", 1, {}),
    "pgzip -6 1MiB 2t": ("pgzip", 2, {"thread": 2, "blocksize": MiB}),
    "mgzip -6 1MiB 2t": ("mgzip", 2, {"thread": 2, "blocksize": MiB}),
}


@pytest.mark.parametrize("key", list(PYTHON_PEERS))
def test_peer_python(benchmark, corpus, workdir, key):
    tool, threads, options = PYTHON_PEERS[key]
    module = gzip if tool == "gzip" else _require_module(tool)
    dst = workdir / f"{tool}.ndjson.gz"

    def run() -> int:
        with (
            open(corpus, "rb") as src,
            module.open(str(dst), "wb", compresslevel=6, **options) as out,
        ):
            shutil.copyfileobj(src, out, COPY_CHUNK)
        return os.path.getsize(dst)

    support.measure(
        benchmark,
        key,
        run,
        setup=lambda: support.remove(dst),
        group="compress",
        tool=tool,
        uncompressed=corpus.stat().st_size,
        compressed=lambda size: size,
        rounds=3,
        threads=threads,
    )
    support.remove(dst)


def _require_module(name: str):
    """Import a peer module, or skip the benchmark saying why (missing or broken install)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        pytest.skip(f"peer module {name} is not importable ({exc}); pip install -e '.[dev]'")


def _isal1(block) -> int:
    return len(isal_zlib.compress(block, 1, wbits=31))


@pytest.mark.parametrize("threads", [1, 2], ids=["1t", "2t"])
def test_raw_isal_same_blocks(benchmark, corpus_data, corpus_gz, threads):
    """isal level 1 over exactly the blocks blockgz cut: the ceiling for the writer."""
    _, index = corpus_gz
    blocks = support.cut_blocks(corpus_data, index.chunks)

    if threads == 1:

        def run() -> int:
            return sum(map(_isal1, blocks))

    else:

        def run() -> int:
            with ThreadPoolExecutor(threads) as pool:
                return sum(pool.map(_isal1, blocks))

    result = support.measure(
        benchmark,
        support.K_RAW_ISAL_1T if threads == 1 else support.K_RAW_ISAL_2T,
        run,
        group="compress",
        tool="isal_zlib.compress(level=1)",
        uncompressed=len(corpus_data),
        compressed=lambda size: size,
        rounds=FAST_ROUNDS,
        threads=threads,
        blocks=len(blocks),
    )
    if result is not None:
        assert result.compressed == index.byte_length  # same blocks, same bytes


@pytest.mark.parametrize("threads", [1, 2], ids=["1t", "2t"])
def test_blockgz_in_memory(benchmark, corpus_data, threads):
    """BlockGzipWriter from bytes to a null sink: no file I/O, like the raw isal loop."""
    compression = Compression.preset("fast")

    def run() -> int:
        sink = support.NullSink()
        writer = BlockGzipWriter(sink, block_size=MiB, compression=compression, threads=threads)
        writer.write_delimited(corpus_data)
        index = writer.close()
        assert sink.size == index.byte_length
        return index.byte_length

    support.measure(
        benchmark,
        support.K_MEM_1T if threads == 1 else support.K_MEM_2T,
        run,
        group="compress",
        tool="blockgz BlockGzipWriter",
        uncompressed=len(corpus_data),
        compressed=lambda size: size,
        rounds=FAST_ROUNDS,
        threads=threads,
        block_size=MiB,
    )
