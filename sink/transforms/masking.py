"""Connect's ``MaskField`` (``$Key``/``$Value``): listed fields replaced by their type's zero
value (``0``, ``false``, ``""``, an empty array or map, the epoch for a date) or by
``replacement``, parsed as the field's type.

>>> from blockgz.sink.transforms.options import TransformOptions
>>> from blockgz.sink.transforms.connect.record import VALUE, Record
>>> t = mask_field(TransformOptions("t", {"fields": "pin"}), VALUE)
>>> t(Record("t", 0, None, None, {"pin": 1234, "name": "a"}, None, None)).value
{'pin': 0, 'name': 'a'}
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from blockgz.sink.transforms.connect.record import (
    Record,
    Rejected,
    Side,
    find_field,
    require_map,
    require_struct,
)
from blockgz.sink.transforms.options import TransformOptions

_ZERO = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "float32": 0.0,
    "float64": 0.0,
    "boolean": False,
    "string": "",
    "array": [],
    "map": {},
    "date": 0,  # a Timestamp, Date or Time: Connect masks its java.util.Date to the epoch
}
_NUMERIC = {"int8", "int16", "int32", "int64", "float32", "float64"}


def _kind_of(value: Any) -> str | None:
    """The Connect type of a schemaless value (what ``MaskField`` masks it by)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, Decimal):
        return "decimal"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "map"
    return None


def _masked(kind: str | None, value: Any, replacement: str | None) -> Any:
    """Connect's masked value of a ``kind`` (zero-like, or the ``replacement``)."""
    if value is None:
        return None
    if replacement is None:
        if kind == "decimal":
            return Decimal(0)
        if kind not in _ZERO:
            raise Rejected(f"cannot mask a value of type {kind or type(value).__name__}")
        return type(_ZERO[kind])()
    if kind == "string":
        return replacement
    if kind in _NUMERIC or kind == "decimal":
        try:
            if kind.startswith("int"):
                return int(replacement)
            return Decimal(replacement) if kind == "decimal" else float(replacement)
        except ValueError:
            raise Rejected(f"cannot mask a {kind} with the replacement {replacement!r}") from None
    raise Rejected(f"cannot mask a value of type {kind} with a custom replacement")


def _masked_kind(spec: dict[str, Any]) -> str:
    """What ``MaskField`` masks a struct field as: Connect goes by the Java class of the value,
    so its logical types are a ``decimal`` or a ``date`` (which takes no custom replacement)."""
    name = spec.get("name") or ""
    if name.endswith(".Decimal"):
        return "decimal"
    if name in ("org.apache.kafka.connect.data." + t for t in ("Timestamp", "Date", "Time")):
        return "date"
    return spec["type"]


def _masked_decimal(spec: dict[str, Any], value: Any, replacement: str | None) -> Any:
    """A masked Decimal field's unscaled bytes: Connect masks to ``BigDecimal.ZERO`` (or the
    replacement), which must have the schema's scale.

    >>> spec = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
    ...         "parameters": {"scale": "2"}}
    >>> _masked_decimal(spec, b"1", "1.25")
    b'}'
    >>> _masked_decimal({**spec, "parameters": {"scale": "0"}}, b"1", None)
    b'\\x00'
    """
    if value is None:
        return None
    try:
        number = Decimal(replacement) if replacement is not None else Decimal(0)
    except ArithmeticError:
        raise Rejected(f"cannot mask a decimal with the replacement {replacement!r}") from None
    scale = int((spec.get("parameters") or {}).get("scale", 0))
    exponent = number.as_tuple().exponent
    if not isinstance(exponent, int) or -exponent != scale:
        raise Rejected(f"decimal value has mismatching scale for given Decimal schema ({scale})")
    unscaled = int(number.scaleb(scale))
    size = ((unscaled if unscaled >= 0 else ~unscaled).bit_length() + 8) // 8
    return unscaled.to_bytes(size, "big", signed=True)


def mask_field(opts: TransformOptions, side: Side) -> Any:
    """Replace ``fields`` with their type's zero (or ``replacement``)."""
    names = opts.names("fields")
    if not names:
        raise opts.error("fields", "missing (this transform needs it)")
    replacement = opts.text("replacement", None)

    def apply(record: Record) -> Record:
        value, schema = side.value(record), side.schema(record)
        # No early return for a null key or value: Connect refuses it (requireMap/requireStruct).
        if schema is None:
            out = dict(require_map(value, "masking fields"))
            for name in names:
                out[name] = _masked(_kind_of(out.get(name)), out.get(name), replacement)
            return side.set(record, None, out)
        out = dict(require_struct(schema, value, "masking fields"))
        for name in names:
            spec = find_field(schema, name)
            if spec is None:  # Connect masks the named fields the struct has, ignores others
                continue
            kind = _masked_kind(spec)
            if kind == "decimal":
                out[name] = _masked_decimal(spec, out.get(name), replacement)
                continue
            out[name] = _masked(kind, out.get(name), replacement)
        return side.set(record, schema, out)

    return apply
