"""The per-block ``crc32`` of the index: written by the block-GZIP writer and the index
rebuild, read back, ignored by an index that predates it, and refused when malformed."""

from __future__ import annotations

import io
import json
import zlib

import pytest

from blockgz.blocks.index import BlockIndex
from blockgz.blocks.rebuild import scan_members
from blockgz.blocks.writer import BlockGzipWriter
from blockgz.errors import CorruptIndexError


def _written(n: int = 200) -> tuple[bytes, BlockIndex]:
    out = io.BytesIO()
    with BlockGzipWriter(out, block_size=256, threads=2) as writer:
        for i in range(n):
            writer.write(b'{"n": %d}' % i, i * 2)
    return out.getvalue(), writer.index


def test_the_writer_records_the_crc_of_each_stored_block():
    data, index = _written()
    assert len(index.chunks) > 3
    for chunk in index.chunks:
        assert chunk.crc32 == zlib.crc32(data[chunk.byte_offset : chunk.byte_end])


def test_the_crc_survives_json_and_a_versionless_index_has_none():
    _, index = _written()
    loaded = BlockIndex.from_json(index.to_json())
    assert [c.crc32 for c in loaded.chunks] == [c.crc32 for c in index.chunks]
    assert '"crc32":' in index.to_json()
    doc = json.loads(index.to_json())
    for chunk in doc["chunks"]:
        del chunk["crc32"]
    old = BlockIndex.from_json(json.dumps(doc))
    assert all(c.crc32 is None for c in old.chunks)
    assert old == loaded  # the checksum is not part of what a block is


def test_an_older_reader_ignores_the_key():
    """What the index doc promises: an unknown chunk key is no reason to refuse (version 1)."""
    _, index = _written()
    doc = json.loads(index.to_json())
    assert doc["version"] == 1
    doc["chunks"][0]["some_future_key"] = [1, 2]
    assert BlockIndex.from_json(json.dumps(doc)).chunks[0].crc32 == index.chunks[0].crc32


@pytest.mark.parametrize("bad", [-1, 2**32, "abc", 1.5])
def test_a_malformed_crc_is_refused(bad):
    _, index = _written()
    doc = json.loads(index.to_json())
    doc["chunks"][1]["crc32"] = bad
    with pytest.raises(CorruptIndexError, match="chunk 1 crc32 must be an unsigned 32-bit"):
        BlockIndex.from_json(json.dumps(doc))


def test_a_rebuilt_index_has_the_writers_checksums():
    data, index = _written()
    rebuilt = scan_members(io.BytesIO(data), first_offset=0)
    assert [c.crc32 for c in rebuilt.chunks] == [c.crc32 for c in index.chunks]


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_avro_blocks_carry_the_crc_of_their_stored_bytes(codec):
    from blockgz.blocks.avro.container import AvroBlockWriter, avro_sync_marker

    out = io.BytesIO()
    marker = avro_sync_marker("t+0+0000000000.avro")
    with AvroBlockWriter(out, '"long"', block_size=16, sync_marker=marker, codec=codec) as w:
        for n in range(30):
            w.write(n, n)
        w.write_many(list(range(30, 60)), list(range(30, 60)))
    data = out.getvalue()
    assert len(w.index.chunks) > 3
    for chunk in w.index.chunks:
        assert chunk.crc32 == zlib.crc32(data[chunk.byte_offset : chunk.byte_end])
