"""Connect's field transforms as Connect documents them: schemaless maps and structs."""

from __future__ import annotations

import pytest

from blockgz.errors import BadRecordError, ConfigError
from blockgz.sink.transforms import Record, build_chain

K = "org.apache.kafka.connect.transforms."
STRUCT = {
    "type": "struct",
    "name": "shop.Order",
    "version": 3,
    "optional": False,
    "fields": [
        {"field": "id", "type": "int64", "optional": False},
        {"field": "name", "type": "string", "optional": True},
        {"field": "price", "type": "float64", "optional": True},
    ],
}


def run(kind: str, value, schema=None, **options):
    config = {"transforms": "t", "transforms.t.type": K + kind}
    config.update({f"transforms.t.{k.replace('_', '.')}": v for k, v in options.items()})
    return build_chain(config).apply(Record("orders", 2, b"k", None, value, schema, 1000, (), 7))


def test_insert_field_schemaless_adds_topic_partition_offset_timestamp_static():
    out = run(
        "InsertField$Value",
        {"id": 1},
        topic_field="t",
        partition_field="p",
        offset_field="o",
        timestamp_field="ts",
        static_field="s",
        static_value="v",
    )
    assert out.value == {"id": 1, "t": "orders", "p": 2, "o": 7, "ts": 1000, "s": "v"}


def test_insert_field_with_schema_appends_fields_with_connect_types():
    out = run("InsertField$Value", {"id": 1, "name": None, "price": 2.0}, STRUCT,
              topic_field="t!", timestamp_field="ts")  # fmt: skip
    added = out.value_schema["fields"][3:]
    assert [(f["field"], f["type"], f["optional"]) for f in added] == [
        ("t", "string", False),
        ("ts", "int64", True),
    ]
    assert added[1]["name"] == "org.apache.kafka.connect.data.Timestamp"
    assert out.value_schema["name"] == "shop.Order" and out.value_schema["version"] == 3
    assert out.value["t"] == "orders" and out.value["ts"] == 1000


def test_insert_field_passes_tombstones_and_rejects_non_maps():
    assert run("InsertField$Value", None, static_field="s", static_value="v").value is None
    with pytest.raises(BadRecordError, match="transform t: only maps"):
        run("InsertField$Value", [1, 2], static_field="s", static_value="v")


def test_replace_field_exclude_include_renames():
    value = {"id": 1, "name": "n", "price": 2.5}
    assert run("ReplaceField$Value", value, exclude="price").value == {"id": 1, "name": "n"}
    assert run("ReplaceField$Value", value, include="id,price").value == {"id": 1, "price": 2.5}
    out = run("ReplaceField$Value", value, STRUCT, renames="name:title", exclude="price")
    assert out.value == {"id": 1, "title": "n"}
    assert [f["field"] for f in out.value_schema["fields"]] == ["id", "title"]


def test_replace_field_bad_renames_is_one_line():
    with pytest.raises(ConfigError, match=r"transforms.t.renames=a: 'a' is not a from:to pair"):
        run("ReplaceField$Value", {}, renames="a")


def test_mask_field_zeroes_by_type_and_takes_a_replacement():
    value = {"id": 5, "name": "secret", "price": 9.5, "ok": True, "tags": ["a"]}
    out = run("MaskField$Value", value, fields="id,name,price,ok,tags")
    assert out.value == {"id": 0, "name": "", "price": 0.0, "ok": False, "tags": []}
    out = run("MaskField$Value", {"name": "secret"}, fields="name", replacement="***")
    assert out.value == {"name": "***"}
    with pytest.raises(BadRecordError, match="custom replacement"):
        run("MaskField$Value", {"ok": True}, fields="ok", replacement="x")


def test_extract_field_schemaless_and_struct():
    assert run("ExtractField$Value", {"id": 4}, field="id").value == 4
    assert run("ExtractField$Value", {"x": 4}, field="id").value is None
    out = run("ExtractField$Value", {"id": 4, "name": None, "price": None}, STRUCT, field="id")
    assert out.value == 4 and out.value_schema == {"type": "int64", "optional": False}
    with pytest.raises(BadRecordError, match="unknown field: nope"):
        run("ExtractField$Value", {"id": 4}, STRUCT, field="nope")


def test_extract_field_key():
    config = {"transforms": "t", "transforms.t.type": K + "ExtractField$Key",
              "transforms.t.field": "id"}  # fmt: skip
    out = build_chain(config).apply(Record("t", 0, {"id": 9}, None, 1, None, None))
    assert out.key == 9 and out.value == 1


def test_hoist_field_wraps_value_and_schema():
    assert run("HoistField$Value", 42, field="n").value == {"n": 42}
    out = run("HoistField$Value", 42, {"type": "int32", "optional": False}, field="n")
    assert out.value_schema["fields"] == [{"type": "int32", "optional": False, "field": "n"}]


def test_value_to_key_builds_key_from_value_fields():
    out = run("ValueToKey", {"id": 3, "name": "x"}, fields="id")
    assert out.key == {"id": 3} and out.key_schema is None
    out = run("ValueToKey", {"id": 3, "name": "x", "price": None}, STRUCT, fields="id,name")
    assert [f["field"] for f in out.key_schema["fields"]] == ["id", "name"]
    with pytest.raises(BadRecordError, match="field does not exist: nope"):
        run("ValueToKey", {"id": 3}, STRUCT, fields="nope")
    with pytest.raises(BadRecordError, match="found: null"):
        run("ValueToKey", None, fields="id")
