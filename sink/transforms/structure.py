"""Connect's structure transforms: ``Flatten`` and ``Cast`` (``$Key``/``$Value``).

>>> from blockgz.sink.transforms.options import TransformOptions
>>> from blockgz.sink.transforms.connect.record import Record
>>> flat = TRANSFORMS["Flatten$Value"](TransformOptions("t", {"delimiter": "_"}))
>>> flat(Record("t", 0, None, None, {"a": {"b": 1}, "c": [1]}, None, None)).value
{'a_b': 1, 'c': [1]}
>>> cast = TRANSFORMS["Cast$Value"](TransformOptions("t", {"spec": "a:string,b:int8"}))
>>> cast(Record("t", 0, None, None, {"a": 1.5, "b": 300}, None, None)).value
{'a': '1.5', 'b': 44}
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import struct
from decimal import Decimal
from typing import Any

from blockgz.sink.transforms.connect.record import (
    Record,
    Rejected,
    Side,
    copy_basics,
    field_schema,
    is_struct,
    require_map,
    require_struct,
    sided,
)
from blockgz.sink.transforms.options import TransformOptions


def flatten(opts: TransformOptions, side: Side) -> Any:
    """Nested structs (or maps) become top-level fields joined by ``delimiter``."""
    delimiter = opts.text("delimiter", ".")

    def flat_map(data: dict[str, Any], prefix: str, out: dict[str, Any]) -> None:
        for key, item in data.items():
            name = prefix + str(key)
            if isinstance(item, dict):
                flat_map(item, name + delimiter, out)
            else:
                out[name] = item

    def flat_schema(schema: dict[str, Any], prefix: str, optional: bool, out: list) -> None:
        for spec in schema["fields"]:
            name = prefix + spec["field"]
            inner = optional or bool(spec.get("optional"))
            if spec.get("type") == "struct":
                flat_schema(spec, name + delimiter, inner, out)
            elif spec.get("type") == "map":  # Connect refuses a map in a schema'd record
                raise Rejected(f"Flatten does not support MAP for record with schemas ({name})")
            else:
                out.append({**field_schema(spec), "optional": inner, "field": name})

    def flat_struct(schema: dict[str, Any], data: Any, prefix: str, out: dict) -> None:
        for spec in schema["fields"]:
            name = prefix + spec["field"]
            item = None if data is None else data.get(spec["field"])
            if spec.get("type") == "struct":
                flat_struct(spec, item, name + delimiter, out)
            else:
                out[name] = item

    def apply(record: Record) -> Record:
        value, schema = side.value(record), side.schema(record)
        if value is None:
            return record
        if schema is None:
            out: dict[str, Any] = {}
            flat_map(require_map(value, "flattening"), "", out)
            return side.set(record, None, out)
        data = require_struct(schema, value, "flattening")
        fields: list[dict[str, Any]] = []
        flat_schema(schema, "", False, fields)
        flat: dict[str, Any] = {}
        flat_struct(schema, data, "", flat)
        return side.set(record, copy_basics(schema, fields), flat)

    return apply


CAST_TYPES = ("int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string")
_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def _wrap(number: int, bits: int) -> int:
    """Java's narrowing of an integer to ``bits`` (two's complement)."""
    mask = (1 << bits) - 1
    number &= mask
    return number - (1 << bits) if number >> (bits - 1) else number


def _float32(number: float) -> float:
    return struct.unpack("f", struct.pack("f", number))[0]


def java_double_text(number: float) -> str:
    """``Double.toString`` for the common cases (``1.0``, ``1.0E10``, ``NaN``)."""
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0 or 1e-3 <= abs(number) < 1e7:
        text = repr(float(number))
        return text if "." in text or "e" in text else text + ".0"
    sign, digits, exponent = Decimal(repr(float(number))).normalize().as_tuple()
    text = "".join(map(str, digits))
    mantissa = ("-" if sign else "") + text[0] + "." + (text[1:] or "0")
    return f"{mantissa}E{len(text) - 1 + int(exponent)}"


def _to_number(value: Any, target: str) -> Any:
    if isinstance(value, bool):
        number: Any = 1 if value else 0
    elif isinstance(value, str):
        try:
            number = int(value) if target in _BITS else float(value)
        except ValueError:
            raise Rejected(f"cannot cast {value!r} to {target}") from None
    elif isinstance(value, (int, float, Decimal)):
        number = value
    else:
        raise Rejected(f"cannot cast a {type(value).__name__} to {target}")
    if target in _BITS:
        if isinstance(number, float) and (math.isnan(number) or math.isinf(number)):
            raise Rejected(f"cannot cast {number} to {target}")
        if isinstance(number, float):  # Java's (long)/(int) of a double saturates, then narrows
            bits = 64 if target == "int64" else 32
            number = max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, int(number)))
        return _wrap(int(number), _BITS[target])
    return _float32(float(number)) if target == "float32" else float(number)


def cast_value(value: Any, target: str) -> Any:
    """``value`` cast to a Connect primitive ``target`` as Connect's ``Cast`` does."""
    if value is None:
        return None
    if target == "boolean":
        if isinstance(value, str):
            return value.strip().lower() == "true"
        if isinstance(value, float) and math.isnan(value):
            return False  # Java's (long) NaN is 0
        if isinstance(value, float) and math.isinf(value):
            return True
        if isinstance(value, (bool, int, float, Decimal)):
            return int(value) != 0  # Java's Number.longValue() != 0: 0.125 is false
        raise Rejected(f"cannot cast a {type(value).__name__} to boolean")
    if target == "string":
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):
            return java_double_text(value)
        if isinstance(value, (bytes, bytearray)):
            return base64.b64encode(value).decode("ascii")
        if isinstance(value, (int, str, Decimal)):
            return str(value)
        raise Rejected(f"cannot cast a {type(value).__name__} to string")
    return _to_number(value, target)


def _parse_spec(opts: TransformOptions) -> tuple[str | None, dict[str, str]]:
    """``spec``: one type for the whole value, or ``field:type`` pairs."""
    parts = opts.names("spec")
    if not parts:
        raise opts.error("spec", "missing (this transform needs it)")
    whole, casts = None, {}
    for part in parts:
        name, sep, target = part.rpartition(":")
        target = target.strip().lower()
        if target not in CAST_TYPES:
            raise opts.error("spec", f"{target!r} is not one of " + ", ".join(CAST_TYPES))
        if sep:
            casts[name.strip()] = target
        elif len(parts) == 1:
            whole = target
        else:
            raise opts.error("spec", "a whole-value type cannot be mixed with field:type pairs")
    return whole, casts


_TIME_MS = {
    "org.apache.kafka.connect.data.Timestamp": 1,
    "org.apache.kafka.connect.data.Time": 1,
    "org.apache.kafka.connect.data.Date": 86_400_000,
}
_DAY_MS = 86_400_000


def java_date_text(millis: int) -> str:
    """Connect's text of a ``java.util.Date`` (``Values.dateFormatFor``): a time of day
    below one day's ms (negative ones too), a date at midnight, else an ISO timestamp (UTC).

    >>> java_date_text(0), java_date_text(86_400_000), java_date_text(1_234_567_890_123)
    ('00:00:00.000Z', '1970-01-02', '2009-02-13T23:31:30.123Z')
    """
    when = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=millis)
    if millis < _DAY_MS:
        return when.strftime("%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
    if millis % _DAY_MS == 0:
        return f"{when.year:04d}-{when.month:02d}-{when.day:02d}"
    return (
        f"{when.year:04d}-" + when.strftime("%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"
    )


def _cast_typed(value: Any, schema: Any, target: str) -> Any:
    """``cast_value``, except that Connect writes a Timestamp/Date/Time cast to string as
    the text of its ``java.util.Date``."""
    name = (schema or {}).get("name") or ""
    unit = _TIME_MS.get(name)
    if target == "string" and unit is not None and isinstance(value, int):
        return java_date_text(value * unit)
    if name == "org.apache.kafka.connect.data.Decimal" and isinstance(value, bytes | bytearray):
        # a Decimal's unscaled bytes: Connect casts the BigDecimal they stand for
        scale = int((schema.get("parameters") or {}).get("scale", 0))
        value = Decimal(int.from_bytes(value, "big", signed=True)).scaleb(-scale)
    return cast_value(value, target)


def cast(opts: TransformOptions, side: Side) -> Any:
    """Cast fields (or the whole key/value) to another primitive type."""
    whole, casts = _parse_spec(opts)

    def apply(record: Record) -> Record:
        value, schema = side.value(record), side.schema(record)
        if whole is not None:
            new_schema = None
            if schema is not None:
                if is_struct(schema) or schema.get("type") in ("array", "map"):
                    raise Rejected("only primitive values can be cast as a whole")
                new_schema = {"type": whole, "optional": bool(schema.get("optional"))}
            return side.set(record, new_schema, _cast_typed(value, schema, whole))
        if value is None:
            return record
        if schema is None:
            data = dict(require_map(value, "cast types"))
            for name, target in casts.items():  # Connect puts a missing field as null
                data[name] = cast_value(data.get(name), target)
            return side.set(record, None, data)
        data = require_struct(schema, value, "cast types")
        fields = []
        out = {}
        for spec in schema["fields"]:
            cast_to = casts.get(spec["field"])
            if cast_to is None:
                fields.append(spec)
                out[spec["field"]] = data.get(spec["field"])
                continue
            new_spec = {
                "type": cast_to,
                "optional": bool(spec.get("optional")),
                "field": spec["field"],
            }
            if "default" in spec and spec["default"] is not None:
                new_spec["default"] = _cast_typed(spec["default"], spec, cast_to)
            fields.append(new_spec)
            out[spec["field"]] = _cast_typed(data.get(spec["field"]), spec, cast_to)
        return side.set(record, copy_basics(schema, fields), out)

    return apply


TRANSFORMS: dict[str, Any] = {**sided("Flatten", flatten), **sided("Cast", cast)}
