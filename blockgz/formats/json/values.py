"""JSON values parsed into an Arrow struct, a block of newline-separated values at a time.

The Spark reader's ``value.schema`` names the fields wanted; a value usually holds many more.
Two parsers give one result:

* **msgspec** decodes the lines straight into the fields asked for and skips the others
  without building them: 0.8 ms for a 1 MiB block of 18-field events, against 2.3 ms for
  Arrow's JSON reader, which builds every field before dropping the unwanted ones. It takes
  the types a JSON value maps to exactly: strings, integers, doubles, booleans, and structs
  and lists of those.
  It also takes dates (ISO ``YYYY-MM-DD`` strings) and maps with string keys and values of
  those types, which Arrow's reader cannot read from JSON.
* **Arrow's JSON reader** takes every other type (timestamps, decimals, binary, float), and any
  block msgspec refuses; its result or its error is then the answer, so a value is accepted or
  refused the same way whichever parser saw it first. Dates reach it as strings and are cast.

Both follow the same line rules: blank lines are skipped (the caller compares the row count
with the records it expects), and a value that is JSON ``null`` becomes a row whose fields are
all null, as a missing field is null. One difference remains: for a key given twice in one
object msgspec keeps the last value, where Arrow refuses the object.

>>> import pyarrow as pa
>>> values = parse_json_lines(b'{"n": 1, "s": "a", "x": [1]}\\nnull\\n', pa.struct([("n", pa.int64()), ("s", pa.string())]))
>>> values.to_pylist()
[{'n': 1, 's': 'a'}, {'n': None, 's': None}]
"""  # noqa: E501

from __future__ import annotations

import datetime
import functools
import io
import operator
import re
from types import GenericAlias
from typing import Any

from blockgz.errors import BadRecordError

#: A line that is the JSON literal ``null``: Arrow 26's reader crashes the process (SIGSEGV)
#: when the first line of its input is one, so these become ``{}`` (the same row) before it.
_NULL_LINE = re.compile(rb"^[ \t\r]*null[ \t\r]*$", re.MULTILINE)


def parse_json_lines(lines: bytes | bytearray, value_type: Any, *, source: str = "") -> Any:
    """One struct of ``value_type`` per non-blank line of ``lines`` (a ``pyarrow.StructArray``).

    Raises :class:`~blockgz.errors.BadRecordError` naming ``source`` when a value does not
    parse as JSON of the type.
    """
    decoder = _msgspec_decoder(value_type)
    if decoder is not None:
        try:
            return _struct_column(decoder.decode_lines(lines), value_type, top=True)
        except Exception:  # any refusal (type, range, syntax): Arrow's reader gives the answer
            pass
    return _arrow_parsed(lines, value_type, source)


def _arrow_parsed(lines: bytes | bytearray, value_type: Any, source: str) -> Any:
    import pyarrow as pa
    import pyarrow.json as pj

    schema = pa.schema(list(_dates_as_strings(value_type)))
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    try:
        # One thread per block: the blocks of a scan are already spread over the cores (Spark
        # tasks, the reader's pool), and Arrow's threads there only add hand-offs.
        table = pj.read_json(
            io.BytesIO(_NULL_LINE.sub(b"{}", lines)),
            read_options=pj.ReadOptions(use_threads=False),
            parse_options=options,
        )
    except pa.ArrowInvalid as exc:
        raise BadRecordError(
            f"{source}: a value does not parse as JSON of the schema given (value.schema): {exc}"
        ) from exc
    table = table.select(schema.names).combine_chunks()
    parsed = pa.StructArray.from_arrays(
        [table.column(n).chunk(0) if table.num_rows else pa.array([], f.type)
         for n, f in zip(schema.names, schema, strict=True)],
        fields=list(schema),
    )  # fmt: skip
    if parsed.type == value_type:
        return parsed
    try:
        return _with_dates(parsed, value_type)
    except pa.ArrowInvalid as exc:
        raise BadRecordError(f"{source}: a date in a value is not YYYY-MM-DD: {exc}") from exc


def _dates_as_strings(arrow_type: Any) -> Any:
    """``arrow_type`` with every date replaced by a string: Arrow's JSON reader reads a date
    only from a number of days, so dates are read as text and cast (:func:`_with_dates`)."""
    import pyarrow as pa

    if pa.types.is_date32(arrow_type):
        return pa.string()
    if pa.types.is_struct(arrow_type):
        return pa.struct([f.with_type(_dates_as_strings(f.type)) for f in arrow_type])
    if pa.types.is_list(arrow_type):
        item = arrow_type.value_field
        return pa.list_(item.with_type(_dates_as_strings(item.type)))
    return arrow_type


def _with_dates(array: Any, arrow_type: Any) -> Any:
    """``array`` (read with :func:`_dates_as_strings`) as ``arrow_type``: the strings cast to
    dates, structs and lists rebuilt around them with their nulls."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if array.type == arrow_type:
        return array
    mask = array.is_null() if array.null_count else None
    if pa.types.is_date32(arrow_type):
        return pc.cast(array, arrow_type)
    if pa.types.is_struct(arrow_type):
        children = [_with_dates(array.field(i), f.type) for i, f in enumerate(arrow_type)]
        return pa.StructArray.from_arrays(children, fields=list(arrow_type), mask=mask)
    items = _with_dates(array.values, arrow_type.value_type)  # a list
    return pa.ListArray.from_arrays(array.offsets, items, type=arrow_type, mask=mask)


# -- msgspec: decoding into the fields asked for ----------------------------------------------
@functools.lru_cache(maxsize=64)
def _msgspec_decoder(value_type: Any) -> Any:
    """A decoder of lines into ``value_type`` (or ``None`` lines); ``None`` when msgspec is
    not installed or a field's type is one only Arrow's reader converts."""
    try:
        import msgspec
    except ImportError:  # pragma: no cover - msgspec comes with the spark extra
        return None
    annotation = _annotation(value_type, msgspec)
    return None if annotation is None else msgspec.json.Decoder(annotation | None)


def _annotation(arrow_type: Any, msgspec: Any) -> Any:
    """The Python type msgspec decodes a JSON value of ``arrow_type`` into, exactly."""
    import pyarrow as pa

    if pa.types.is_string(arrow_type):
        return str
    if pa.types.is_boolean(arrow_type):
        return bool
    if pa.types.is_signed_integer(arrow_type):
        return int  # the column's range is checked when the array is built
    if pa.types.is_float64(arrow_type):
        return float  # msgspec, like Arrow, takes an integer for a double
    if pa.types.is_date32(arrow_type):
        return datetime.date  # from "YYYY-MM-DD" only
    if pa.types.is_map(arrow_type):
        key, item = arrow_type.key_type, arrow_type.item_type
        value = None if _nested(item) else _annotation(item, msgspec)
        if value is None or not pa.types.is_string(key):
            return None
        return GenericAlias(dict, (str, value | None))  # dict[str, value | None], built at run time
    if pa.types.is_list(arrow_type):
        item = _annotation(arrow_type.value_type, msgspec)
        return None if item is None else GenericAlias(list, (item | None,))
    if pa.types.is_struct(arrow_type):
        fields = []
        for position, field in enumerate(arrow_type):
            annotation = _annotation(field.type, msgspec)
            if annotation is None:
                return None
            fields.append((f"f{position}", annotation | None, None))
        # Attributes f0, f1, ... renamed to the JSON names, which need not be identifiers.
        rename = {f"f{p}": field.name for p, field in enumerate(arrow_type)}
        return msgspec.defstruct("Value", fields, rename=rename)
    return None


def _nested(arrow_type: Any) -> bool:
    import pyarrow as pa

    return (
        pa.types.is_struct(arrow_type)
        or pa.types.is_list(arrow_type)
        or pa.types.is_map(arrow_type)
    )


def _struct_column(values: list, arrow_type: Any, *, top: bool = False) -> Any:
    """``values`` (decoded structs, or ``None``) as a StructArray. A ``None`` on the top level
    (a ``null`` line) is a row of nulls, as Arrow's reader makes it; below, a null struct."""
    import pyarrow as pa

    missing = values.count(None)
    if missing:
        children = [
            _column([None if v is None else getattr(v, f"f{p}") for v in values], field.type)
            for p, field in enumerate(arrow_type)
        ]
        mask = None if top else pa.array([v is None for v in values])
    else:
        children = [
            _column(list(map(operator.attrgetter(f"f{p}"), values)), field.type)
            for p, field in enumerate(arrow_type)
        ]
        mask = None
    return pa.StructArray.from_arrays(children, fields=list(arrow_type), mask=mask)


def _column(values: list, arrow_type: Any) -> Any:
    import pyarrow as pa

    if pa.types.is_struct(arrow_type):
        return _struct_column(values, arrow_type)
    if pa.types.is_list(arrow_type) and pa.types.is_struct(arrow_type.value_type):
        offsets, nulls = [0], []
        items: list[Any] = []
        for value in values:
            nulls.append(value is None)
            items.extend(value or ())
            offsets.append(len(items))
        return pa.ListArray.from_arrays(
            pa.array(offsets, pa.int32()),
            _struct_column(items, arrow_type.value_type),
            type=arrow_type,
            mask=pa.array(nulls) if any(nulls) else None,
        )
    return pa.array(values, arrow_type)
