"""Avro schemas as Spark types, for value.format=avro."""

from __future__ import annotations

import pytest

from blockgz.errors import ConfigError
from reader.avro_types import avro_to_ddl


def test_every_kind_of_avro_type_maps_as_from_avro_does():
    schema = {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "ok", "type": "boolean"},
            {"name": "n", "type": "int"},
            {"name": "price", "type": {"type": "bytes", "logicalType": "decimal",
                                       "precision": 9, "scale": 2}},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["A", "B"]}},
            {"name": "raw", "type": {"type": "fixed", "name": "Raw", "size": 4}},
            {"name": "attrs", "type": {"type": "map", "values": "double"}},
            {"name": "next", "type": ["null", "State"]},
            {"name": "child", "type": ["null", {"type": "record", "name": "Line",
                                                "fields": [{"name": "q", "type": "float"}]}]},
            {"name": "lines", "type": {"type": "array", "items": "Line"}},
        ],
    }  # fmt: skip
    assert avro_to_ddl(schema) == (
        "STRUCT<`ok`: BOOLEAN, `n`: INT, `price`: DECIMAL(9, 2), `day`: DATE, `id`: STRING, "
        "`state`: STRING, `raw`: BINARY, `attrs`: MAP<STRING, DOUBLE>, `next`: STRING, "
        "`child`: STRUCT<`q`: FLOAT>, `lines`: ARRAY<STRUCT<`q`: FLOAT>>>"
    )
    assert avro_to_ddl('"string"') == "STRING"


def test_a_union_of_several_types_is_refused_naming_the_field():
    schema = {"type": "record", "name": "R", "fields": [{"name": "u", "type": ["int", "string"]}]}
    with pytest.raises(ConfigError, match=r"orders value\.u: an Avro union of 2 non-null types"):
        avro_to_ddl(schema, where="orders value")
