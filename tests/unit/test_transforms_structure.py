"""Connect's Flatten, Cast, TimestampConverter and SetSchemaMetadata."""

from __future__ import annotations

import datetime as dt

import pytest

from blockgz.errors import BadRecordError, ConfigError
from blockgz.sink.transforms import Record, build_chain

K = "org.apache.kafka.connect.transforms."
TS = "org.apache.kafka.connect.data.Timestamp"


def run(kind: str, value, schema=None, **options):
    config = {"transforms": "t", "transforms.t.type": K + kind}
    config.update({f"transforms.t.{k.replace('_', '.')}": v for k, v in options.items()})
    return build_chain(config).apply(Record("t", 0, None, None, value, schema, 5, ()))


def test_flatten_schemaless_and_struct_optional_parents():
    assert run("Flatten$Value", {"a": {"b": {"c": 1}}, "d": 2}).value == {"a.b.c": 1, "d": 2}
    inner = {"type": "struct", "optional": True, "field": "a",
             "fields": [{"field": "b", "type": "int32", "optional": False}]}  # fmt: skip
    schema = {"type": "struct", "optional": False, "name": "r", "fields": [inner]}
    out = run("Flatten$Value", {"a": None}, schema, delimiter="_")
    assert out.value == {"a_b": None}
    assert out.value_schema["fields"] == [{"type": "int32", "optional": True, "field": "a_b"}]
    assert out.value_schema["name"] == "r"


def test_cast_fields_and_whole_value_like_java():
    out = run("Cast$Value", {"a": "12", "b": 1.9, "c": 1, "d": 300, "e": True},
              spec="a:int32,b:int64,c:boolean,d:int8,e:string")  # fmt: skip
    assert out.value == {"a": 12, "b": 1, "c": True, "d": 44, "e": "true"}
    assert run("Cast$Value", 1.0, spec="string").value == "1.0"
    assert run("Cast$Value", 1e10, spec="string").value == "1.0E10"
    schema = {"type": "struct", "optional": False,
              "fields": [{"field": "a", "type": "int64", "optional": True}]}  # fmt: skip
    out = run("Cast$Value", {"a": 7}, schema, spec="a:string")
    assert out.value == {"a": "7"}
    assert out.value_schema["fields"] == [{"type": "string", "optional": True, "field": "a"}]


def test_cast_refuses_bad_types_and_values():
    with pytest.raises(ConfigError, match=r"'int7' is not one of int8, int16, int32, int64"):
        run("Cast$Value", {}, spec="a:int7")
    with pytest.raises(BadRecordError, match="cannot cast 'x' to int32"):
        run("Cast$Value", {"a": "x"}, spec="a:int32")


def test_timestamp_converter_between_types():
    out = run("TimestampConverter$Value", {"at": "2024-01-02 03:04:05"}, field="at",
              target_type="unix", format="yyyy-MM-dd HH:mm:ss")  # fmt: skip
    assert out.value == {"at": 1704164645000}
    out = run("TimestampConverter$Value", 1704164645, target_type="Timestamp",
              unix_precision="seconds")  # fmt: skip
    assert out.value == dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    schema = {"type": "int64", "optional": False, "name": TS, "version": 1}
    out = run("TimestampConverter$Value", 1704164645000, schema, target_type="Date")
    assert out.value == 19724
    assert out.value_schema["name"] == "org.apache.kafka.connect.data.Date"


def test_timestamp_converter_options_are_checked():
    with pytest.raises(ConfigError, match="not one of string, unix, Date, Time, Timestamp"):
        run("TimestampConverter$Value", 1, target_type="epoch")
    with pytest.raises(ConfigError, match=r"format: needed when target.type=string"):
        run("TimestampConverter$Value", 1, target_type="string")


def test_set_schema_metadata_and_schemaless_refusal():
    schema = {"type": "struct", "optional": False, "fields": [], "name": "a", "version": 1}
    out = run("SetSchemaMetadata$Value", {}, schema, schema_name="b", schema_version="4")
    assert out.value_schema["name"] == "b" and out.value_schema["version"] == 4
    with pytest.raises(BadRecordError, match="schema required"):
        run("SetSchemaMetadata$Value", {}, schema_name="b")
