"""Records with the keys and headers kept in the ``.keys``/``.headers`` objects beside them.

Each entry is decoded by the format its object's extension names
(:meth:`blockgz.formats.base.Format.decode_entry`); an object whose extension names no format
raises :class:`~blockgz.errors.UnknownFormatError` instead of being read as bytes.

>>> from blockgz.format.decode import Record
>>> decoded_entry("json", b'{"base64": "AAE="}')
b'\\x00\\x01'
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from blockgz.archive.object_ref import ObjectRef
from blockgz.format.decode import Record
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


def with_entries(record: Record, companions: tuple[ObjectRef, ...], entries: list[Any]) -> Record:
    """The record with the key and headers its ``.keys``/``.headers`` entries hold."""
    found = {c.role: format_of(c).decode_entry(e) for c, e in zip(companions, entries, strict=True)}
    headers = record.headers
    if "headers" in found:  # no headers and an empty list are the same to Kafka
        kept = found["headers"]
        headers = [(h["key"], from_text(h["value"])) for h in kept] if kept else None
    return Record.kept(
        record.offset,
        record.value,
        key=found.get("keys", record.key),
        headers=headers,
        timestamp=record.timestamp,
    )


def decoded_entry(fmt: str, entry: Any) -> Any:
    """A keys/headers entry as stored -> Python, as format ``fmt`` decodes it (JSON parsed,
    text and base64 to bytes)."""
    return FORMATS.get(fmt).decode_entry(entry)


__all__ = ["decoded_entry", "from_text", "with_companions", "with_entries"]
