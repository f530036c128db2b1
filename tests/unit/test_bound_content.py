"""What an export commits binds each file's content (issue 41): every object writer reports
the CRC-32 of the bytes it stored, its sidecar's size and CRC-32, and the sidecar names its
object; the same records give the same bytes and the same entries.
"""

from __future__ import annotations

import json
import zlib
from types import SimpleNamespace

import pytest

from blockgz.errors import CorruptIndexError
from blockgz.format.codec import Compression
from blockgz.format.index import BlockIndex
from blockgz.formats.avro_writer import AvroObjectWriter
from blockgz.formats.output import ObjectWriter
from blockgz.formats.parquet_writer import ParquetObjectWriter
from blockgz.store.local import LocalStore

SCHEMA = SimpleNamespace(
    json={"type": "record", "name": "r", "fields": [{"name": "n", "type": "long"}]},
    name="r",
    id=1,
)
PLACE = {"topic": "orders", "partition": 3, "encoded_partition": "partition=3"}


def _framed(store: LocalStore, compression: str):
    w = ObjectWriter(
        store,
        f"o/orders+3+0000000010.json.{compression}",
        compression,
        Compression(),
        block_size=64,
        **PLACE,
    )
    for offset in range(10, 60):
        w.write(b'{"n": %d}' % offset, offset, 1_700_000_000_000 + offset)
    return w.close()


def _avro(store: LocalStore, _: str):
    w = AvroObjectWriter(store, "o/orders+3+0000000010.avro", SCHEMA, block_size=64, **PLACE)
    for offset in range(10, 60):
        w.write({"n": offset}, offset)
    return w.close()


def _parquet(store: LocalStore, _: str):
    w = ParquetObjectWriter(
        store, "o/orders+3+0000000010.parquet", SCHEMA, block_records=20, **PLACE
    )
    for offset in range(10, 60):
        w.write({"n": offset}, offset, 1_700_000_000_000 + offset)
    return w.close()


WRITERS = [
    (_framed, "blockgzip"),
    (_framed, "blockzstd"),
    (_framed, "gzip"),
    (_framed, "none"),
    (_avro, ""),
    (_parquet, ""),
]


@pytest.mark.parametrize(("write", "compression"), WRITERS)
def test_entry_binds_the_stored_bytes(tmp_path, write, compression):
    store = LocalStore(tmp_path)
    done = write(store, compression)
    data = store.get(done.key)
    assert (done.size, done.crc32) == (len(data), zlib.crc32(data))
    if done.index_key is None:
        assert (done.index_size, done.index_crc32) == (None, None)
        return
    sidecar = store.get(done.index_key)
    assert (done.index_size, done.index_crc32) == (len(sidecar), zlib.crc32(sidecar))
    named = json.loads(sidecar)["object"]
    assert named == {
        "key": done.key,
        "size": len(data),
        "crc32": zlib.crc32(data),
        "topic": "orders",
        "partition": 3,
        "first_offset": 10,
        "last_offset": 59,
        "records": 50,
    }
    assert BlockIndex.from_json(sidecar).object.crc32 == done.crc32


@pytest.mark.parametrize(("write", "compression"), WRITERS)
def test_same_records_same_bytes_same_entry(tmp_path, write, compression):
    first, second = LocalStore(tmp_path / "a"), LocalStore(tmp_path / "b")
    done = write(first, compression), write(second, compression)
    assert done[0].to_dict() == done[1].to_dict()
    keys = [k for k in (done[0].key, done[0].index_key) if k]
    assert [first.get(k) for k in keys] == [second.get(k) for k in keys]


def test_a_sidecar_whose_object_contradicts_its_chunks_is_corrupt(tmp_path):
    store = LocalStore(tmp_path)
    done = _framed(store, "blockgzip")
    doc = json.loads(store.get(done.index_key))
    doc["object"]["records"] = 49
    with pytest.raises(CorruptIndexError, match="object records says 49 but the chunks say 50"):
        BlockIndex.from_json(json.dumps(doc), source="x")


def test_a_sidecar_without_object_still_reads(tmp_path):
    store = LocalStore(tmp_path)
    done = _framed(store, "blockgzip")
    doc = json.loads(store.get(done.index_key))
    del doc["object"]
    assert BlockIndex.from_json(json.dumps(doc)).object is None
