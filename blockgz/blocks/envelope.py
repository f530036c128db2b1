"""Records written with ``format.json.envelope=true``, read back with their key and headers.

The sink's envelope is one JSON object per record —
``{"topic", "partition", "offset", "timestamp", "key", "headers"?, "value"}`` — with keys and
header values as UTF-8 text, or ``{"base64": ...}`` when they are not text. :func:`unwrap`
turns such a line back into a :class:`~blockgz.blocks.decode.Record` whose ``value`` is the
value's JSON and whose ``key``, ``headers`` and ``timestamp`` are what Kafka held.

>>> line = b'{"topic":"t","partition":0,"offset":9,"timestamp":1000,"key":"k","value":[1]}'
>>> unwrap(Record(9, line))
Record(offset=9, value=b'[1]', key=b'k', timestamp=1000)
>>> unwrap(Record(9, b'{"a": 1}'))  # not an envelope: as it was
Record(offset=9, value=b'{"a": 1}')
"""

from __future__ import annotations

import base64
import json
from typing import Any

from blockgz.blocks.decode import ALL_KEPT, Record

#: An envelope keeps the key, headers and timestamp (not the timestamp's type).
ENVELOPE_HOLDS = ALL_KEPT

#: How an envelope line starts (the sink writes the keys in this order, compactly).
ENVELOPE_START = b'{"topic":'


def unwrap(record: Record) -> Record:
    """The record inside an envelope line (its offset must match), else ``record`` itself."""
    value = record.value
    if not isinstance(value, (bytes, bytearray)) or not value.startswith(ENVELOPE_START):
        return record
    try:
        doc = json.loads(value)
    except ValueError:
        return record
    if not isinstance(doc, dict) or doc.get("offset") != record.offset or "value" not in doc:
        return record
    headers = doc.get("headers")
    # ``"value": null`` is a tombstone (``behavior.on.null.values=write``): it comes back as
    # no value. A value that was the JSON text ``null`` reads the same way.
    value = doc["value"]
    return Record.kept(
        record.offset,
        None
        if value is None
        else json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode(),
        key=_bytes(doc.get("key")),
        headers=None if headers is None else [(str(k), _bytes(v)) for k, v in headers],
        timestamp=doc.get("timestamp"),
        timestamp_type=record.timestamp_type,  # from a timestamps file beside it, if any
        holds=ENVELOPE_HOLDS,
    )


def _bytes(text: Any) -> bytes | None:
    if text is None:
        return None
    if isinstance(text, dict) and "base64" in text:
        return base64.b64decode(text["base64"])
    return str(text).encode()
