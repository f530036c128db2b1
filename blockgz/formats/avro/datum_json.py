"""Decoded values (what Avro decodes to) as JSON text: one rendering for every reader.

Times and dates as ISO-8601, decimals and UUIDs as text, bytes as base64; record fields in
their schema's order.

>>> import datetime as dt
>>> datum_json({"id": 7, "raw": b"\\x00", "at": dt.date(2026, 11, 23)})
b'{"id": 7, "raw": "AA==", "at": "2026-11-23"}'
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import uuid
from typing import Any


def json_default(value: Any) -> Any:
    """``json.dumps``'s ``default`` for what Avro decodes to."""
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def datum_json(value: Any) -> bytes:
    """A decoded value as JSON text (UTF-8)."""
    return json.dumps(value, default=json_default).encode()
