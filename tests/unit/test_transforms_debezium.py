"""Debezium's ExtractNewRecordState on change events with schemas."""

from __future__ import annotations

import pytest

from blockgz.errors import ConfigError
from blockgz.sink.transforms import Record, build_chain

ROW = {"type": "struct", "optional": True, "name": "db.inv.customers.Value",
       "fields": [{"field": "id", "type": "int32", "optional": False},
                  {"field": "email", "type": "string", "optional": True}]}  # fmt: skip
SOURCE = {"type": "struct", "optional": False, "name": "io.debezium.connector.Source",
          "fields": [{"field": "table", "type": "string", "optional": True},
                     {"field": "ts_ms", "type": "int64", "optional": False}]}  # fmt: skip
ENVELOPE = {"type": "struct", "optional": False, "name": "db.inv.customers.Envelope",
            "fields": [{**ROW, "field": "before"}, {**ROW, "field": "after"},
                       {**SOURCE, "field": "source"},
                       {"field": "op", "type": "string", "optional": False},
                       {"field": "ts_ms", "type": "int64", "optional": True}]}  # fmt: skip


def event(op, before=None, after=None):
    value = {"before": before, "after": after, "source": {"table": "customers", "ts_ms": 9},
             "op": op, "ts_ms": 10}  # fmt: skip
    return Record("db.inv.customers", 0, b"k", None, value, ENVELOPE, 1)


def unwrap(**options):
    config = {
        "transforms": "u",
        "transforms.u.type": "io.debezium.transforms.ExtractNewRecordState",
    }
    config.update({f"transforms.u.{k}": v for k, v in options.items()})
    return build_chain(config)


def test_create_becomes_the_after_state_with_added_fields_and_headers():
    chain = unwrap(**{"add.fields": "op,table,source.ts_ms", "add.headers": "op"})
    out = chain.apply(event("c", after={"id": 1, "email": "a@b"}))
    assert out.value == {"id": 1, "email": "a@b", "__op": "c", "__table": "customers",
                         "__source_ts_ms": 9}  # fmt: skip
    assert out.value_schema["name"] == "db.inv.customers.Value"
    assert [f["field"] for f in out.value_schema["fields"]][-3:] == [
        "__op", "__table", "__source_ts_ms"]  # fmt: skip
    assert [(h.key, h.value) for h in out.headers] == [("__op", "c")]


def test_delete_and_tombstone_handling_modes():
    delete = event("d", before={"id": 1, "email": None})
    tombstone = Record("db.inv.customers", 0, b"k", None, None, None, 1)
    default = unwrap()
    assert default.apply(delete).value is None and default.apply(delete) is not None
    assert default.apply(tombstone) is None  # Debezium 3.6.1 (differential test) drops it
    drop = unwrap(**{"delete.tombstone.handling.mode": "drop"})
    assert drop.apply(delete) is None and drop.apply(tombstone) is None
    rewrite = unwrap(**{"delete.tombstone.handling.mode": "rewrite"})
    assert rewrite.apply(delete).value == {"id": 1, "email": None, "__deleted": "true"}
    assert rewrite.apply(event("u", after={"id": 2, "email": None})).value["__deleted"] == "false"
    assert rewrite.apply(tombstone) is None
    assert unwrap(**{"delete.tombstone.handling.mode": "rewrite-with-tombstone"}).apply(tombstone)


def test_options_debezium_3_ignores_are_refused_not_honoured_or_ignored():
    # Debezium 3.6.1 ignores them (differential test): honouring them would archive other
    # records than Connect, ignoring them would drop the user's intent silently.
    for option, value in (("drop.tombstones", "false"), ("delete.handling.mode", "rewrite")):
        with pytest.raises(ConfigError, match=rf"{option}={value}: Debezium 3 no longer reads it"):
            unwrap(**{option: value})


def test_other_values_pass_unchanged_and_bad_mode_is_one_line():
    record = Record("t", 0, None, None, {"not": "an envelope"}, None, 1)
    assert unwrap().apply(record) == record
    with pytest.raises(ConfigError, match="not one of drop, tombstone, rewrite"):
        unwrap(**{"delete.tombstone.handling.mode": "keep"})
