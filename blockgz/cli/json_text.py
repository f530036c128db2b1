"""What the CLI prints as JSON is JSON (RFC 8259), whatever the archive holds.

Python's ``json`` writes ``NaN``, ``Infinity`` and ``-Infinity``, which no strict parser
(``jq``, JavaScript's ``JSON.parse``, Go, Jackson by default) reads. They come from two places:

* a JSON value archived as a number too large for a double (``1e999`` is valid JSON): parsed,
  it became ``inf`` and was printed ``Infinity``. :func:`parse_stored` keeps such a number as
  its archived text (:class:`RawNumber`) and :func:`dumps` writes that text back unchanged, so
  ``1e999`` comes out ``1e999``. A stored ``NaN``/``Infinity`` is not JSON text at all: it
  stays a string, as any value that does not parse.
* a decoded double (Avro, Parquet) that is NaN or infinite: JSON has no such number, so
  :func:`dumps` writes it as the string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` (as the
  Protobuf JSON mapping does; Spark's and Jackson's readers take these strings for doubles).

>>> value = parse_stored('{"big": 1e999, "small": -1E+999, "n": 2.5}')
>>> dumps({"offset": 3, "value": value})
'{"offset": 3, "value": {"big": 1e999, "small": -1E+999, "n": 2.5}}'
>>> dumps([float("nan"), float("inf"), -float("inf"), 1.0])
'["NaN", "Infinity", "-Infinity", 1.0]'
>>> parse_stored("NaN")
Traceback (most recent call last):
...
ValueError: NaN is not JSON text
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Callable
from typing import Any


class RawNumber:
    """A JSON number kept as its archived text (one a double cannot hold: ``1e999``)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self) -> str:
        return f"RawNumber({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RawNumber) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)


def _number(text: str) -> float | RawNumber:
    """A JSON number with a fraction or exponent: a float, or its text when out of range."""
    value = float(text)
    return value if math.isfinite(value) else RawNumber(text)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON text")


def parse_stored(text: str) -> Any:
    """A stored JSON value parsed strictly: ``NaN``/``Infinity`` are refused (``ValueError``,
    as for any text that is not JSON); a number a double cannot hold is a :class:`RawNumber`.

    >>> parse_stored("[1e999, 7]")
    [RawNumber('1e999'), 7]
    """
    return json.loads(text, parse_float=_number, parse_constant=_not_json)


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinite floats as strings, inside lists and dicts too.

    >>> _finite({"a": [float("-inf"), {"b": float("nan")}], "c": 1})
    {'a': ['-Infinity', {'b': 'NaN'}], 'c': 1}
    """
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def dumps(doc: Any, *, default: Callable[[Any], Any] | None = None, **kw: Any) -> str:
    """``json.dumps`` that never writes ``NaN``/``Infinity`` (see the module docstring):
    :class:`RawNumber` as its text, non-finite floats as strings; ``default`` as in
    ``json.dumps`` for other types; ``kw`` passed on (``indent``...)."""
    raw: dict[str, str] = {}
    nonce = uuid.uuid4().hex

    def placeholder(value: Any) -> Any:
        if isinstance(value, RawNumber):
            token = f"\x00{nonce}:{len(raw)}\x00"
            raw[json.dumps(token)] = value.text
            return token
        if default is None:
            raise TypeError(f"{type(value).__name__} is not JSON serialisable")
        return default(value)

    try:
        text = json.dumps(doc, default=placeholder, allow_nan=False, **kw)
    except ValueError:  # a NaN or infinite float somewhere: written as a string
        raw.clear()
        text = json.dumps(_finite(doc), default=placeholder, allow_nan=False, **kw)
    for token, number in raw.items():
        text = text.replace(token, number, 1)
    return text
