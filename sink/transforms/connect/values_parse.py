"""A text typed as Kafka Connect's ``Values.parseString`` (Kafka 4.1.1) types it.

``InsertHeader``'s ``value.literal`` is typed this way: ``null``, ``true``/``false`` (lower
case only), an array ``[..]`` or map ``{..}`` of such values, an ISO date/time/timestamp, the
smallest integer type that holds a number, else ``float32`` (``float64`` past float32's range)
for a number with a fractional scale, else a ``Decimal``; anything else is the string itself.
Only the first token of a top-level number counts (``12:30:00`` is int8 ``12``).

>>> parse_string("1e3")
(1000, {'type': 'int16', 'optional': False})
>>> parse_string("[1,2.5]")
([1.0, 2.5], {'type': 'array', 'optional': False, 'items': {'type': 'float32', 'optional': False}})
>>> parse_string("null")
(None, None)
"""

from __future__ import annotations

import datetime as dt
import math
import re
import struct
from decimal import Decimal, InvalidOperation
from typing import Any

from blockgz.sink.transforms.connect.javadate import from_julian_fields

_DELIMITERS = ':,{}[]"'
_JAVA_SPACE = "".join(chr(i) for i in range(33))  # String.trim() strips chars <= ' '
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_INT_TYPES = (("int8", 7), ("int16", 15), ("int32", 31), ("int64", 63))
_WIDTH = {"int8": 0, "int16": 1, "int32": 2, "int64": 3, "float32": 4, "float64": 5}
_DATE = re.compile(r"(\d+)-(\d+)-(\d+)")
_TIME = re.compile(r"(\d+):(\d+):(\d+)\.(\d+)Z")
_TIMESTAMP = re.compile(r"(\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)\.(\d+)Z")
_TEMPORAL_NAMES = {f"org.apache.kafka.connect.data.{n}" for n in ("Date", "Time", "Timestamp")}
_EPOCH = dt.date(1970, 1, 1)
_MS_PER_DAY = 86_400_000

Typed = tuple[Any, dict[str, Any] | None]
#: The shared schema of elements of different types (Connect's array/map of no element type).
_MIXED: dict[str, Any] = {"type": "mixed"}


class _Unparsable(Exception):
    """An array or map that is not well formed (the text is then a string)."""


def _schema(kind: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "optional": False, **extra}


class _Tokens:
    """The text split at Connect's delimiters (each its own token; ``\\`` escapes one)."""

    def __init__(self, text: str):
        self.text = text
        self.pos = 0
        self.previous: str | None = None

    def has_next(self) -> bool:
        return self.pos < len(self.text)

    def _end_of_token(self) -> int:
        escaped = False
        index = self.pos
        while index < len(self.text):
            char = self.text[index]
            if char == "\\":
                escaped = not escaped
            elif char in _DELIMITERS and not escaped:
                return index if index > self.pos else index + 1
            else:
                escaped = False
            index += 1
        return index

    def next(self) -> str:
        end = self._end_of_token()
        self.previous = self.text[self.pos : end]
        self.pos = end
        return self.previous

    def next_n(self, count: int) -> str | None:
        """The text of the next ``count`` tokens, or ``None`` (and nothing read) if fewer."""
        start = self.pos
        for _ in range(count):
            if not self.has_next():
                self.pos = start
                return None
            self.next()
        return self.text[start : self.pos]

    def can_consume(self, expected: str) -> bool:
        """Read the next non-blank token if it is ``expected`` (blanks around it ignored)."""
        last = self.pos
        while self.has_next():
            last = self.pos
            token = self.next()
            if token.strip(_JAVA_SPACE) == expected:
                return True
            if token.strip(_JAVA_SPACE):
                break
        self.pos = last  # blanks before a token that is not ``expected`` are read, as Java's
        return False


def parse_string(text: str | None) -> Typed:
    """``(value, schema)`` of ``text``; ``(None, None)`` for ``null``. Values are as a
    :class:`~blockgz.sink.transforms.Record` holds them (Date epoch days, Time/Timestamp epoch
    ms, Decimal unscaled big-endian bytes)."""
    if text is None:
        return None, None
    if not text:
        return "", _schema("string")
    found = _parse(_Tokens(text), embedded=False)
    return found if found is not None else (None, None)


def _single_literal(tokens: _Tokens, embedded: bool, literal: str) -> bool:
    start = tokens.pos
    if tokens.can_consume(literal) and (embedded or not tokens.has_next()):
        return True
    tokens.pos = start
    return False


def _parse(tokens: _Tokens, embedded: bool) -> Typed | None:
    """The next value (``None`` for a null), as Connect's recursive parser reads it."""
    if not tokens.has_next():
        return None
    if embedded and tokens.can_consume('"'):
        return _quoted(tokens)
    if _single_literal(tokens, embedded, "null"):
        return None
    for literal in ("true", "false"):
        if _single_literal(tokens, embedded, literal):
            return literal == "true", _schema("boolean")
    start = tokens.pos
    try:
        if tokens.can_consume("["):
            return _array(tokens)
        if tokens.can_consume("{"):
            return _map(tokens)
    except _Unparsable:
        tokens.pos = start
    return _scalar(tokens, embedded)


def _quoted(tokens: _Tokens) -> Typed:
    parts = []
    while tokens.has_next() and not tokens.can_consume('"'):
        parts.append(tokens.next())
    content = "".join(parts)
    typed = parse_string(content)
    if typed[1] is not None and typed[1].get("name") in _TEMPORAL_NAMES:
        return typed
    return content, _schema("string")


def _array(tokens: _Tokens) -> Typed:
    items: list[Any] = []
    item_schema: dict[str, Any] | None = None
    while tokens.has_next():
        if tokens.can_consume("]"):
            if item_schema is None or item_schema is _MIXED:
                return items, _schema("array", items=None)
            return [_align(v, item_schema) for v in items], _schema("array", items=item_schema)
        if tokens.can_consume(","):
            raise _Unparsable("empty array element")
        element = _parse(tokens, embedded=True)
        item_schema = _common(item_schema, element)
        items.append(element[0] if element is not None else None)
        mark = tokens.pos
        if tokens.can_consume("]"):
            tokens.pos = mark
        elif not tokens.can_consume(","):
            raise _Unparsable("array elements missing ','")
    raise _Unparsable("array not closed")


def _map(tokens: _Tokens) -> Typed:
    entries: dict[Any, Any] = {}
    key_schema: dict[str, Any] | None = None
    value_schema: dict[str, Any] | None = None
    while tokens.has_next():
        if tokens.can_consume("}"):
            if key_schema is None or key_schema is _MIXED:
                return entries, _schema("map", keys=None, values=None)
            if value_schema is None or value_schema is _MIXED:
                keyed = {_align(k, key_schema): v for k, v in entries.items()}
                return keyed, _schema("map", keys=key_schema, values=None)
            aligned = {_align(k, key_schema): _align(v, value_schema) for k, v in entries.items()}
            return aligned, _schema("map", keys=key_schema, values=value_schema)
        if tokens.can_consume(","):
            raise _Unparsable("map entry with no key or value")
        key = _parse(tokens, embedded=True)
        if key is None or key[0] is None:
            raise _Unparsable("null map key")
        if not tokens.can_consume(":"):
            raise _Unparsable("map entry missing ':'")
        value = _parse(tokens, embedded=True)
        entries[key[0]] = value[0] if value is not None else None
        tokens.can_consume(",")
        key_schema = _common(key_schema, key)
        value_schema = _common(value_schema, value)
    raise _Unparsable("map not closed")


def _common(previous: dict[str, Any] | None, latest: Typed | None) -> dict[str, Any] | None:
    """The schema shared by the elements so far: numbers widen; ``_MIXED`` (for good) once
    two elements share none; ``None`` while every element is null."""
    schema = None if latest is None else latest[1]  # an element's schema is None when null
    if schema is None or previous is _MIXED:
        return previous
    if previous is None or previous["type"] == schema["type"]:
        return previous or schema
    old, new = _WIDTH.get(previous["type"]), _WIDTH.get(schema["type"])
    if old is None or new is None:
        return _MIXED
    return schema if new > old else previous


def _align(value: Any, schema: dict[str, Any]) -> Any:
    """An element converted to the array's (or map's) shared type."""
    if value is None:
        raise _Unparsable("null element in a typed array or map")
    kind = schema["type"]
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    if kind in ("float32", "float64") and numeric:
        return _float32(float(value)) if kind == "float32" else float(value)
    if kind == "string" and not isinstance(value, str | dict | list | bytes):
        return _java_text(value)
    if (kind in _WIDTH) != numeric or (kind == "boolean") != isinstance(value, bool):
        raise _Unparsable(f"cannot align {value!r} to {kind}")
    return value


def _java_text(value: Any) -> str:
    """``String.valueOf`` of a parsed boolean or number."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _float32(number: float) -> float:
    return struct.unpack("f", struct.pack("f", number))[0]


def _scalar(tokens: _Tokens, embedded: bool) -> Typed:
    token = tokens.next()
    if not token.strip(_JAVA_SPACE):
        return token, _schema("string")
    token = token.strip(_JAVA_SPACE)
    if token[0].isdigit():
        mark = tokens.pos
        rest = tokens.next_n(4)
        temporal = _temporal(token + rest) if rest is not None else None
        if temporal is not None:
            return temporal
        tokens.pos = mark
        temporal = _temporal(token)
        if temporal is not None:
            return temporal
    if token[0].isdigit() or token[0] in "+-":
        number = _number(token)
        if number is not None:
            return number
    if embedded:
        raise _Unparsable("not a value")
    return tokens.text, _schema("string")


def _number(token: str) -> Typed | None:
    """A number as BigDecimal reads it, in the narrowest Connect type (None: not a number)."""
    if not _NUMBER.fullmatch(token):
        return None
    try:
        number = Decimal(token)
    except InvalidOperation:
        return None
    scale = -int(number.as_tuple().exponent)
    if number.adjusted() < 20 and number == number.to_integral_value():
        whole = int(number)
        for kind, bits in _INT_TYPES:
            if -(1 << bits) <= whole < (1 << bits):
                return whole, _schema(kind)
    if scale != 0:
        as_double = float(number)
        if _float32_finite(as_double):
            return _float32(as_double), _schema("float32")
        if as_double not in (float("inf"), float("-inf")):
            return as_double, _schema("float64")
    return _decimal(number, scale)


def _float32_finite(number: float) -> bool:
    try:
        return math.isfinite(_float32(number))
    except OverflowError:
        return False


def _decimal(number: Decimal, scale: int) -> Typed:
    sign, digits, _ = number.as_tuple()
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    size = ((unscaled if unscaled >= 0 else ~unscaled).bit_length() + 8) // 8
    schema = _schema(
        "bytes",
        name="org.apache.kafka.connect.data.Decimal",
        version=1,
        parameters={"scale": str(scale)},
    )
    return unscaled.to_bytes(size, "big", signed=True), schema


def _logical(kind: str, name: str) -> dict[str, Any]:
    return _schema(kind, name=f"org.apache.kafka.connect.data.{name}", version=1)


def _day(year: int, month: int, day: int) -> dt.date | None:
    """A lenient (month 13 is next January) date, Julian before 1582-10-15, as Java's."""
    years, month0 = divmod(year * 12 + month - 1, 12)
    try:
        first = from_julian_fields(years, month0 + 1, 1)
        return first + dt.timedelta(days=day - 1)
    except (ValueError, OverflowError):
        return None


def _temporal(text: str) -> Typed | None:
    """An ISO date (``yyyy-MM-dd``), time (``HH:mm:ss.SSS'Z'``) or timestamp, in UTC."""
    text = text.replace("\\:", ":")
    if len(text) == 13 and (match := _TIME.fullmatch(text)):
        h, m, s, ms = map(int, match.groups())
        return ((h * 60 + m) * 60 + s) * 1000 + ms, _logical("int32", "Time")
    if len(text) == 24 and (match := _TIMESTAMP.fullmatch(text)):
        y, mo, d, h, m, s, ms = map(int, match.groups())
        day = _day(y, mo, d)
        if day is None:
            return None
        since = (day - _EPOCH).days * _MS_PER_DAY
        return since + ((h * 60 + m) * 60 + s) * 1000 + ms, _logical("int64", "Timestamp")
    if len(text) == 10 and (match := _DATE.fullmatch(text)):
        day = _day(*map(int, match.groups()))
        return None if day is None else ((day - _EPOCH).days, _logical("int32", "Date"))
    return None
