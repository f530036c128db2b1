"""Records with the keys, headers and timestamps kept in the objects beside them.

Each entry is decoded by the format its object's extension names
(:meth:`blockgz.formats.base.Format.decode_entry`); an object whose extension names no format
raises :class:`~blockgz.errors.UnknownFormatError` instead of being read as bytes.

>>> from blockgz.format.decode import Record, _KeptRecord
>>> decoded_entry("json", b'{"base64": "AAE="}')
b'\\x00\\x01'
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from blockgz.archive.object_ref import ObjectRef
from blockgz.format.decode import Record, _KeptRecord
from blockgz.formats.base import from_text
from blockgz.formats.registry import FORMATS, format_of


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


def companions_for(ref: ObjectRef, timestamps: bool) -> ObjectRef:
    """``ref``, without its timestamps companion unless ``timestamps``: readers fetch that
    file only when the record timestamps are wanted (a time window, a restore).

    >>> stamps = ObjectRef(".t+0+0000000007.timestamps.json", "t", 0, 7, "timestamps.json")
    >>> ref = ObjectRef("t+0+0000000007.json", "t", 0, 7, "json", companions=(stamps,))
    >>> companions_for(ref, False).companions, companions_for(ref, True) is ref
    ((), True)
    """
    if timestamps or not any(c.role == "timestamps" for c in ref.companions):
        return ref
    return replace(ref, companions=tuple(c for c in ref.companions if c.role != "timestamps"))


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
    per block (JSON lines parsed as one document), not once per record: a replay reads
    millions of records, and this was most of its reading cost.

    >>> ref = ObjectRef("t+0+0000000007.timestamps.json", "t", 0, 7, "timestamps.json")
    >>> block_with_entries([Record(7, b"v"), Record(8, b"w")], (ref,), [[b"[5,0]", b"[6,1]"]])
    [Record(offset=7, value=b'v', timestamp=5, timestamp_type=0), \
Record(offset=8, value=b'w', timestamp=6, timestamp_type=1)]
    """
    count = len(records)
    found: dict[str, list[Any]] = {}
    for companion, column in zip(companions, columns, strict=True):
        if len(column) < count:
            raise IndexError(f"{companion.key}: {len(column)} entries for {count} records")
        found[companion.role] = format_of(companion).decode_entries(column[:count])
    keys = found.get("keys")
    headers = found.get("headers")
    if headers is not None:  # no headers and an empty list are the same to Kafka
        headers = [[(h["key"], from_text(h["value"])) for h in e] if e else None for e in headers]
    stamps = found.get("timestamps")
    if stamps is not None:
        stamps = _stamp_pairs(stamps)
    added = frozenset(_HOLDS[role] for role in found)
    if keys is None and headers is None and stamps is not None:
        return _with_stamps(records, stamps, added)
    holds_of: dict[frozenset[str], frozenset[str]] = {}
    out = []
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


def _with_stamps(
    records: list[Record], stamps: list[tuple[int | None, int | None]], added: frozenset[str]
) -> list[Record]:
    """The records with their timestamps alone added (what an export keeps by default): the
    loop of :func:`block_with_entries` with nothing else to look up per record."""
    out = []
    append, new = out.append, tuple.__new__
    for record, (stamp, kind) in zip(records, stamps, strict=True):
        kept = new(_KeptRecord, record)  # (offset, value)
        if record.holds:  # a record that kept more (an envelope): keep its key and headers
            kept.__dict__ = {
                "key": record.key,
                "headers": record.headers,
                "timestamp": stamp,
                "timestamp_type": kind,
                "holds": record.holds | added,
            }
        else:
            kept.__dict__ = {
                "key": None,
                "headers": None,
                "timestamp": stamp,
                "timestamp_type": kind,
                "holds": added,
            }
        append(kept)
    return out


def _stamp_pairs(entries: list[Any]) -> list[tuple[int | None, int | None]]:
    """:func:`timestamp_entry` of each entry, JSON's ``[ms, type]`` lists without a call each.

    >>> _stamp_pairs([[5, 0], [-1, -1]]), _stamp_pairs([{"timestamp": 5, "type": 1}])
    ([(5, 0), (None, None)], [(5, 1)])
    """
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
    "block_with_entries",
    "companions_for",
    "decoded_entry",
    "from_text",
    "timestamp_entry",
    "with_companions",
    "with_entries",
]
