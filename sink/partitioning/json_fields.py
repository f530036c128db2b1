"""Named fields of JSON values, with errors that name the record and show what is there.

Shared by the field partitioner and the ``RecordField`` timestamp extractor.

>>> from blockgz.sink.records import KafkaRecord
>>> r = KafkaRecord("t", 0, 5, None, None, b'{"user": {"country": "DE"}}')
>>> path = field_path("user.country", "opt")
>>> lookup_field(r, value_object(r, "test"), path, "user.country", "opt")
'DE'
"""

from __future__ import annotations

from typing import Any

from blockgz.errors import ConfigError
from blockgz.sink.records import KafkaRecord


def json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number with a fraction ({value!r})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def value_object(record: KafkaRecord, who: str) -> dict:
    if record.value is None:
        raise record.fail(f"the value is null (a tombstone); {who} needs a JSON object value")
    obj = record.json()
    if not isinstance(obj, dict):
        raise record.fail(f"{who} needs a JSON object value, but the value is {json_kind(obj)}")
    return obj


def _present(obj: dict, limit: int = 20) -> str:
    names = [str(k) for k in obj]
    if not names:
        return "(none: the object is empty)"
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def lookup_field(
    record: KafkaRecord, obj: dict, path: tuple[str, ...], name: str, option: str
) -> Any:
    """The field at ``path`` in ``obj``; a missing one fails naming the record and the fields."""
    current: Any = obj
    for depth, part in enumerate(path):
        parent = ".".join(path[:depth])
        if not isinstance(current, dict):
            raise record.fail(
                f"{option} {name!r} cannot be read: {parent!r} is {json_kind(current)}, "
                "not an object"
            )
        if part not in current:
            where = f" in {parent!r}" if parent else ""
            raise record.fail(
                f"{option} {name!r} is missing from the value; fields present{where}: "
                f"{_present(current)}"
            )
        current = current[part]
    return current


def field_path(name: str, option: str) -> tuple[str, ...]:
    parts = tuple(name.split("."))
    if not name or any(not p for p in parts):
        raise ConfigError(
            f"{option}: {name!r} is not a field name; allowed: a name, or a dotted path to a "
            "nested field such as user.country"
        )
    return parts
