"""What an export commits binds each file's content (issue 41): every object writer reports
the CRC-32 of the bytes it stored, its sidecar's size and CRC-32, and the sidecar names its
object; the same records give the same bytes and the same entries.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import replace
from types import SimpleNamespace

import pytest

from blockgz.blocks.codecs.gzip_members import Compression
from blockgz.blocks.index import BlockIndex
from blockgz.errors import CorruptIndexError
from blockgz.formats.avro.writer import AvroObjectWriter
from blockgz.formats.output import ObjectWriter
from blockgz.formats.parquet.writer import ParquetObjectWriter
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


# -- readers: what was committed, or an error naming the key ---------------------------------------
def _committed_archive(root) -> list:
    """Two batches of ``ev`` (2 partitions, gapped offsets, timestamps kept beside) exported
    through the real write task into ``root``, a manifest each: the records."""
    from testkit.archives import export_batches, input_records

    records = input_records(60)
    options = {"flush.size": "20", "store.kafka.timestamps": "true"}
    export_batches(str(root), records, "default", batches=2, **options)
    return records


def _first_object(root, partition: int = 0):
    folder = root / "topics" / "ev" / f"partition={partition}"
    data = sorted(folder.glob("ev+*.json.gz"))[0]
    return data, folder / f".{data.name.removesuffix('.gz')}.index.json"


def test_a_sidecar_of_another_object_is_refused(tmp_path):
    from blockgz.errors import ArchiveIntegrityError
    from blockgz.reader import open_archive

    _committed_archive(tmp_path)
    _, mine_sidecar = _first_object(tmp_path, 0)
    _, theirs_sidecar = _first_object(tmp_path, 1)
    mine_sidecar.write_bytes(theirs_sidecar.read_bytes())
    with open_archive(str(tmp_path)) as archive:
        with pytest.raises(ArchiveIntegrityError, match=r"index (size|crc32)") as caught:
            list(archive.records("ev", [0]))
        assert mine_sidecar.name in str(caught.value)
        assert len(list(archive.records("ev", [1]))) == 60  # the other partition reads


def test_a_truncated_or_swapped_object_is_refused_by_its_ranged_get(tmp_path):
    from blockgz.errors import ArchiveIntegrityError
    from blockgz.reader import open_archive

    records = _committed_archive(tmp_path)
    data, _ = _first_object(tmp_path, 0)
    first = min(r.offset for r in records if r.partition == 0)
    original = data.read_bytes()
    data.write_bytes(original + b"\0")
    with open_archive(str(tmp_path)) as archive, pytest.raises(ArchiveIntegrityError) as caught:
        next(archive.seek("ev", 0, first))
    assert str(caught.value).endswith(f"size {len(original) + 1}, committed {len(original)}")
    flipped = bytearray(original)
    flipped[len(original) // 2] ^= 0x01
    data.write_bytes(bytes(flipped))
    with open_archive(str(tmp_path)) as archive, pytest.raises(ArchiveIntegrityError) as caught:
        list(archive.seek("ev", 0, first))
    assert "crc32" in str(caught.value) and data.name in str(caught.value)


def test_a_changed_block_time_is_refused_or_not_trusted_when_rebuilt(tmp_path):
    from blockgz.errors import ArchiveIntegrityError
    from blockgz.reader import open_archive

    _committed_archive(tmp_path)
    _, sidecar = _first_object(tmp_path, 0)
    doc = json.loads(sidecar.read_text())
    chunks = doc["chunks"]
    lowest = min(c["min_timestamp"] for c in chunks)
    # A block that does not hold the file's first time: raising its min keeps the file's range.
    target = next(c for c in chunks if lowest < c["min_timestamp"] < c["max_timestamp"])
    window = {"to_time": target["max_timestamp"]}  # its records before its max are in it
    with open_archive(str(tmp_path)) as archive:
        before = [r.offset for _, r in archive.records("ev", [0], **window)]
    target["min_timestamp"] = target["max_timestamp"]  # "nothing in this block before max"
    sidecar.write_text(json.dumps(doc, separators=(",", ":")) + "\n")  # the same size
    with open_archive(str(tmp_path)) as archive, pytest.raises(ArchiveIntegrityError) as caught:
        list(archive.records("ev", [0], **window))
    assert "index crc32" in str(caught.value) and sidecar.name in str(caught.value)
    doc["object"]["rebuilt"] = True  # audit --repair's: its bytes are not the committed ones
    sidecar.write_text(json.dumps(doc))
    with open_archive(str(tmp_path)) as archive:  # its times prove nothing: the block is read
        assert [r.offset for _, r in archive.records("ev", [0], **window)] == before


def test_an_archive_from_before_the_checksums_still_reads(tmp_path):
    from blockgz.reader import open_archive

    records = _committed_archive(tmp_path)
    for sidecar in tmp_path.rglob(".*.index.json"):
        doc = json.loads(sidecar.read_text())
        del doc["object"]
        sidecar.write_text(json.dumps(doc))
    (tmp_path / "_blockgz" / "heads.json").unlink()  # newer than the checksums, too
    for manifest in (tmp_path / "_blockgz").rglob("*.json"):
        doc = json.loads(manifest.read_text())
        for entry in doc.get("files", []):
            for name in ("crc32", "index_size", "index_crc32"):
                del entry[name]
        manifest.write_text(json.dumps(doc))
    with open_archive(str(tmp_path)) as archive:
        got = sorted((p, r.offset) for p in (0, 1) for _, r in archive.records("ev", [p]))
    assert got == sorted((r.partition, r.offset) for r in records)


def test_an_object_read_whole_is_checked_at_its_end(tmp_path):
    from blockgz.errors import ArchiveIntegrityError
    from blockgz.reader import open_archive
    from blockgz.sink.write.commit import write_manifest
    from blockgz.sink.write.config import SinkSettings
    from blockgz.sink.write.task import write_task
    from testkit.archives import input_records
    from testkit.batches import arrow_batches

    records = [r for r in input_records(30) if r.partition == 0]
    config = SinkSettings.from_options(
        {"path": str(tmp_path), "name": "job", "s3.compression.type": "none"}  # read whole
    )
    write_manifest(config.manifest_log(), 0, [write_task(config, iter(arrow_batches(records)))])
    data = next((tmp_path / "topics" / "ev" / "partition=0").glob("ev+*.json"))
    with open_archive(str(tmp_path)) as archive:
        assert len(list(archive.records("ev", [0]))) == 30
    data.write_bytes(data.read_bytes().replace(b'"click"', b'"clock"', 1))  # same size
    with open_archive(str(tmp_path)) as archive, pytest.raises(ArchiveIntegrityError) as caught:
        list(archive.records("ev", [0]))
    assert f"{data.name}: crc32 " in str(caught.value)


def test_a_sidecar_whose_claims_differ_from_its_entry_names_the_sidecar():
    from blockgz.blocks.index import Chunk, IndexedObject
    from blockgz.errors import ArchiveIntegrityError
    from blockgz.objects.committed import check_sidecar
    from blockgz.written.files import WrittenFile

    chunks = [Chunk(0, 2, 0, 30, 8, min_timestamp=100, max_timestamp=150, crc32=1),
              Chunk(2, 2, 30, 30, 8, min_timestamp=160, max_timestamp=200, crc32=2)]  # fmt: skip
    named = IndexedObject("t/t+0+0.json.gz", 60, 9, topic="t", partition=0, first_offset=0,
                          last_offset=3, records=4)  # fmt: skip
    entry = WrittenFile("t/t+0+0.json.gz", "t", 0, "", 0, 3, 4, 60, 16, crc32=9,
                        min_timestamp=100, max_timestamp=200)  # fmt: skip
    check_sidecar("s3://b/t/.t+0+0.json.index.json", "d", entry, BlockIndex(chunks, object=named))
    cases = [
        (replace(entry, min_timestamp=90), "min_timestamp by its index 100, committed 90"),
        (replace(entry, partition=1), "object partition 0, committed 1"),
        (replace(entry, crc32=8), "object crc32 9, committed 8"),
        (replace(entry, last_offset=4), "last offset by its index 3, committed 4"),
    ]
    for other, message in cases:
        with pytest.raises(ArchiveIntegrityError, match=f"index.json: {message}$"):
            check_sidecar("s3://b/t/.t+0+0.json.index.json", "d", other,
                          BlockIndex(chunks, object=named))  # fmt: skip


def test_an_object_opened_by_its_path_is_the_one_its_sidecar_names(tmp_path):
    from blockgz.errors import ArchiveIntegrityError
    from blockgz.objects.seek import seek_object

    store = LocalStore(tmp_path)
    done = [_framed(store, "blockgzip")]
    other = ObjectWriter(store, "o/orders+4+0000000010.json.gz", "blockgzip", Compression(),
                         block_size=64, **{**PLACE, "partition": 4})  # fmt: skip
    for offset in range(10, 60):
        other.write(b'{"n": %d}' % (offset + 10), offset, 1_700_000_000_000 + offset)  # same size
    done.append(other.close())
    mine = store.path(done[0].key)
    assert [r.offset for r in seek_object(mine, 20, 2)] == [20, 21]
    own = store.get(done[0].index_key)
    store.put(done[0].index_key, store.get(done[1].index_key))  # the other's sidecar
    with pytest.raises(ArchiveIntegrityError, match=r"its sidecar says o/orders\+4\+"):
        list(seek_object(mine, 20, 2))
    store.put(done[0].index_key, own)
    data = bytearray(store.get(done[0].key))
    data[-30] ^= 0x01  # the same size, one bit of the last block
    store.put(done[0].key, bytes(data))
    with pytest.raises(ArchiveIntegrityError, match=r"block \d+ crc32 \d+, its sidecar says"):
        list(seek_object(mine, 58, 2))
