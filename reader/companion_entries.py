"""Records with the keys and headers kept in the ``.keys``/``.headers`` objects beside them.

>>> from blockgz.format.decode import Record
>>> decoded_entry("json", b'{"base64": "AAE="}')
b'\\x00\\x01'
"""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any

from blockgz.archive.layout import ObjectRef
from blockgz.format.decode import Record


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
    found = {c.role: decoded_entry(c.format, e) for c, e in zip(companions, entries, strict=True)}
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
    """A keys/headers entry as stored -> Python: JSON parsed (text and base64 to bytes)."""
    if fmt == "json":
        doc = json.loads(entry)
        return doc if isinstance(doc, list) else from_text(doc)
    if isinstance(entry, str):  # an Avro "string" key
        return entry.encode()
    return entry  # bytearray bytes, Avro bytes, a decoded Avro key or headers list


def from_text(doc: Any) -> Any:
    """Text back to bytes, ``{"base64": ...}`` to its bytes; other JSON as it is."""
    if isinstance(doc, str):
        return doc.encode()
    if isinstance(doc, dict) and set(doc) == {"base64"}:
        return base64.b64decode(doc["base64"])
    return doc
