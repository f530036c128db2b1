"""Decompression and seek: one block, the whole file on 1 and 2 threads, one record by offset.

Throughput is MB/s of *uncompressed* output. The seek benchmark opens the ~1 GiB file
cold each round (the index JSON is read and validated every time) and compares with
streaming the gzip from its start until the same record, as a plain ``.gz`` forces.
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from isal import igzip

from benchmarks import support
from blockgz.blocks.index import Chunk
from blockgz.objects.indexed import IndexedReader
from blockgz.written.sidecars import sidecar_key

STREAM_CHUNK = 1024 * 1024
NEWLINE = ord("\n")


@pytest.mark.benchmark(group="read")
def test_decode_one_block(benchmark, corpus_gz):
    """``IndexedReader.read_block`` on a random full-size block (pread + inflate + checks)."""
    path, index = corpus_gz
    # The last block is a short remainder; every other one holds ~1 MiB.
    candidates = list(range(max(1, len(index.chunks) - 1)))
    rng = random.Random(20240610)
    f = IndexedReader.open_file(path)

    def pick():
        return (rng.choice(candidates),), {}

    try:
        support.measure(
            benchmark,
            support.K_ONE_BLOCK,
            lambda block: len(f.read_block(block)),
            setup=pick,
            group="read",
            tool="blockgz (libdeflate)",
            uncompressed=round(_mean(index.chunks[i].byte_length_uncompressed for i in candidates)),
            compressed=round(_mean(index.chunks[i].byte_length for i in candidates)),
            rounds=200,
            warmup_rounds=10,
            direction="decompress",
            blocks=len(candidates),
        )
    finally:
        f.close()


def _mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


@pytest.mark.benchmark(group="read")
@pytest.mark.parametrize("threads", [1, 2], ids=["1t", "2t"])
def test_decode_whole_file(benchmark, corpus_gz, threads):
    """Every block of the file, decoded through the index (open included)."""
    path, index = corpus_gz

    def run() -> int:
        with IndexedReader.open_file(path) as f:
            blocks = range(len(f.index.chunks))
            if threads == 1:
                return sum(len(f.read_block(i)) for i in blocks)
            with ThreadPoolExecutor(threads) as pool:
                return sum(pool.map(lambda i: len(f.read_block(i)), blocks))

    support.measure(
        benchmark,
        support.K_DECODE_1T if threads == 1 else support.K_DECODE_2T,
        run,
        group="read",
        tool="blockgz inflate_chunk (libdeflate)",
        uncompressed=index.byte_length_uncompressed,
        compressed=index.byte_length,
        direction="decompress",
        threads=threads,
    )


@pytest.mark.benchmark(group="read")
def test_decode_stream_reference(benchmark, corpus_gz):
    """For reference: the same file streamed through isal's igzip, as zcat would."""
    path, index = corpus_gz

    def run() -> int:
        total = 0
        with igzip.open(path, "rb") as f:
            while piece := f.read(STREAM_CHUNK):
                total += len(piece)
        assert total == index.byte_length_uncompressed
        return total

    support.measure(
        benchmark,
        support.K_IGZIP_STREAM,
        run,
        group="read",
        tool="isal.igzip",
        uncompressed=index.byte_length_uncompressed,
        compressed=index.byte_length,
        direction="decompress",
        threads=1,
    )


@dataclass(frozen=True)
class SeekCase:
    path: Path
    index_bytes: int
    first_offset: int
    offset: int
    chunk: Chunk
    value: bytes


@pytest.fixture(scope="module")
def seek_case(seek_file: Path) -> SeekCase:
    with IndexedReader.open_file(seek_file) as f:
        first = f.index.first_offset
        offset = first + f.index.record_count // 2
        chunk = f.index.chunks[f.index.locate(offset)]
        value = next(f.seek(offset, count=1)).value
    index_bytes = Path(sidecar_key(str(seek_file))).stat().st_size
    return SeekCase(seek_file, index_bytes, first, offset, chunk, value)


def _cold_seek(case: SeekCase) -> bytes:
    with IndexedReader.open_file(case.path) as f:
        record = next(f.seek(case.offset, count=1))
    return record.value


def _newlines(data: bytes) -> np.ndarray:
    return np.frombuffer(data, np.uint8) == NEWLINE


def _stream_to(path: Path, line: int) -> bytes:
    """Decompress from the start, counting newlines, until line number ``line`` (0-based).

    As fast as one thread gets: isal's igzip decodes, numpy counts (~4x ``bytes.count``).
    """
    seen, tail = 0, b""
    with igzip.open(path, "rb") as f:
        while piece := f.read(STREAM_CHUNK):
            lines = int(np.count_nonzero(_newlines(piece)))
            if seen + lines > line:
                data = tail + piece
                ends = np.flatnonzero(_newlines(data))
                nth = line - seen
                start = 0 if nth == 0 else int(ends[nth - 1]) + 1
                return data[start : int(ends[nth])]
            seen += lines
            cut = piece.rfind(b"\n")
            tail = tail + piece if cut < 0 else piece[cut + 1 :]
    raise AssertionError(f"{path} has only {seen} lines, wanted line {line}")


@pytest.mark.benchmark(group="seek")
def test_seek_cold_open(benchmark, seek_case):
    case = seek_case
    read = support.bytes_read_by(lambda: _cold_seek(case))
    result = support.measure(
        benchmark,
        support.K_SEEK,
        lambda: _cold_seek(case),
        group="seek",
        tool="blockgz IndexedReader.open_file",
        rounds=50,
        warmup_rounds=3,
        direction="decompress",
        offset=case.offset,
        file_bytes=case.path.stat().st_size,
        bytes_read=read,
        reads=f"index {case.index_bytes:,} B + one block {case.chunk.byte_length:,} B "
        f"= {case.index_bytes + case.chunk.byte_length:,} B",
    )
    assert result is None or _cold_seek(case) == case.value


@pytest.mark.benchmark(group="seek")
def test_seek_decompress_from_start(benchmark, seek_case):
    case = seek_case
    line = case.offset - case.first_offset
    assert _stream_to(case.path, line) == case.value
    read = support.bytes_read_by(lambda: _stream_to(case.path, line))
    support.measure(
        benchmark,
        support.K_SCAN,
        lambda: _stream_to(case.path, line),
        group="seek",
        tool="isal.igzip stream + numpy newline count",
        rounds=3,
        warmup_rounds=1,
        direction="decompress",
        offset=case.offset,
        file_bytes=case.path.stat().st_size,
        bytes_read=read,
        reads=f"every byte before the record (~{case.chunk.byte_end:,} B of "
        f"{case.path.stat().st_size:,} B)",
    )
