"""Debezium's ``ExtractNewRecordState``: a change event's envelope becomes its row state.

An envelope is a struct value whose schema has ``op`` and ``after`` (Debezium names it
``<server>.<db>.<table>.Envelope``); anything else (schema change or heartbeat events,
schemaless values) passes unchanged, as in Debezium. Options:

* ``delete.tombstone.handling.mode``: ``drop`` (deletes and tombstones dropped),
  ``tombstone`` (a delete becomes a tombstone, tombstones dropped; the default), ``rewrite``
  (a delete is its ``before`` state with ``__deleted=true``; tombstones dropped),
  ``rewrite-with-tombstone`` (the same, tombstones kept, with only the ``op`` header, ``d``),
  ``delete-to-tombstone`` (a delete becomes a tombstone, tombstones dropped). The older
  ``drop.tombstones`` and ``delete.handling.mode``, which Debezium 3 ignores, are refused.
* ``add.fields`` (``op``, ``ts_ms``, ``source.<field>`` or a bare source field name such as
  ``table``), ``add.fields.prefix`` (``__``), ``add.headers``, ``add.headers.prefix`` (``__``).

>>> from blockgz.sink.transforms.options import TransformOptions
>>> from blockgz.sink.transforms.connect.record import Record
>>> row = {"type": "struct", "optional": True, "name": "db.t.Value",
...        "fields": [{"field": "id", "type": "int32", "optional": False}]}
>>> env = {"type": "struct", "name": "db.t.Envelope", "optional": False, "fields": [
...     {**row, "field": "before"}, {**row, "field": "after"},
...     {"field": "op", "type": "string", "optional": False}]}
>>> t = TRANSFORMS["ExtractNewRecordState"](TransformOptions("t", {"add.fields": "op"}))
>>> out = t(Record("t", 0, None, None, {"before": None, "after": {"id": 1}, "op": "c"}, env, 0))
>>> out.value, [f["field"] for f in out.value_schema["fields"]]
({'id': 1, '__op': 'c'}, ['id', '__op'])
"""

from __future__ import annotations

from typing import Any

from blockgz.sink.transforms.connect.record import (
    Header,
    Record,
    Rejected,
    copy_basics,
    field_schema,
    find_field,
    is_struct,
)
from blockgz.sink.transforms.options import TransformOptions

MODES = ("drop", "tombstone", "rewrite", "rewrite-with-tombstone", "delete-to-tombstone")
#: Options of Debezium 1.x/2.x, replaced by ``delete.tombstone.handling.mode``.
LEGACY_OPTIONS = ("drop.tombstones", "delete.handling.mode")
ENVELOPE_FIELDS = ("op", "ts_ms", "ts_us", "ts_ns", "transaction", "before", "after", "source")
DELETED = "__deleted"


class FieldRef:
    """One ``add.fields``/``add.headers`` entry: where it is read and its new name."""

    def __init__(self, spec: str, prefix: str):
        struct, dot, name = spec.partition(".")
        self.struct: str | None  # None: a field of the envelope itself
        if dot:
            self.struct, self.name = struct, name
            self.new_name = prefix + struct + "_" + name
        else:
            self.struct = None if spec in ENVELOPE_FIELDS else "source"
            self.name = spec
            self.new_name = prefix + spec

    def read(self, schema: dict[str, Any], value: dict[str, Any]) -> tuple[Any, Any]:
        """``(schema, value)`` of the referenced field (``None`` schema: not present)."""
        if self.struct is not None:
            outer = find_field(schema, self.struct)
            if outer is None or not is_struct(outer):
                return None, None
            inner = find_field(outer, self.name)
            data = value.get(self.struct) or {}
            return (None, None) if inner is None else (field_schema(inner), data.get(self.name))
        spec = find_field(schema, self.name)
        return (None, None) if spec is None else (field_schema(spec), value.get(self.name))


def _modes(opts: TransformOptions) -> tuple[str, bool]:
    """``(what a delete becomes, whether tombstones are kept)``; the options Debezium 3 no
    longer reads are refused (Debezium 3.6.1 ignores them: a config that sets them would
    archive other records under Connect than the user asked for)."""
    for legacy in LEGACY_OPTIONS:
        if opts.text(legacy, None) is not None:
            raise opts.error(
                legacy,
                "Debezium 3 no longer reads it (it would be ignored); say what deletes and "
                "tombstones become with delete.tombstone.handling.mode=" + "|".join(MODES),
            )
    mode = opts.choice("delete.tombstone.handling.mode", MODES, "tombstone")
    return {
        "drop": ("drop", False),
        "tombstone": ("tombstone", False),  # Debezium 3.6.1 drops the tombstones it is given
        "rewrite": ("rewrite", False),
        "rewrite-with-tombstone": ("rewrite", True),
        "delete-to-tombstone": ("tombstone", False),
    }[mode]


def _header(name: str, schema: Any, value: Any) -> Header:
    """An ``add.headers`` header: Debezium makes its schema optional (3.6.1, differential test)."""
    return Header(name, value, None if schema is None else {**schema, "optional": True})


def _kept_tombstone(record: Record, add_headers: list[FieldRef]) -> Record:
    """A tombstone that ``rewrite-with-tombstone`` keeps: of the ``add.headers`` only ``op``
    is added, as ``d`` (a required string), as Debezium 3.6.1 does (differential test)."""
    ops = [ref for ref in add_headers if ref.struct is None and ref.name == "op"]
    if not ops:
        return record
    deleted = [Header(ref.new_name, "d", {"type": "string", "optional": False}) for ref in ops]
    return record.new(headers=(*record.headers, *deleted))


def extract_new_record_state(opts: TransformOptions) -> Any:
    """Unwrap Debezium change events (see the module docstring)."""
    on_delete, keep_tombstones = _modes(opts)
    field_prefix = opts.text("add.fields.prefix", "__")
    header_prefix = opts.text("add.headers.prefix", "__")
    add_fields = [FieldRef(s, field_prefix) for s in opts.names("add.fields")]
    add_headers = [FieldRef(s, header_prefix) for s in opts.names("add.headers")]
    rewrite = on_delete == "rewrite"

    def apply(record: Record) -> Record | None:
        schema, value = record.value_schema, record.value
        if value is None:
            return _kept_tombstone(record, add_headers) if keep_tombstones else None
        if not is_struct(schema) or not isinstance(value, dict):
            return record
        if find_field(schema, "op") is None or find_field(schema, "after") is None:
            return record
        headers = [_header(ref.new_name, *ref.read(schema, value)) for ref in add_headers]
        after = value.get("after")
        row_field = "after"
        if after is None:
            if on_delete == "drop":
                return None
            if on_delete == "tombstone":  # a null value of the row's schema, as Debezium 3.6.1
                row_schema = field_schema(find_field(schema, "before") or {})
                return record.new(
                    value=None,
                    value_schema=row_schema or None,
                    headers=(*record.headers, *headers),
                )
            row_field = "before"
        row_spec = find_field(schema, row_field)
        if row_spec is None:  # a delete (no "after") of an envelope without "before"
            raise Rejected(f"the change event's schema has no {row_field!r} field")
        row_schema, row = field_schema(row_spec), dict(value.get(row_field) or {})
        fields = list(row_schema.get("fields", ()))
        if rewrite:  # before the add.fields, as Debezium 3.6.1 orders them
            fields.append({"type": "string", "optional": True, "field": DELETED})
            row[DELETED] = "true" if after is None else "false"
        for ref in add_fields:
            ref_schema, ref_value = ref.read(schema, value)
            if ref_schema is None:
                continue
            fields.append({**ref_schema, "optional": True, "field": ref.new_name})
            row[ref.new_name] = ref_value
        new_schema = copy_basics(row_schema, fields)
        new_schema["optional"] = False
        return record.new(value=row, value_schema=new_schema, headers=(*record.headers, *headers))

    return apply


TRANSFORMS: dict[str, Any] = {"ExtractNewRecordState": extract_new_record_state}
