"""Avro schemas as Spark types, for value.format=avro."""

from __future__ import annotations

import pytest

from blockgz.errors import ConfigError
from blockgz.formats.avro.arrow_types import avro_to_ddl


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


def test_which_version_reads_the_others():
    import copy

    from blockgz.formats.avro.arrow_types import can_read, keeps_fields
    from testkit.avro_data import V1, V2, V3_INCOMPATIBLE

    assert can_read(V2, V1) and can_read(V1, V2)  # a default fills; an extra field is dropped
    assert not can_read(V3_INCOMPATIBLE, V1)  # an added field without a default
    assert keeps_fields(V2, V1) and not keeps_fields(V1, V2)
    renamed = copy.deepcopy(V1)
    renamed["fields"][2] = {"name": "nation", "type": "string", "aliases": ["country"]}
    assert can_read(renamed, V1) and keeps_fields(renamed, V1)
    narrowed = copy.deepcopy(V1)
    narrowed["fields"][0]["type"] = "int"  # long -> int does not resolve; int -> long does
    assert can_read(V1, narrowed) and not can_read(narrowed, V1)


def test_the_newest_schema_of_an_archive_is_not_a_quiet_partitions_older_one(tmp_path):
    """Partition 0 moved from V1 to V2; partition 1 (sorted last, no timestamps known) still
    holds V1 only: V2 reads both and drops no field, so it is the reader schema."""
    import json

    from blockgz.archive.layout import Layout
    from blockgz.formats.avro.upload import AvroUpload
    from blockgz.reader.spark.archive_source import newest_avro_schema
    from blockgz.store import LocalStore
    from testkit.avro_data import V1, V2, avro_value_for

    store = LocalStore(tmp_path)
    for partition, start, schema in ((0, 0, V1), (0, 5, V2), (1, 0, V1)):
        key = Layout().data_key("", f"e/partition={partition}", "e", partition, start, ".avro")
        with AvroUpload(store, key, schema) as out:
            out.write_many(
                [avro_value_for(partition, n, schema) for n in range(start, start + 5)],
                range(start, start + 5),
            )
    assert json.loads(newest_avro_schema({"path": str(tmp_path)})) == V2
    assert json.loads(newest_avro_schema({"path": str(tmp_path), "topics": "e"})) == V2
    with pytest.raises(ConfigError, match=r"no \.avro object"):
        newest_avro_schema({"path": str(tmp_path), "topics.regex": "nothing"})
