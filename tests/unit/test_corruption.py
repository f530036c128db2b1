"""Damaged files and lying indexes give clear errors naming the block, never wrong records."""

from __future__ import annotations

import json

import pytest

from blockgz import IndexedReader, compress_file
from blockgz.blocks.index import BlockIndex
from blockgz.errors import CorruptBlockError, CorruptIndexError, IndexMismatchError
from blockgz.sample import events_bytes


def verify_file(path):
    """Verify a local file against its sidecar, as `blockgz verify` does."""
    with IndexedReader.open_file(path, check_size=False) as f:
        return f.verify()


@pytest.fixture
def archive(tmp_path):
    src = tmp_path / "e.json"
    src.write_bytes(events_bytes(600))
    out = tmp_path / "e.json.gz"
    index = compress_file(src, out, block_size=32 * 1024)
    return out, tmp_path / ".e.json.index.json", index


def test_intact_file_verifies(archive):
    report = verify_file(archive[0])
    assert report.ok and report.records == 600 and report.blocks == len(archive[2].chunks)


def test_truncated_file(archive):
    data, _, index = archive
    data.write_bytes(data.read_bytes()[:-100])
    with pytest.raises(IndexMismatchError, match="truncated"):
        IndexedReader.open_file(data)
    report = verify_file(data)
    last = len(index.chunks) - 1
    assert not report.ok
    assert any(f"block {last} " in p and "truncated" in p for p in report.problems)


def test_flipped_byte_names_the_bad_block(archive):
    data, _, index = archive
    raw = bytearray(data.read_bytes())
    target = index.chunks[2]
    raw[target.byte_offset + target.byte_length // 2] ^= 0x55
    data.write_bytes(bytes(raw))
    report = verify_file(data)
    assert len(report.problems) == 1 and "block 2 " in report.problems[0]
    with IndexedReader.open_file(data) as f:
        with pytest.raises(CorruptBlockError, match="block 2 ") as caught:
            list(f.seek(target.first_record_offset))
        assert caught.value.block == 2
        assert (
            next(f.seek(index.chunks[3].first_record_offset)).offset
            == index.chunks[3].first_record_offset
        )


def _rewrite_index(path, mutate):
    doc = json.loads(path.read_text())
    mutate(doc)
    path.write_text(json.dumps(doc))


def test_index_that_lies_about_uncompressed_size(archive):
    data, sidecar, _ = archive

    def lie(doc):
        doc["chunks"][1]["byte_length_uncompressed"] += 1
        doc.pop("byte_length_uncompressed")

    _rewrite_index(sidecar, lie)
    report = verify_file(data)
    assert any("block 1 " in p and "index promises" in p for p in report.problems)


def test_index_that_lies_about_record_count(archive):
    data, sidecar, _ = archive

    def lie(doc):
        doc["chunks"][0]["num_records"] += 1
        doc.pop("record_count")
        doc.pop("object")  # which would contradict the chunks: a CorruptIndexError on load
        for chunk in doc["chunks"][1:]:
            chunk["first_record_offset"] += 1

    _rewrite_index(sidecar, lie)
    assert any("block 0 holds" in p for p in verify_file(data).problems)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["chunks"][1].update(byte_offset=5), "chunk 1 starts at byte 5"),
        (lambda d: d["chunks"][1].update(first_record_offset=0), "not after the previous chunk"),
        (lambda d: d["chunks"][0].update(num_records=-1), "non-negative integer"),
        (lambda d: d.update(version=99), "newer than this blockgz reads"),
        (lambda d: d.update(record_count=1), "record_count says 1"),
        (
            lambda d: d.update(framing={"kind": "morse"}),
            "allowed kinds: separator, length-prefixed",
        ),
    ],
)
def test_corrupt_index_is_refused_on_load(archive, mutate, message):
    _, sidecar, _ = archive
    _rewrite_index(sidecar, mutate)
    with pytest.raises(CorruptIndexError, match=message):
        BlockIndex.from_json(sidecar.read_text(), source=str(sidecar))


def test_index_that_is_not_json(archive):
    data, sidecar, _ = archive
    sidecar.write_text("{not json")
    with pytest.raises(CorruptIndexError, match="not valid JSON"):
        IndexedReader.open_file(data)


def test_deviantart_index_without_version_loads(archive):
    _, _, index = archive
    legacy = {"chunks": [c.to_dict() for c in index.chunks]}
    loaded = BlockIndex.from_json(json.dumps(legacy))
    assert loaded.chunks == index.chunks and loaded.framing.separator == b"\n"
