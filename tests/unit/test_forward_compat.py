"""What a newer blockgz writes, this one reads: unknown fields are kept or ignored, and a newer
major version is refused with a message that says to upgrade (manifests, catalog, indexes)."""

from __future__ import annotations

import gzip
import json

import pytest

from blockgz.archive.layout import Layout
from blockgz.blocks.index import BlockIndex, Chunk
from blockgz.commits.catalog import Catalog, CatalogRoot
from blockgz.commits.manifest_log import ManifestLog
from blockgz.commits.manifests import Manifest
from blockgz.errors import CorruptIndexError, NewerVersionError
from blockgz.store import LocalStore
from blockgz.written.files import WrittenFile

FILE = {
    "key": "topics/t/partition=0/t+0+0000000000.json",
    "topic": "t",
    "partition": 0,
    "encoded_partition": "partition=0",
    "first_offset": 0,
    "last_offset": 9,
    "records": 10,
    "size": 100,
    "uncompressed_size": 100,
}


def manifest_doc(**changes) -> dict:
    doc = {
        "version": 1,
        "name": "job",
        "epoch": "",
        "batch": "0",
        "offsets": {"t": {"0": 10}},
        "files": [dict(FILE)],
        "skipped_nulls": 0,
        "layout": Layout().to_dict(),
    }
    doc.update(changes)
    return doc


def put_manifest(log: ManifestLog, doc: dict, batch: int = 0) -> None:
    log.store.put(log.key(batch), json.dumps(doc).encode())


@pytest.fixture
def log(tmp_path) -> ManifestLog:
    return ManifestLog(LocalStore(tmp_path), "", Layout(), "job")


def test_a_manifest_with_fields_this_blockgz_does_not_know_is_read(log):
    newer_file = {**FILE, "checksum": "sha256:ab", "row_groups": [1, 2]}
    put_manifest(log, manifest_doc(files=[newer_file], compaction_hint={"x": 1}, version="1.4"))
    manifest = log.read_batch(0)
    assert manifest is not None
    assert manifest.offsets == {"t": {0: 10}}
    (written,) = manifest.files
    assert (written.key, written.last_offset) == (FILE["key"], 9)
    assert written.extra == {"checksum": "sha256:ab", "row_groups": [1, 2]}
    assert written.to_dict() == {**newer_file, "index_key": None}  # kept, and written back
    assert log.committed_offsets() == {"t": {0: 10}}


def test_unknown_file_fields_survive_catalog_compaction(log):
    put_manifest(log, manifest_doc(files=[{**FILE, "checksum": "sha256:ab"}]))
    Catalog(log).compact()
    (segment_file,) = Catalog(log).view().files("t", 0)
    assert segment_file.extra == {"checksum": "sha256:ab"}
    (key,) = [i.key for i in log.store.list(Catalog(log).segments_prefix)]
    assert json.loads(gzip.decompress(log.store.get(key)))["files"][0]["checksum"] == "sha256:ab"


def test_a_file_without_unknown_fields_writes_the_same_bytes_as_before():
    written = WrittenFile.from_dict(FILE)
    assert written.extra == {}
    assert written.to_dict() == {**FILE, "index_key": None}
    assert written == WrittenFile(**FILE)


@pytest.mark.parametrize("version", [2, "2", "2.0", 17])
def test_a_manifest_of_a_newer_major_version_is_refused_with_upgrade(log, version):
    put_manifest(log, manifest_doc(version=version))
    with pytest.raises(NewerVersionError, match=r"manifest version .* upgrade blockgz"):
        log.read_batch(0)
    with pytest.raises(NewerVersionError, match="newer blockgz"):
        log.committed_offsets()


@pytest.mark.parametrize("version", ["one", None, True, [1]])
def test_a_manifest_version_that_is_no_number_is_corrupt(version):
    from blockgz.errors import CorruptManifestError

    with pytest.raises(CorruptManifestError, match="not a blockgz manifest"):
        Manifest.from_json(json.dumps(manifest_doc(version=version)))


def root_doc(log: ManifestLog) -> tuple[str, dict]:
    put_manifest(log, manifest_doc())
    root = Catalog(log).compact()
    assert root is not None
    key = Catalog(log).root_keys()[-1]
    return key, json.loads(gzip.decompress(log.store.get(key)))


def test_a_catalog_root_with_fields_this_blockgz_does_not_know_is_read(log):
    key, doc = root_doc(log)
    doc["bloom_filters"] = {"t": "abcd"}
    doc["version"] = 1
    log.store.put(key, gzip.compress(json.dumps(doc).encode()))
    root = CatalogRoot.from_json(gzip.decompress(log.store.get(key)), source=key)
    assert root.offsets == {"t": {0: 10}}
    assert log.committed_offsets() == {"t": {0: 10}}


def test_a_catalog_root_of_a_newer_major_version_is_refused_with_upgrade(log):
    key, doc = root_doc(log)
    doc["version"] = 2
    log.store.put(key, gzip.compress(json.dumps(doc).encode()))
    with pytest.raises(NewerVersionError, match=r"catalog root version 2 .* upgrade blockgz"):
        log.committed_offsets()


def index_doc() -> dict:
    return json.loads(BlockIndex([Chunk(0, 3, 0, 40, 12), Chunk(3, 2, 40, 30, 8)]).to_json())


def test_an_index_with_fields_this_blockgz_does_not_know_is_read():
    doc = index_doc()
    doc["dictionary"] = "zstd:abc"
    doc["chunks"][1]["checksum"] = 12345
    index = BlockIndex.from_json(json.dumps(doc))
    assert index.locate(4) == 1
    assert index.record_count == 5


@pytest.mark.parametrize("version", [4, 99])
def test_an_index_of_a_newer_version_is_refused_with_upgrade(version):
    doc = index_doc()
    doc["version"] = version
    with pytest.raises(CorruptIndexError, match=f"index version {version} .* upgrade blockgz"):
        BlockIndex.from_json(json.dumps(doc), source="x.index.json")
