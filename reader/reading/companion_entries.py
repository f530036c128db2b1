"""Records with the keys, headers and timestamps kept in the objects beside them.

Each entry is decoded by the format its object's extension names
(:meth:`blockgz.formats.base.Format.decode_entry`); an object whose extension names no format
raises :class:`~blockgz.errors.UnknownFormatError` instead of being read as bytes.

>>> from blockgz.blocks.decode import Record, _KeptRecord
>>> decoded_entry("json", b'{"base64": "AAE="}')
b'\\x00\\x01'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from blockgz.archive.object_ref import ObjectRef
from blockgz.blocks.decode import Record, _KeptRecord
from blockgz.formats.base import from_text
from blockgz.formats.by_name import FORMATS, format_of


def with_companions(refs: list[ObjectRef]) -> list[ObjectRef]:
    """Value objects only, each with the ``.keys``/``.headers`` objects beside it."""
    values = [r for r in refs if r.role == "value"]
    beside: dict[tuple[str, str, int, int], list[ObjectRef]] = {}
    for ref in refs:
        if ref.role != "value":
            beside.setdefault((ref.directory, ref.topic, ref.partition, ref.start_offset), [])
            beside[(ref.directory, ref.topic, ref.partition, ref.start_offset)].append(ref)
    return [
        replace(r, companions=tuple(sorted(found, key=lambda c: c.role)))
        if (found := beside.get((r.directory, r.topic, r.partition, r.start_offset)))
        else r
        for r in values
    ]


#: The extension of the stand-in companion that says "the timestamps the value object's own
#: ``.index.json`` sidecar keeps" (issue 44, :mod:`blockgz.blocks.stamps`): no object of its own.
SIDECAR_STAMPS = "timestamps.index.json"


def companions_for(ref: ObjectRef, timestamps: bool) -> ObjectRef:
    """``ref``, without its timestamps companion unless ``timestamps``: readers fetch that
    file only when the record timestamps are wanted (a time window, a restore). Wanted, an
    indexed value object without a timestamps file gets the stand-in companion
    :data:`SIDECAR_STAMPS`: its sidecar's timestamps, where it keeps them (else none).

    >>> stamps = ObjectRef(".t+0+0000000007.timestamps.json", "t", 0, 7, "timestamps.json")
    >>> ref = ObjectRef("t+0+0000000007.json", "t", 0, 7, "json", companions=(stamps,))
    >>> companions_for(ref, False).companions, companions_for(ref, True) is ref
    ((), True)
    >>> new = ObjectRef("t+0+0000000007.json.gz", "t", 0, 7, "json.gz", has_index=True)
    >>> [c.extension for c in companions_for(new, True).companions]
    ['timestamps.index.json']
    """
    has_file = any(c.role == "timestamps" for c in ref.companions)
    if timestamps:  # a keys file is read as values where no value file is (keys-only tombstones)
        if has_file or not ref.has_index or ref.role not in ("value", "keys") or ref.indexes_itself:
            return ref
        stand_in = ObjectRef(
            ref.index_key or ref.key, ref.topic, ref.partition, ref.start_offset, SIDECAR_STAMPS
        )
        return replace(ref, companions=(*ref.companions, stand_in))
    if not has_file:
        return ref
    return replace(ref, companions=tuple(c for c in ref.companions if c.role != "timestamps"))


def is_sidecar_stamps(companion: ObjectRef) -> bool:
    """Whether ``companion`` is the stand-in for the timestamps a sidecar keeps."""
    return companion.extension == SIDECAR_STAMPS


def stamp_pairs(stamps: Any, kinds: Any) -> list[tuple[int | None, int | None]]:
    """int64 arrays of timestamps and types (``-1``: none) as ``(ms, type)`` pairs, ``None``
    for none.

    >>> import numpy as np
    >>> stamp_pairs(np.array([5, -1]), np.array([0, -1]))
    [(5, 0), (None, None)]
    """
    ms: list[Any] = stamps.tolist()
    types: list[Any] = kinds.tolist()
    if ms and min(ms) < 0:
        ms = [None if m < 0 else m for m in ms]
    if types and min(types) < 0:
        types = [None if k < 0 else k for k in types]
    return list(zip(ms, types, strict=True))


#: What each companion role keeps of a record (:attr:`Record.holds`).
_HOLDS = {"keys": "key", "headers": "headers", "timestamps": "timestamp"}


def with_entries(record: Record, companions: tuple[ObjectRef, ...], entries: list[Any]) -> Record:
    """The record with the key, headers and timestamp its ``.keys``/``.headers``/
    ``.timestamps`` entries hold.

    >>> ref = ObjectRef("t+0+0000000007.timestamps.json", "t", 0, 7, "timestamps.json")
    >>> with_entries(Record(7, b"v"), (ref,), [b"[1700000000000,1]"])
    Record(offset=7, value=b'v', timestamp=1700000000000, timestamp_type=1)
    """
    found = {c.role: format_of(c).decode_entry(e) for c, e in zip(companions, entries, strict=True)}
    headers = record.headers
    if "headers" in found:  # no headers and an empty list are the same to Kafka
        kept = found["headers"]
        headers = [(h["key"], from_text(h["value"])) for h in kept] if kept else None
    timestamp, kind = record.timestamp, record.timestamp_type
    if "timestamps" in found:
        timestamp, kind = timestamp_entry(found["timestamps"])
    return Record.kept(
        record.offset,
        record.value,
        key=found.get("keys", record.key),
        headers=headers,
        timestamp=timestamp,
        timestamp_type=kind,
        holds=record.holds | {_HOLDS[role] for role in found},
    )


def block_with_entries(
    records: list[Record], companions: tuple[ObjectRef, ...], columns: list[list[Any]]
) -> list[Record]:
    """:func:`with_entries` for a whole block: ``columns[i][n]`` is companion ``i``'s entry
    for ``records[n]``. Each companion's format is looked up, and its entries decoded, once
    per block (:func:`decoded_column`), not once per record: a replay reads millions of
    records, and this was most of its reading cost.

    >>> ref = ObjectRef("t+0+0000000007.timestamps.json", "t", 0, 7, "timestamps.json")
    >>> block_with_entries([Record(7, b"v"), Record(8, b"w")], (ref,), [[b"[5,0]", b"[6,1]"]])
    [Record(offset=7, value=b'v', timestamp=5, timestamp_type=0), \
Record(offset=8, value=b'w', timestamp=6, timestamp_type=1)]
    """
    count = len(records)
    decoded = []
    for companion, column in zip(companions, columns, strict=True):
        check_entries(companion, len(column), count)
        decoded.append(decoded_column(companion, column[:count]))
    return joined(records, companions, decoded)


def check_entries(companion: ObjectRef, entries: int, records: int) -> None:
    """Raise :class:`IndexError` when ``companion`` holds fewer entries than the records."""
    if entries < records:
        raise IndexError(f"{companion.key}: {entries} entries for {records} records")


def decoded_column(companion: ObjectRef, entries: list[Any]) -> list[Any]:
    """``companion``'s entries for a run of records, decoded as its format says: keys as the
    key bytes, headers as ``[(key, value)]`` (``None`` for none: no headers and an empty list
    are the same to Kafka), timestamps as ``(ms, type)`` pairs (``None`` for Kafka's ``-1``).

    >>> ref = ObjectRef("t+0+0000000007.headers.json", "t", 0, 7, "headers.json")
    >>> decoded_column(ref, [b'[{"key":"h","value":"v"}]', b"[]"])
    [[('h', b'v')], None]
    """
    found = format_of(companion).decode_entries(entries)
    role = companion.role
    if role == "headers":
        return [[(h["key"], from_text(h["value"])) for h in e] if e else None for e in found]
    if role == "timestamps":
        return _stamp_pairs(found)
    return found


def joined(
    records: list[Record], companions: tuple[ObjectRef, ...], columns: list[list[Any]]
) -> list[Record]:
    """The records with what the companions' decoded ``columns`` (:func:`decoded_column`)
    hold for them: ``columns[i][n]`` is for ``records[n]``, at least as many entries each."""
    found = {c.role: column for c, column in zip(companions, columns, strict=True)}
    keys, headers, stamps = found.get("keys"), found.get("headers"), found.get("timestamps")
    added = frozenset(_HOLDS[role] for role in found)
    holds_of: dict[frozenset[str], frozenset[str]] = {}
    out: list[Record] = []
    append, new = out.append, tuple.__new__
    # The record built here directly (what Record.kept does, without a call per record): a
    # restore reads millions, and the call and its keywords were half of this loop's time.
    for n, record in enumerate(records):
        holds = holds_of.get(record.holds)
        if holds is None:
            holds = holds_of[record.holds] = record.holds | added
        stamp, kind = (record.timestamp, record.timestamp_type) if stamps is None else stamps[n]
        kept = new(_KeptRecord, (record.offset, record.value))
        kept.__dict__ = {
            "key": record.key if keys is None else keys[n],
            "headers": record.headers if headers is None else headers[n],
            "timestamp": stamp,
            "timestamp_type": kind,
            "holds": holds,
        }
        append(kept)
    return out


def joined_columns(
    offsets: list[int],
    values: list[Any],
    companions: tuple[ObjectRef, ...],
    columns: list[list[Any]],
) -> list[Record]:
    """:func:`joined` for a block read as columns (``offsets``, ``values``: plain records,
    nothing kept beside them yet), each record built once, directly: a restore builds
    millions, and a plain record first and a copy with the entries then cost twice this.

    >>> ref = ObjectRef("t+0+0000000007.timestamps.json", "t", 0, 7, "timestamps.json")
    >>> joined_columns([7, 8], [b"v", b"w"], (ref,), [[(5, 0), (None, None)]])
    [Record(offset=7, value=b'v', timestamp=5, timestamp_type=0), Record(offset=8, value=b'w')]
    """
    found = {c.role: column for c, column in zip(companions, columns, strict=True)}
    keys, headers, stamps = found.get("keys"), found.get("headers"), found.get("timestamps")
    holds = frozenset(_HOLDS[role] for role in found)
    out: list[Record] = []
    append, new = out.append, tuple.__new__
    if keys is None and headers is None and stamps is not None:  # what an export keeps
        # No "key" and "headers" in the record's dict: Record's class attributes give None
        for pair, (stamp, kind) in zip(zip(offsets, values, strict=True), stamps, strict=True):
            kept = new(_KeptRecord, pair)
            kept.__dict__ = {"timestamp": stamp, "timestamp_type": kind, "holds": holds}
            append(kept)
        return out
    for n, pair in enumerate(zip(offsets, values, strict=True)):
        stamp, kind = (None, None) if stamps is None else stamps[n]
        kept = new(_KeptRecord, pair)
        kept.__dict__ = {
            "key": None if keys is None else keys[n],
            "headers": None if headers is None else headers[n],
            "timestamp": stamp,
            "timestamp_type": kind,
            "holds": holds,
        }
        append(kept)
    return out


def stamp_block(companion: ObjectRef, data: bytes | bytearray, count: int) -> list[Any] | None:
    """The ``(ms, type)`` pairs of a whole block of a timestamps file, its uncompressed bytes
    ``data`` parsed at once (:meth:`~blockgz.formats.base.Format.int_pair_block`); ``None``
    when its format cannot (JSON lines of ``[int,int]`` can): then it is decoded entry by
    entry.

    >>> ref = ObjectRef(".t+0+0000000007.timestamps.json", "t", 0, 7, "timestamps.json")
    >>> stamp_block(ref, b"[5,0]\\n[-1,-1]\\n", 2), stamp_block(ref, b"[5,0]\\n", 2)
    ([(5, 0), (None, None)], None)
    """
    pairs = format_of(companion).int_pair_block(data, count)
    if pairs is None:
        return None
    ms: Sequence[int | None]
    kinds: Sequence[int | None]
    ms, kinds = pairs
    if ms and min(ms) < 0:  # Kafka's -1, "none", as None
        ms = [None if m < 0 else m for m in ms]
    if kinds and min(kinds) < 0:
        kinds = [None if k < 0 else k for k in kinds]
    return list(zip(ms, kinds, strict=True))


def _stamp_pairs(entries: list[Any]) -> list[Any]:
    """:func:`timestamp_entry` of each entry, without a call each: JSON's ``[ms, type]``
    lists with no ``-1`` in them (a record with a timestamp, as nearly all are) as they are.

    >>> _stamp_pairs([[5, 0], [-1, -1]]), _stamp_pairs([{"timestamp": 5, "type": 1}])
    ([(5, 0), (None, None)], [(5, 1)])
    >>> _stamp_pairs([[5, 0], [6, 1]])
    [[5, 0], [6, 1]]
    """
    if all(type(e) is list and len(e) == 2 and e[0] >= 0 and e[1] >= 0 for e in entries):
        return entries
    if all(type(e) is list and len(e) == 2 for e in entries):
        return [(None if ms < 0 else ms, None if kind < 0 else kind) for ms, kind in entries]
    return [timestamp_entry(e) for e in entries]


def timestamp_entry(entry: Any) -> tuple[int | None, int | None]:
    """A timestamps entry (JSON ``[ms, type]``, Avro ``{timestamp, type}``) as ``(ms, type)``;
    ``-1`` (Kafka's "none") as ``None``.

    >>> timestamp_entry([5, 0]), timestamp_entry({"timestamp": -1, "type": -1})
    ((5, 0), (None, None))
    """
    stamp, kind = (entry["timestamp"], entry["type"]) if isinstance(entry, dict) else entry
    return (None if stamp < 0 else stamp), (None if kind < 0 else kind)


def decoded_entry(fmt: str, entry: Any) -> Any:
    """A keys/headers entry as stored -> Python, as format ``fmt`` decodes it (JSON parsed,
    text and base64 to bytes)."""
    return FORMATS.get(fmt).decode_entry(entry)


__all__ = [
    "SIDECAR_STAMPS",
    "block_with_entries",
    "check_entries",
    "companions_for",
    "decoded_column",
    "decoded_entry",
    "from_text",
    "is_sidecar_stamps",
    "joined",
    "joined_columns",
    "stamp_block",
    "stamp_pairs",
    "timestamp_entry",
    "with_companions",
    "with_entries",
]
