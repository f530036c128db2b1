"""Damage done to an archive on purpose, the way it happens in real buckets, for the audit's
tests: an object deleted, truncated or with a flipped byte, a sidecar deleted or left from an
older write of the key, a stray copy, a manifest naming an object that was never written."""

from __future__ import annotations

import json

from blockgz.blocks.index import BlockIndex
from blockgz.store import LocalStore, ObjectStore
from blockgz.written.sidecars import sidecar_key
from blockgz.written.upload import BlockGzipUpload


def truncate(store: ObjectStore, key: str, drop: int = 20) -> None:
    """Cut the object's last ``drop`` bytes (an interrupted copy)."""
    store.put(key, store.get(key)[:-drop])


def flip_byte(store: ObjectStore, key: str, *, block: int = 0) -> tuple[int, int]:
    """Flip one bit in the middle of ``block`` (a bad disk or a bad copy); returns the block's
    first and last offsets."""
    index = BlockIndex.from_json(store.get(sidecar_key(key)))
    chunk = index.chunks[block]
    data = bytearray(store.get(key))
    data[chunk.byte_offset + chunk.byte_length // 2] ^= 0x10
    store.put(key, bytes(data))
    return chunk.first_record_offset, chunk.last_record_offset


def stale_sidecar(store: ObjectStore, key: str, first_offset: int, records: int, tmp) -> None:
    """Replace the sidecar with one from an older write of ``key`` that held ``records``
    other records (written into a scratch directory ``tmp``, then copied over)."""
    scratch = LocalStore(tmp)
    with BlockGzipUpload(scratch, key, first_offset=first_offset, block_size=64) as out:
        for n in range(records):
            out.write(b'{"older": %d}' % n, first_offset + n)
    store.put(sidecar_key(key), scratch.get(sidecar_key(key)))


def strip_checksums(store: ObjectStore, key: str) -> None:
    """Rewrite the sidecar as an index from before the ``crc32`` key."""
    doc = json.loads(store.get(sidecar_key(key)))
    for chunk in doc["chunks"]:
        chunk.pop("crc32", None)
    store.put(sidecar_key(key), json.dumps(doc).encode())


def forget_checksums(store: ObjectStore, manifest_keys: list[str]) -> None:
    """Rewrite manifests as a blockgz before content checksums wrote them (no ``crc32``,
    ``index_size``, ``index_crc32``): an older archive."""
    for key in manifest_keys:
        doc = json.loads(store.get(key))
        for f in doc["files"]:
            for name in ("crc32", "index_size", "index_crc32"):
                f.pop(name, None)
        store.put(key, json.dumps(doc).encode())


def second_writer(store: ObjectStore, key: str, first_offset: int, records: int) -> None:
    """An object (and its sidecar) another writer put at ``key``, holding ``records`` offsets
    from ``first_offset`` on, that no manifest committed."""
    with BlockGzipUpload(store, key, first_offset=first_offset) as out:
        for n in range(records):
            out.write(b'{"n": %d}' % (first_offset + n), first_offset + n)


def forget_etags(store: ObjectStore, manifest_keys: list[str]) -> None:
    """Rewrite manifests as a blockgz before recorded ETags wrote them (no ``etag``)."""
    for key in manifest_keys:
        doc = json.loads(store.get(key))
        for f in doc["files"]:
            f.pop("etag", None)
        store.put(key, json.dumps(doc).encode())
