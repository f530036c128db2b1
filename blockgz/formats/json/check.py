"""Is this JSON? Validation without building the value, for values stored byte for byte.

The sink checks every JSON value it stores as it is. Parsing with ``orjson.loads`` builds each
value's dicts and strings only to drop them (~1.5 µs for a 200-byte event, most of the sink's
own CPU per record); msgspec's decoder into :class:`msgspec.Raw` walks the same grammar and
builds nothing (~0.2 µs). What it does not check is done here: the text must be UTF-8 (one
pass over the whole batch, ASCII in the common case). Anything msgspec refuses is asked of
orjson, so nothing orjson accepts is refused (msgspec nests less deeply); the only values
accepted that orjson refuses are numbers beyond a double's range (``1e999``), which JSON's
grammar allows and Python's and msgspec's readers read back.

>>> valid_json(b'{"a": [1, 2.5, "x"]}'), valid_json(b'{"a": tru}'), valid_json(b'"\\xff"')
(True, False, False)
>>> all_valid([b'{"a":1}', b'[2]'], b'{"a":1}\\n[2]\\n'), all_valid([b'{"a":1}', b'{'], b'')
(True, False)
"""

from __future__ import annotations

import msgspec
import orjson

_RAW = msgspec.json.Decoder(msgspec.Raw)


def _utf8(data: bytes | bytearray | memoryview) -> bool:
    if isinstance(data, memoryview):
        data = data.tobytes()
    if data.isascii():
        return True
    try:
        bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _orjson_valid(value: bytes) -> bool:
    try:
        orjson.loads(value)
    except orjson.JSONDecodeError:
        return False
    return True


def valid_json(value: bytes) -> bool:
    """Whether ``value`` is one JSON text in UTF-8 (whitespace around it allowed)."""
    try:
        _RAW.decode(value)
    except (msgspec.DecodeError, RecursionError):  # too deep for msgspec: orjson decides
        return _orjson_valid(value)
    return _utf8(value)


def all_valid(values: list[bytes], joined: bytes | bytearray | memoryview) -> bool:
    """Whether every one of ``values`` is valid JSON; ``joined`` is their bytes together (in
    any framing), checked for UTF-8 in one pass."""
    decode = _RAW.decode
    try:
        for value in values:
            decode(value)
    except (msgspec.DecodeError, RecursionError):  # too deep for msgspec: orjson decides
        return all(valid_json(v) for v in values)
    return _utf8(joined) or all(valid_json(v) for v in values)


def invalid_rows(values: list[bytes]) -> list[int]:
    """The positions of the values that are not valid JSON.

    >>> invalid_rows([b"1", b"{", b"[]", b"nope"])
    [1, 3]
    """
    decode = _RAW.decode
    bad = []
    for i, value in enumerate(values):
        try:
            decode(value)
        except (msgspec.DecodeError, RecursionError):  # too deep for msgspec: orjson decides
            if not _orjson_valid(value):
                bad.append(i)
    if not _utf8(b"".join(values)):
        bad = [i for i, v in enumerate(values) if not valid_json(v)]
    return bad
