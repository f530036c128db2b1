"""``compress_file``'s input path: the file mapped and populated on a thread of its own, the
records counted into a per-thread scratch array; the bytes and the index are those of the
input read from a stream, whatever the kernel says to the populate advice."""

from __future__ import annotations

import io
import mmap
import threading

import pytest

import blockgz.objects.compress as compress
from blockgz.blocks import byte_count
from blockgz.blocks.byte_count import count_byte
from blockgz.sample import events_bytes


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    path = tmp_path_factory.mktemp("in") / "events.json"
    path.write_bytes(events_bytes(5000))
    return path


def _reference(data: bytes, block_size: int, tmp_path):
    """The same input from a stream (read in pieces: no map, nothing populated)."""
    out = tmp_path / "reference.json.gz"
    index = compress.compress_file(io.BytesIO(data), out, block_size=block_size, threads=1)
    return out.read_bytes(), index


@pytest.mark.parametrize("advice", ["kernel's", "refused"])
def test_the_mapped_input_gives_the_writers_bytes(events, tmp_path, monkeypatch, advice):
    if advice == "refused":
        monkeypatch.setattr(compress, "MADV_POPULATE_READ", -1)  # EINVAL: the thread stops
    monkeypatch.setattr(compress, "POPULATE_STEP", 64 * 1024)  # many steps for a small file
    out = tmp_path / "events.json.gz"
    index = compress.compress_file(events, out, block_size=32 * 1024, threads=2)
    data, want = _reference(events.read_bytes(), 32 * 1024, tmp_path)
    assert out.read_bytes() == data
    assert index.chunks == want.chunks and index.record_count == 5000
    assert not [t for t in threading.enumerate() if t.name == "blockgz-populate"]


def test_the_map_can_close_once_populated(events):
    """The populate thread pins the map's address while it runs (its ``madvise`` goes through
    ctypes, without the GIL); leaving the block lets the map close."""
    with open(events, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        with compress.populated(mapped):
            assert mapped[:1] == b"{"
        mapped.close()  # BufferError if the address were still pinned
    assert mapped.closed


def test_count_byte_counts_across_scratch_pieces(monkeypatch):
    monkeypatch.setattr(byte_count, "SCRATCH_BYTES", 7)
    monkeypatch.setattr(byte_count, "_local", threading.local())
    data = b"a\nbb\n\n" * 11 + b"tail"
    assert count_byte(data, 10) == data.count(b"\n") == 33
    assert count_byte(memoryview(data)[3:], 10) == data[3:].count(b"\n")


def test_count_byte_on_threads_each_with_its_own_scratch():
    from concurrent.futures import ThreadPoolExecutor

    blocks = [b"x\n" * n + b"y" * (n % 5) for n in range(1, 400)]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(lambda b: count_byte(b, 10), blocks)) == list(range(1, 400))
