"""The one Avro → Arrow mapping, as the Parquet writer's columns and the reader's tables use it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from blockgz.errors import BadRecordError, ConfigError
from blockgz.formats.avro.arrow_schema import AvroArrow
from blockgz.formats.avro.arrow_types import avro_to_arrow
from blockgz.formats.parquet.schema import value_columns

SCHEMA = {
    "type": "record",
    "name": "R",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "m", "type": {"type": "map", "values": "double"}},
        {"name": "at", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}},
        {"name": "e2", "type": "E"},
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9}},
        {"name": "f", "type": {"type": "fixed", "name": "F", "size": 4}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "f2", "type": ["null", "F"], "default": None},
    ],
}
TYPES = [
    pa.int64(),
    pa.list_(pa.string()),
    pa.map_(pa.string(), pa.float64()),
    pa.timestamp("ms", tz="UTC"),
    pa.string(),
    pa.string(),
    pa.decimal128(9, 0),
    pa.binary(),
    pa.date32(),
    pa.binary(),
]


def test_both_users_get_the_types_of_the_one_mapping():
    columns = value_columns(SCHEMA).fields
    as_read = avro_to_arrow(SCHEMA)
    assert [f.type for f in columns] == TYPES
    assert [as_read.field(i).type for i in range(len(TYPES))] == TYPES
    assert [f.nullable for f in columns] == [False] * 3 + [True] + [False] * 5 + [True]
    assert all(as_read.field(i).nullable for i in range(as_read.num_fields))


def test_each_user_refuses_with_its_own_error():
    union = {"type": "record", "name": "U", "fields": [{"name": "u", "type": ["int", "string"]}]}
    with pytest.raises(BadRecordError, match=r"value\.u: .*no single Parquet column type"):
        value_columns(union)
    with pytest.raises(ConfigError, match=r"value\.u: .*union of 2 non-null types has no Arrow"):
        avro_to_arrow(union)
    with pytest.raises(ConfigError, match="'Nope' is not known here"):
        AvroArrow().arrow_type({"type": "array", "items": "Nope"})
