"""To and from the ``{"schema": ..., "payload": ...}`` envelope of Kafka's JsonConverter.

Inside a :class:`~blockgz.sink.transforms.Record`, ``bytes`` are Python ``bytes``; in the
envelope they are base64 text, as JsonConverter writes them.

>>> doc = to_connect_json({"type": "bytes", "optional": False}, b"hi")
>>> doc
{'schema': {'type': 'bytes', 'optional': False}, 'payload': 'aGk='}
>>> from_connect_json(doc)
({'type': 'bytes', 'optional': False}, b'hi')
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

#: JsonConverter writes Connect's FLOAT32/FLOAT64 as "float"/"double"; inside a Record the
#: transforms (and the sink's Avro bridge) use Connect's own names, "float32"/"float64".
_JSON_NAMES = {"float32": "float", "float64": "double"}
_CONNECT_NAMES = {json_name: name for name, json_name in _JSON_NAMES.items()}


def to_connect_json(schema: Any, value: Any) -> dict[str, Any]:
    """The envelope of a value (``schema`` ``None``: schemaless, written as it is)."""
    if schema is None:
        return {"schema": None, "payload": value}
    return {"schema": _renamed(schema, _JSON_NAMES), "payload": _walk(schema, value, _b64_encode)}


def from_connect_json(doc: Mapping[str, Any]) -> tuple[Any, Any]:
    """The ``(schema, value)`` of an envelope.

    >>> from_connect_json({"schema": {"type": "double", "optional": False}, "payload": 1.5})
    ({'type': 'float64', 'optional': False}, 1.5)
    """
    schema = doc.get("schema")
    payload = doc.get("payload")
    if schema is None:
        return None, payload
    schema = _renamed(schema, _CONNECT_NAMES)
    return schema, _walk(schema, payload, _b64_decode)


def _renamed(schema: Any, names: Mapping[str, str]) -> Any:
    """``schema`` with its (and its parts') type names mapped by ``names``."""
    if isinstance(schema, list):
        return [_renamed(part, names) for part in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = dict(schema)
    if out.get("type") in names:
        out["type"] = names[out["type"]]
    for part in ("fields", "items", "keys", "values"):
        if part in out:
            out[part] = _renamed(out[part], names)
    return out


def _b64_encode(value: Any) -> Any:
    return base64.b64encode(bytes(value)).decode("ascii")


def _b64_decode(value: Any) -> Any:
    return base64.b64decode(value) if isinstance(value, str) else value


def _walk(schema: Any, value: Any, on_bytes: Callable[[Any], Any]) -> Any:
    """``value`` with every ``bytes`` leaf (per ``schema``) passed through ``on_bytes``."""
    if value is None or not isinstance(schema, Mapping):
        return value
    kind = schema.get("type")
    if kind == "bytes":
        return on_bytes(value)
    if kind == "struct":
        return {
            spec["field"]: _walk(spec, value.get(spec["field"]), on_bytes)
            for spec in schema.get("fields", ())
        }
    if kind == "array":
        return [_walk(schema.get("items"), item, on_bytes) for item in value]
    if kind == "map":
        keys, values = schema.get("keys"), schema.get("values")
        if isinstance(value, Mapping):
            return {k: _walk(values, v, on_bytes) for k, v in value.items()}
        return [[_walk(keys, k, on_bytes), _walk(values, v, on_bytes)] for k, v in value]
    return value
