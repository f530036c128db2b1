"""The audit's checks that what is stored is what a manifest committed: sizes and CRC-32s.

A manifest entry (:class:`~blockgz.written.files.WrittenFile`) written by a blockgz that
binds content records the file's ``crc32``, and its sidecar's ``index_size`` and
``index_crc32``; the sidecar names its object (its ``"object"`` member: key, size, CRC-32,
topic, partition, offsets, records). Without reading an object:

* the server's own checksum (:meth:`~blockgz.store.base.ObjectStore.stored_crc32`, one HEAD),
  where it keeps one, against ``crc32``;
* the sidecar's bytes (the audit fetches them anyway) against ``index_size``/``index_crc32``,
  and its ``"object"`` member against the entry.

With ``--deep``, the object's bytes against ``crc32`` (:func:`whole_crc`, from the blocks' CRCs
as they are read, so each byte is read once). Fields an older manifest or sidecar lacks are not
recorded: nothing to check, never a finding.

>>> from blockgz.written.files import WrittenFile
>>> f = WrittenFile("d/t+0+0000000000.json.gz", "t", 0, "partition=0", 0, 9, 10, 100, 90,
...                 "d/.t+0+0000000000.json.index.json", crc32=7)
>>> member_problems(f, {"key": "d/t+1+0000000000.json.gz", "size": 100, "crc32": 8,
...                     "partition": 1})
['names key d/t+1+0000000000.json.gz (committed d/t+0+0000000000.json.gz)', \
'names partition 1 (committed 0)', 'names crc32 8 (committed 7)']
>>> member_problems(f, None)
[]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from isal.isal_zlib import crc32_combine

from blockgz.blocks.checksum import block_crc32
from blockgz.blocks.index import BlockIndex
from blockgz.store.base import ObjectStore
from blockgz.written.files import WrittenFile

#: The sidecar's ``"object"`` member's fields, as the manifest entry names them.
_MEMBER_FIELDS = (
    ("key", "key"),
    ("topic", "topic"),
    ("partition", "partition"),
    ("first_offset", "first_offset"),
    ("last_offset", "last_offset"),
    ("records", "records"),
    ("size", "size"),
    ("crc32", "crc32"),
)


def object_member(data: bytes) -> Mapping[str, Any] | None:
    """The sidecar's ``"object"`` member (``None``: an older sidecar, or not JSON)."""
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    member = doc.get("object") if isinstance(doc, dict) else None
    return member if isinstance(member, dict) else None


#: The member's fields that say *which* object it describes (not what it holds).
IDENTITY = ("key", "topic", "partition")


def member_problems(
    f: WrittenFile, member: Mapping[str, Any] | None, only: tuple[str, ...] | None = None
) -> list[str]:
    """How the sidecar's ``"object"`` member differs from the manifest entry ``f`` (fields
    either side does not record are not compared); ``only``: these fields."""
    if member is None:
        return []
    problems = []
    for name, attr in _MEMBER_FIELDS:
        if only is not None and name not in only:
            continue
        said, committed = member.get(name), getattr(f, attr)
        if said is not None and committed is not None and said != committed:
            problems.append(f"names {name} {said} (committed {committed})")
    return problems


def rebuilt_for(member: Mapping[str, Any] | None, f: WrittenFile) -> bool:
    """Whether the sidecar was rebuilt from its object by ``blockgz audit --repair`` after the
    object proved itself (its ``"object"`` member says ``rebuilt`` and names the entry's key,
    size and CRC-32): its bytes differ from the committed sidecar's, rightly."""
    if not member or not member.get("rebuilt"):
        return False
    return (member.get("key"), member.get("size"), member.get("crc32")) == (f.key, f.size, f.crc32)


def sidecar_problems(f: WrittenFile, data: bytes) -> list[str]:
    """How the sidecar's bytes differ from the entry's ``index_size``/``index_crc32``."""
    problems = []
    if f.index_size is not None and len(data) != f.index_size:
        problems.append(f"is {len(data)} bytes, committed {f.index_size}")
    elif f.index_crc32 is not None:
        got = block_crc32(data)
        if got != f.index_crc32:
            problems.append(f"has CRC-32 {got:#010x}, committed {f.index_crc32:#010x}")
    return problems


def crc_problem(got: int | None, f: WrittenFile, how: str) -> str | None:
    """One line when the CRC-32 ``got`` (``how`` it was learned) is not the committed one."""
    if got is None or f.crc32 is None or got == f.crc32:
        return None
    return (
        f"its bytes are not those committed: {how} CRC-32 {got:#010x}, committed "
        f"{f.crc32:#010x} (replaced or rewritten since it was committed)"
    )


def whole_crc(
    store: ObjectStore, key: str, index: BlockIndex, size: int, block_crcs: Mapping[int, int]
) -> int | None:
    """The CRC-32 of the whole object from its blocks' CRCs (``block_crcs``: by block number,
    as they were read), reading only what lies outside the blocks (a header, a trailer);
    ``None`` when a block's CRC is missing (it could not be read)."""
    crc, position = 0, 0
    for n, chunk in sorted(enumerate(index.chunks), key=lambda nc: nc[1].byte_offset):
        if n not in block_crcs or chunk.byte_offset < position:
            return None
        if chunk.byte_offset > position:
            filler = store.get_range(key, position, chunk.byte_offset)
            crc = crc32_combine(crc, block_crc32(filler), len(filler))
        crc = crc32_combine(crc, block_crcs[n], chunk.byte_length)
        position = chunk.byte_offset + chunk.byte_length
    if position < size:
        filler = store.get_range(key, position, size)
        crc = crc32_combine(crc, block_crc32(filler), len(filler))
    return crc & 0xFFFFFFFF
