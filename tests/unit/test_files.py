"""Local block-GZIP files: compress, seek to every offset, interop with gzip/zcat/pigz/bgzip."""

from __future__ import annotations

import gzip
import subprocess

import pytest

from blockgz import IndexedReader, compress_file
from blockgz.blocks.index import BlockIndex
from blockgz.blocks.rebuild import scan_members
from blockgz.errors import ObjectNotFoundError, OffsetNotFoundError
from blockgz.sample import events_bytes
from blockgz.store import LocalStore
from blockgz.written.upload import publish_index
from testkit.tools import require_tool


@pytest.fixture(scope="module")
def events_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("events") / "events.json"
    path.write_bytes(events_bytes(3000))
    return path


@pytest.fixture(scope="module")
def compressed(events_file):
    out = events_file.with_suffix(".json.gz")
    index = compress_file(events_file, out, block_size=64 * 1024, first_offset=1000, threads=2)
    return out, index


def test_sidecar_name_and_atomic_outputs(compressed):
    out, index = compressed
    assert out.with_name(".events.json.index.json").exists()  # hidden beside the data
    assert not out.with_name("events.json.index.json").exists()
    assert not list(out.parent.glob(".*.tmp"))
    assert index.record_count == 3000 and len(index.chunks) > 10


def test_seek_to_every_offset_returns_that_record(events_file, compressed):
    lines = events_file.read_bytes().splitlines()
    with IndexedReader.open_file(compressed[0]) as archive:
        for offset in range(1000, 4000):
            (record,) = archive.seek(offset, count=1)
            assert record == (offset, lines[offset - 1000])
        assert [r.value for r in archive.seek(3998)] == lines[-2:]
        assert [r.value for r in archive.records()] == lines


def test_seek_outside_the_file_is_a_clear_error(compressed):
    with IndexedReader.open_file(compressed[0]) as archive:
        with pytest.raises(
            OffsetNotFoundError, match="offset 4000 is past the end: last offset is 3999"
        ):
            list(archive.seek(4000))
        with pytest.raises(OffsetNotFoundError, match="before the first offset 1000"):
            list(archive.seek(999))


def test_missing_sidecar_says_how_to_build_one(tmp_path):
    path = tmp_path / "x.json.gz"
    path.write_bytes(gzip.compress(b"a\n"))
    with pytest.raises(ObjectNotFoundError, match="blockgz index"):
        IndexedReader.open_file(path)


def test_real_gzip_tools_read_it_whole(events_file, compressed):
    out, _ = compressed
    subprocess.run([require_tool("gzip"), "-t", str(out)], check=True)
    zcat = subprocess.run([require_tool("zcat"), str(out)], check=True, capture_output=True)
    assert zcat.stdout == events_file.read_bytes()


def test_input_without_final_newline_gets_one(tmp_path):
    src = tmp_path / "a.txt"
    src.write_bytes(b"one\ntwo")
    compress_file(src, tmp_path / "a.txt.gz")
    assert gzip.decompress((tmp_path / "a.txt.gz").read_bytes()) == b"one\ntwo\n"


def test_empty_input_gives_empty_index(tmp_path):
    src = tmp_path / "empty.txt"
    src.write_bytes(b"")
    index = compress_file(src, tmp_path / "empty.txt.gz")
    assert index.record_count == 0 and not index.chunks
    assert gzip.decompress((tmp_path / "empty.txt.gz").read_bytes()) == b""  # a valid empty gzip


def test_rebuilt_index_agrees_with_the_writers(compressed):
    out, index = compressed
    with open(out, "rb") as f:
        assert scan_members(f, first_offset=1000).chunks == index.chunks


@pytest.mark.parametrize(
    "command",
    [["pigz", "-p", "2", "-c"], ["pigz", "-i", "-b", "32", "-c"], ["bgzip", "-c"], ["gzip", "-c"]],
    ids=["pigz", "pigz-independent", "bgzip", "gzip"],
)
def test_index_for_other_tools_output(tmp_path, events_file, command):
    require_tool(command[0])
    out = tmp_path / "other.json.gz"
    out.write_bytes(
        subprocess.run([*command, str(events_file)], check=True, capture_output=True).stdout
    )
    with open(out, "rb") as f:
        index = scan_members(f)
    publish_index(LocalStore(tmp_path), out.name, index)  # what `blockgz index` does
    lines = events_file.read_bytes().splitlines()
    with IndexedReader.open_file(out) as archive:
        for offset in (0, 1, 777, 1500, 2999):
            assert next(archive.seek(offset)).value == lines[offset]
    assert BlockIndex.from_json(index.to_json()).record_count == 3000
    if command[0] == "bgzip":  # 64 KiB members cut lines: grouped into record-aligned chunks
        assert any(c.members > 1 for c in index.chunks)
