"""Tombstones where the archive kept them, for a restore (and ``replay``): sent as key + null value,
in offset order with the partition's other records.

An export with ``behavior.on.null.values=write`` keeps a record whose value is null (a tombstone:
on a compacted topic it deletes its key) under ``tombstone.encoded.partition`` (``tombstone/``
by default), beside the partition's other directories:

* with ``store.kafka.keys``, as Confluent, as its key (and headers, timestamp) only: a keys file
  and the files beside it, **no value file**. Readers of values never see these; here they are
  found (the exports' catalogs, else a listing of the topic's tombstone directory) and read as
  records with value ``None``. Nothing is ambiguous: the sink writes keys-only files for
  tombstones alone.
* without ``store.kafka.keys``, as a value file holding the null value as the format writes it
  (JSON ``null``, an envelope's ``"value": null``, an empty bytearray record). No archive
  records that the directory was ``tombstone.encoded.partition`` (an export setting, not in the
  manifests), and its entries read exactly as a value that was the 4-byte JSON text ``null``
  (or an empty value). So the plan names each partition with such records, and the restore
  refuses unless told what they were: ``--json-null=tombstone`` (sent as key + null value) or
  ``--json-null=value`` (sent as the bytes read).

>>> from blockgz.blocks.decode import Record
>>> values = [[Record(0, b"a"), Record(2, b"c")], [Record(5, b"f")]]
>>> dead = iter([Record(1, None), Record(3, None), Record(9, None)])
>>> [[r.offset for r in block] for block in merged_blocks(iter(values), dead)]
[[0], [1], [2], [3], [5], [9]]
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from blockgz.archive.object_ref import ObjectRef
from blockgz.blocks.decode import Record
from blockgz.errors import ConfigError
from blockgz.reader.reading.window_counts import Window

#: The sink's default ``tombstone.encoded.partition``: the directory tombstones are kept in.
TOMBSTONE_DIRECTORY = "tombstone"
#: ``--json-null`` choices: what a null kept as a value under the tombstone directory was.
JSON_NULL_CHOICES = ("tombstone", "value")
#: Tombstones sent per block.
_BLOCK = 1000


@dataclass(frozen=True)
class KeptTombstones:
    """One partition's tombstones as the archive kept them."""

    #: Keys files with no value file (``store.kafka.keys``), each with the files beside it.
    keys_only: tuple[ObjectRef, ...] = ()
    #: Value files under the tombstone directory without a keys file: nulls kept as values.
    kept_nulls: tuple[ObjectRef, ...] = ()


def kept_tombstones(
    archive: Any, topic: str, partition: int, directory: str = TOMBSTONE_DIRECTORY
) -> KeptTombstones:
    """Where ``archive`` kept the tombstones of ``topic``/``partition`` (see the module's notes);
    ``directory``: the export's ``tombstone.encoded.partition``."""
    source = archive.locator.catalog_source()
    if source is not None and source.has(topic, partition):
        keys_only = source.keys_only_refs(topic, partition)
    else:
        keys_only = _listed_keys_only(archive, topic, partition, directory)
    nulls = [
        r
        for r in archive.objects(topic, partition)
        if _last_part(r.directory) == directory and not any(c.role == "keys" for c in r.companions)
    ]
    return KeptTombstones(tuple(keys_only), tuple(nulls))


def _last_part(directory: str) -> str:
    return directory.rstrip("/").rsplit("/", 1)[-1]


def _listed_keys_only(archive: Any, topic: str, partition: int, directory: str) -> list[ObjectRef]:
    """Keys-only groups of a listing of the topic's tombstone directory (no catalog)."""
    from blockgz.archive.layout import parse_archive_key

    layout = archive.layout
    if not hasattr(layout, "directory_delim"):
        return []  # a layout without topic directories (DeviantArt's)
    prefix = f"{layout.topic_prefix(archive.prefix, topic)}{directory}{layout.directory_delim}"
    listed = list(archive.store.list(prefix))
    names = {o.key for o in listed}
    groups: dict[int, list[ObjectRef]] = {}
    for info in listed:
        ref = parse_archive_key(layout, info.key, size=info.size)
        if ref is None or ref.topic != topic or ref.partition != partition:
            continue
        from blockgz.objects.indexed import sidecar_keys

        index_key = next((k for k in sidecar_keys(info.key) if k in names), None)
        groups.setdefault(ref.start_offset, []).append(
            replace(ref, has_index=index_key is not None, index_key=index_key)
        )
    out = []
    for start in sorted(groups):
        found = groups[start]
        keys = next((r for r in found if r.role == "keys"), None)
        if keys is not None and all(r.role != "value" for r in found):
            out.append(replace(keys, companions=tuple(sorted(found, key=lambda c: c.role))))
    return out


def tombstone_records(archive: Any, refs: Iterable[ObjectRef], window: Window) -> Iterator[Record]:
    """The tombstones of keys-only ``refs`` inside ``window``, in offset order: each its key,
    headers and timestamp as kept, value ``None``."""
    found: list[Record] = []
    for ref in refs:
        # The keys file read as if it held values; its companions (itself among them) give
        # each record its key, headers and timestamp.
        for record in _records_of(archive, ref, timestamps=True):
            if not window.holds_offset(record.offset):
                continue
            if window.timed and not window.holds_time(record.timestamp):
                continue
            found.append(record.with_value(None))
    found.sort(key=lambda r: r.offset)
    return iter(found)


def _records_of(archive: Any, ref: ObjectRef, *, timestamps: bool) -> Iterator[Record]:
    """Every record of ``ref``, with exact offsets: through its index (which knows the gaps
    between a tombstone file's offsets), else streamed."""
    if not ref.has_index:
        yield from archive.block_records(ref, -1, timestamps=timestamps)
        return
    blocks = range(len(archive.index(ref).chunks))
    for records in archive.blocks_records(ref, blocks, timestamps=timestamps):
        yield from records


def kept_null_offsets(archive: Any, refs: Iterable[ObjectRef], window: Window) -> list[int]:
    """The offsets inside ``window`` of the records of ``refs`` (nulls kept as values)."""
    offsets = set()
    for ref in refs:
        for record in _records_of(archive, ref, timestamps=window.timed):
            if window.holds_offset(record.offset) and (
                not window.timed or window.holds_time(record.timestamp)
            ):
                offsets.add(record.offset)
    return sorted(offsets)


def merged_blocks(
    blocks: Iterator[list[Record]], tombstones: Iterator[Record]
) -> Iterator[list[Record]]:
    """``blocks`` (records in offset order) with ``tombstones`` (in offset order) put in their
    places; a tombstone never shares a block with values (blocks are split around it)."""
    pending = next(tombstones, None)
    for block in blocks:
        if pending is None or pending.offset > block[-1].offset:
            yield block
            continue
        run: list[Record] = []
        for record in block:
            if pending is not None and pending.offset <= record.offset:
                if run:
                    yield run
                    run = []
                dead: list[Record] = []
                while pending is not None and pending.offset <= record.offset:
                    if pending.offset < record.offset:  # the same offset twice: the value's
                        dead.append(pending)
                    pending = next(tombstones, None)
                if dead:
                    yield dead
            run.append(record)
        if run:
            yield run
    rest = itertools.chain([] if pending is None else [pending], tombstones)
    while chunk := list(itertools.islice(rest, _BLOCK)):
        yield chunk


def resolved_nulls(block: list[Record], offsets: set[int], choice: str) -> list[Record]:
    """``block`` with the records at ``offsets`` (nulls kept as values) as ``choice`` says:
    ``tombstone``: value ``None``; ``value``: the bytes read (an envelope's null: ``null``)."""
    if not offsets or not any(r.offset in offsets for r in block):
        return block
    out = []
    for r in block:
        if r.offset in offsets:
            value = None if choice == "tombstone" else (b"null" if r.value is None else r.value)
            r = r.with_value(value)
        out.append(r)
    return out


def ambiguity(topic: str, partition: int, count: int, directory: str) -> str:
    """The plan's line for a partition whose nulls kept as values cannot be told apart."""
    return (
        f"{topic}[{partition}]: {count} records under {directory}/ hold a null kept as a value "
        "(JSON null, or an empty record) without a keys file: the archive cannot tell a "
        "tombstone from a value that was the text null; pass --json-null=tombstone (send them "
        "as key + null value) or --json-null=value (send the bytes read)"
    )


def check_choice(choice: str | None) -> str | None:
    """``--json-null``'s value, checked."""
    if choice is not None and choice not in JSON_NULL_CHOICES:
        raise ConfigError(f"--json-null {choice!r}: write tombstone or value")
    return choice
