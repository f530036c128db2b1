"""Connect's ``TimestampConverter$Key/$Value``: a timestamp between ``string`` (with
``format``), ``unix`` (``unix.precision``), ``Date``, ``Time`` and ``Timestamp``, for the whole
key/value or one ``field``.

With a schema, ``Timestamp``/``Time`` values are epoch milliseconds and ``Date`` epoch days
(Connect's JSON payloads); schemaless, they are UTC :class:`datetime.datetime` objects.

>>> from blockgz.sink.transforms.options import TransformOptions
>>> from blockgz.sink.transforms.connect.record import Record
>>> t = TRANSFORMS["TimestampConverter$Value"](TransformOptions("t", {
...     "field": "at", "target.type": "string", "format": "yyyy-MM-dd"}))
>>> t(Record("t", 0, None, None, {"at": 86_400_000}, None, None)).value
{'at': '1970-01-02'}
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from blockgz.sink.transforms.connect.javadate import JavaDateFormat
from blockgz.sink.transforms.connect.record import (
    Record,
    Rejected,
    Side,
    copy_basics,
    find_field,
    require_map,
    require_struct,
    sided,
)
from blockgz.sink.transforms.options import TransformOptions

TARGETS = ("string", "unix", "Date", "Time", "Timestamp")
PRECISIONS = {"seconds": 1, "milliseconds": 1_000, "microseconds": 1_000_000, "nanoseconds": 10**9}
_LOGICAL = "org.apache.kafka.connect.data."
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_DAY_MS = 86_400_000


def _schema_for(target: str, optional: bool) -> dict[str, Any]:
    if target == "string":
        return {"type": "string", "optional": optional}
    if target == "unix":
        return {"type": "int64", "optional": optional}
    kind = "int32" if target in ("Date", "Time") else "int64"
    return {"type": kind, "optional": optional, "name": _LOGICAL + target, "version": 1}


class Converter:
    """Reads any supported timestamp to epoch ms and writes the target type."""

    def __init__(self, opts: TransformOptions):
        self.target = opts.choice("target.type", TARGETS)
        pattern = opts.text("format", "")
        if self.target == "string" and not pattern:
            raise opts.error("format", "needed when target.type=string (a SimpleDateFormat)")
        self.format = JavaDateFormat(pattern) if pattern else None
        precision = opts.choice("unix.precision", tuple(PRECISIONS), "milliseconds")
        self.per_second = PRECISIONS[precision]

    def to_millis(self, value: Any, schema: Any) -> int:
        """Epoch ms of a value typed by its ``schema`` (or by its Python type)."""
        name = (schema or {}).get("name", "")
        if schema is not None and not name and schema.get("type") not in ("int64", "string"):
            # Connect reads a time by the schema: int64 (unix), string, or a logical type
            raise Rejected(f"schema {schema.get('type')} does not correspond to a timestamp type")
        if isinstance(value, dt.datetime):
            return int((value - _EPOCH).total_seconds() * 1000)
        if name == _LOGICAL + "Date" and isinstance(value, int):
            return value * _DAY_MS
        if name in (_LOGICAL + "Timestamp", _LOGICAL + "Time") and isinstance(value, int):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return _java_div(value * 1000, self.per_second)
        if isinstance(value, str):
            if self.format is None:
                raise Rejected("a string timestamp needs the format option")
            try:
                return int((self.format.parse(value) - _EPOCH).total_seconds() * 1000)
            except ValueError as exc:
                raise Rejected(f"could not parse timestamp: {exc}") from None
        raise Rejected(f"cannot read a timestamp from a {type(value).__name__}")

    def from_millis(self, millis: int, schemaless: bool) -> Any:
        """The target type of epoch ms."""
        if self.target == "unix":  # no date needed (Python's end at years 1 and 9999)
            return _java_div(millis * self.per_second, 1000)
        if self.target == "string":  # any year, as Java prints it (1 BC, Julian before 1582)
            assert self.format is not None
            return self.format.format_millis(millis)
        if self.target == "Date":
            days = millis // _DAY_MS
            return _EPOCH + dt.timedelta(days=days) if schemaless else days
        if self.target == "Time":
            ms = millis % _DAY_MS
            return _EPOCH + dt.timedelta(milliseconds=ms) if schemaless else ms
        return _EPOCH + dt.timedelta(milliseconds=millis) if schemaless else millis

    def convert(self, value: Any, schema: Any, schemaless: bool) -> Any:
        """``value`` in the target type (``None`` stays ``None``)."""
        if value is None:
            return None
        millis = self.to_millis(value, schema)
        try:
            return self.from_millis(millis, schemaless)
        except OverflowError:  # a schemaless datetime past Python's years 1-9999 is refused
            raise Rejected(f"timestamp {millis} ms is out of range for a date") from None


def _java_div(dividend: int, divisor: int) -> int:
    """Java's integer division (``TimeUnit`` conversions): toward zero, not floored.

    >>> _java_div(-21794495508, 1000000), -21794495508 // 1000000
    (-21794, -21795)
    """
    quotient = abs(dividend) // divisor
    return quotient if dividend >= 0 else -quotient


def timestamp_converter(opts: TransformOptions, side: Side) -> Any:
    """Convert the whole key/value, or its ``field``, to ``target.type``."""
    converter = Converter(opts)
    name = opts.text("field", "")

    def apply(record: Record) -> Record:
        value, schema = side.value(record), side.schema(record)
        if schema is None:
            if not name:
                return side.set(record, None, converter.convert(value, None, True))
            if value is None:
                return record
            data = dict(require_map(value, "converting timestamp formats"))
            data[name] = converter.convert(data.get(name), None, True)
            return side.set(record, None, data)
        if not name:
            optional = bool(schema.get("optional"))
            new_schema = _schema_for(converter.target, optional)
            return side.set(record, new_schema, converter.convert(value, schema, False))
        if value is None:
            return record
        data = dict(require_struct(schema, value, "converting timestamp formats"))
        spec = find_field(schema, name)
        if spec is None:
            raise Rejected(f"{name} is not a valid field name")
        data[name] = converter.convert(data.get(name), spec, False)
        fields = [
            {**_schema_for(converter.target, bool(f.get("optional"))), "field": name}
            if f["field"] == name
            else f
            for f in schema["fields"]
        ]
        return side.set(record, copy_basics(schema, fields), data)

    return apply


TRANSFORMS: dict[str, Any] = sided("TimestampConverter", timestamp_converter)
