"""``spark.read.format("blockgz")`` on a real S3 server (SeaweedFS), counted at the server.

Pushdown is proven where it matters, at the server: a query for ten offsets of a partition
fetches its sidecar and one range of blocks, not the objects.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from testkit.archives import build_partition, export_batches, input_records, write_once
from testkit.connect_orders import CONNECT_JSON, orders
from testkit.s3 import s3_options


def read(spark, url: str, options: dict[str, str]):
    return spark.read.format("blockgz").options(**options).load(url)


def test_ten_offsets_fetch_one_sidecar_and_one_range(spark, weed_proxy, weed_bucket):
    from blockgz.store import open_store

    options = s3_options(weed_proxy.endpoint_url)
    store, prefix = open_store(f"s3://{weed_bucket}", options)
    expected = build_partition(store, prefix, objects=3, records_per_object=600, block_size=8192)
    weed_proxy.clear_log()
    rows = (
        read(spark, f"s3://{weed_bucket}", options)
        .where("topic = 'orders' AND partition = 0 AND offset BETWEEN 700 AND 709")
        .select("offset", "value")
        .collect()
    )
    assert [(r.offset, bytes(r.value)) for r in rows] == [(o, expected[o]) for o in range(700, 710)]
    gets = [r for r in weed_proxy.requests if r.method == "GET" and "list-type" not in r.query]
    data = [r for r in gets if r.path.endswith(".json.gz")]
    sidecars = [r for r in gets if r.path.endswith(".index.json")]
    assert len(sidecars) == 1 and len(data) == 1, [(r.path, r.query) for r in gets]
    assert data[0].headers.get("Range", "").startswith("bytes=")
    assert data[0].response_bytes < 20_000  # one or two blocks, not the object


def test_a_time_partitioned_export_reads_back_exactly(spark, weed_proxy, weed_bucket):
    options = s3_options(weed_proxy.endpoint_url)
    records = input_records(150)
    export_batches(f"s3://{weed_bucket}/arch", records, "hourly", batches=3, **options)
    frame = read(spark, f"s3://{weed_bucket}/arch", {**options, "blockgz.split.size": "3000"})
    assert frame.rdd.getNumPartitions() > 1  # many small splits
    got = sorted((r.partition, r.offset, bytes(r.value)) for r in frame.collect())
    assert got == sorted((r.partition, r.offset, r.value) for r in records)
    some = frame.where("partition IN (1) AND offset >= 100 AND offset < 140").collect()
    assert sorted(r.offset for r in some) == [
        r.offset for r in records if r.partition == 1 and 100 <= r.offset < 140
    ]


def test_a_time_window_fetches_only_the_objects_of_its_hours(spark, weed_proxy, weed_bucket):
    """An hourly archive with record timestamps (the JSON envelope): ``timestamp`` conditions
    skip, at planning, every object whose time range (kept in the manifests) is outside."""
    import datetime as dt
    from urllib.parse import unquote

    from testkit import archives

    options = s3_options(weed_proxy.endpoint_url)
    records = input_records(150)
    url = f"s3://{weed_bucket}/timed"
    export_batches(url, records, "hourly", batches=3, **options, **{"format.json.envelope": "true"})
    low = dt.datetime.fromtimestamp((archives.T0 + 2 * archives.HOUR) / 1000, dt.UTC)
    weed_proxy.clear_log()
    rows = (
        read(spark, url, options)
        .where(f"timestamp >= '{low.isoformat()}' AND timestamp < '{low + dt.timedelta(hours=1)}'")
        .select("partition", "offset", "timestamp")
        .collect()
    )
    wanted = [
        (r.partition, r.offset)
        for r in records
        if archives.T0 + 2 * archives.HOUR <= r.timestamp_ms < archives.T0 + 3 * archives.HOUR
    ]
    assert sorted((r.partition, r.offset) for r in rows) == sorted(wanted) and wanted
    data = {
        r.path
        for r in weed_proxy.requests
        if r.method == "GET" and "list-type" not in r.query and r.path.endswith(".json.gz")
    }
    assert data and all("hour=02/" in unquote(p) for p in data), sorted(data)


def test_a_time_window_fetches_only_the_blocks_of_its_seconds(spark, weed_proxy, weed_bucket):
    """One object of 600 records a second apart (the default partitioner, so its time range
    spans them all): the blocks' time ranges in its index let a 15-second window fetch one
    small range of it."""
    import datetime as dt

    from blockgz.store import open_store
    from testkit import archives

    options = s3_options(weed_proxy.endpoint_url)
    t0 = archives.T0
    url = f"s3://{weed_bucket}/seconds"
    archives.seconds_archive(url, 600, block_records=10, **options)
    low = dt.datetime.fromtimestamp((t0 + 300_000) / 1000, dt.UTC)
    weed_proxy.clear_log()
    rows = (
        read(spark, url, options)
        .where(
            f"timestamp >= '{low.isoformat()}' AND timestamp < '{low + dt.timedelta(seconds=15)}'"
        )
        .select("offset")
        .collect()
    )
    assert sorted(r.offset for r in rows) == list(range(300, 315))
    data = [
        r
        for r in weed_proxy.requests
        if r.method == "GET" and "list-type" not in r.query and r.path.endswith(".json.gz")
    ]
    assert len(data) == 1 and data[0].headers.get("Range", "").startswith("bytes=")
    store, prefix = open_store(url, options)
    (obj,) = [i for i in store.list(prefix) if i.key.endswith(".json.gz")]
    assert data[0].response_bytes * 10 < obj.size, (data[0].response_bytes, obj.size)


def test_values_parse_into_the_schema_given(spark, weed_proxy, weed_bucket):
    options = s3_options(weed_proxy.endpoint_url)
    records = input_records(40, partitions=1)
    export_batches(f"s3://{weed_bucket}/j", records, "field", batches=1, **options)
    frame = read(spark, f"s3://{weed_bucket}/j", {**options, "value.schema": "kind STRING, n INT"})
    rows = frame.where("offset <= 10").select("offset", "value.kind", "value.n").collect()
    expected = [r for r in records if r.offset <= 10]
    assert sorted((r.offset, r.kind, r.n) for r in rows) == [
        (r.offset, r.json()["kind"], r.json()["n"]) for r in expected
    ]


@pytest.fixture(scope="module")
def field_export(seaweed_s3):
    """A field-partitioned export with offset gaps, written once for the property test."""
    bucket = "r-field-property"
    seaweed_s3.client().create_bucket(Bucket=bucket)
    options = s3_options(seaweed_s3.endpoint_url)
    records = input_records(120)
    export_batches(f"s3://{bucket}/arch", records, "field", batches=3, **options)
    return f"s3://{bucket}/arch", options, records


@settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    partitions=st.none() | st.lists(st.integers(0, 2), min_size=1, max_size=2, unique=True),
    low=st.none() | st.integers(0, 200),
    high=st.none() | st.integers(0, 200),
    points=st.none() | st.lists(st.integers(0, 200), min_size=1, max_size=5),
)
def test_the_dataframe_holds_exactly_the_records_a_filter_allows(
    spark, field_export, partitions, low, high, points
):
    url, options, records = field_export
    conditions = ["topic = 'ev'"]
    if partitions is not None:
        conditions.append(f"partition IN ({', '.join(map(str, partitions))})")
    if low is not None:
        conditions.append(f"offset >= {low}")
    if high is not None:
        conditions.append(f"offset < {high}")
    if points is not None:
        conditions.append(f"offset IN ({', '.join(map(str, points))})")
    rows = read(spark, url, options).where(" AND ".join(conditions)).collect()
    expected = sorted(
        (r.partition, r.offset, r.value)
        for r in records
        if (partitions is None or r.partition in partitions)
        and (low is None or r.offset >= low)
        and (high is None or r.offset < high)
        and (points is None or r.offset in points)
    )
    assert sorted((r.partition, r.offset, bytes(r.value)) for r in rows) == expected


def test_avro_values_come_back_in_their_schemas_type(spark, weed_proxy, weed_bucket):
    options = s3_options(weed_proxy.endpoint_url)
    records = orders(30)
    write_once(
        records,
        {
            "path": f"s3://{weed_bucket}/avro",
            "format.class": "avro",
            **CONNECT_JSON,
            "flush.size": "10",
            **options,
        },
    )
    frame = read(spark, f"s3://{weed_bucket}/avro", {**options, "value.format": "avro"})
    assert frame.schema["value"].dataType.simpleString() == "struct<id:bigint,item:string>"
    rows = frame.where("offset BETWEEN 12 AND 14").select("offset", "value.id", "value.item")
    assert sorted(tuple(r) for r in rows.collect()) == [(n, n, f"i{n}") for n in (12, 13, 14)]


def test_values_parse_dates_maps_and_nested_types_through_spark(spark, tmp_path):
    """Spark checks each Arrow batch against the schema exactly: the arrays msgspec's path
    builds (and Arrow's, with a timestamp in the schema) must match Spark's types."""
    import datetime as dt

    from blockgz import BlockGzipUpload
    from blockgz.store import LocalStore

    values = [
        b'{"d": "2024-02-29", "m": {"a": 1}, "l": [{"c": 2}, null], "t": "2024-01-01T00:00:00Z"}',
        b"null",
        b'{"s": {"d": "1999-12-31"}, "extra": [1, 2]}',
    ]
    with BlockGzipUpload(
        LocalStore(tmp_path), "topics/e/partition=0/e+0+0000000000.json.gz"
    ) as out:
        for value in values:
            out.write(value)
    plain = "d DATE, m MAP<STRING, BIGINT>, l ARRAY<STRUCT<c: BIGINT>>, s STRUCT<d: DATE>"
    for schema in (plain, "d DATE, s STRUCT<d: DATE>, t TIMESTAMP"):
        rows = read(spark, str(tmp_path), {"value.schema": schema}).orderBy("offset").collect()
        got = [r.value.asDict(recursive=True) for r in rows]
        assert got[0]["d"] == dt.date(2024, 2, 29) and got[2]["s"] == {"d": dt.date(1999, 12, 31)}
        assert all(v is None for v in got[1].values()), got[1]
        if "m" in got[0]:
            assert got[0]["m"] == {"a": 1} and got[0]["l"] == [{"c": 2}, None]
        else:
            assert got[0]["t"] is not None


def test_wire_format_avro_values_decode_through_the_registry(
    spark, weed_proxy, weed_bucket, registry
):
    """A bytearray archive of an Avro topic (values as the producer's ``AvroSerializer`` sent
    them, under two schema versions) reads into the subject's newest schema: old values get
    the new field's default, an empty value (a kept tombstone) is null, offset pushdown
    still holds."""
    import json

    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from blockgz.sink.records import KafkaRecord
    from testkit import archives
    from testkit.avro_data import V1, V2, avro_value_for

    topic = "wire"
    client = SchemaRegistryClient({"url": registry.url})
    context = SerializationContext(topic, MessageField.VALUE)
    v1 = AvroSerializer(client, json.dumps(V1))
    v2 = AvroSerializer(client, json.dumps(V2))
    values = {
        n: (v1 if n < 60 else v2)(avro_value_for(0, n, V1 if n < 60 else V2), context)
        for n in range(120)
    }
    values[70] = b""  # how the export keeps a tombstone in a bytearray object
    records = [KafkaRecord(topic, 0, n, archives.T0 + n, None, values[n]) for n in range(120)]
    options = s3_options(weed_proxy.endpoint_url)
    url = f"s3://{weed_bucket}/wire"
    write_once(
        records,
        {
            "path": url,
            "flush.size": "50",
            "format.class": "bytearray",
            "format.bytearray.framing": "length-prefixed",
            "s3.compression.type": "blockgzip",
            "s3.compression.block.records": "10",
            **options,
        },
    )
    frame = read(
        spark, url, {**options, "value.format": "avro", "schema.registry.url": registry.url}
    )
    assert "channel" in frame.schema["value"].dataType.fieldNames()
    rows = {r.offset: r.value for r in frame.select("offset", "value").collect()}
    assert sorted(rows) == list(range(120))
    assert rows[70] is None
    assert (rows[5].i, rows[5].channel) == (5, "web")  # V1: the default of V2's new field
    assert (rows[100].i, rows[100].channel) == (100, "app")
    assert rows[100].user.name == avro_value_for(0, 100, V2)["user"]["name"]
    weed_proxy.clear_log()
    some = frame.where("offset BETWEEN 61 AND 63").select("offset", "value.i").collect()
    assert sorted((r.offset, r.i) for r in some) == [(61, 61), (62, 62), (63, 63)]
    data = [
        r
        for r in weed_proxy.requests
        if r.method == "GET" and "list-type" not in r.query and r.path.endswith(".bin.gz")
    ]
    assert len(data) == 1 and data[0].headers.get("Range", "").startswith("bytes=")


def test_a_value_not_in_wire_format_fails_the_query_naming_it(
    spark, weed_proxy, weed_bucket, registry
):
    from pyspark.errors import PySparkException

    from blockgz.sink.records import KafkaRecord
    from testkit.archives import T0

    options = s3_options(weed_proxy.endpoint_url)
    url = f"s3://{weed_bucket}/notwire"
    records = [KafkaRecord("plain", 0, n, T0 + n, None, b'{"n":%d}' % n) for n in range(5)]
    write_once(records, {"path": url, "flush.size": "5", "format.class": "bytearray", **options})
    # Any Avro schema under the subject: the values are refused before it matters.
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    SchemaRegistryClient({"url": registry.url}).register_schema(
        "plain-value", Schema('{"type":"record","name":"P","fields":[]}', "AVRO")
    )
    frame = read(
        spark, url, {**options, "value.format": "avro", "schema.registry.url": registry.url}
    )
    with pytest.raises(PySparkException) as info:
        frame.collect()
    assert "plain-0@0" in str(info.value) and "wire format" in str(info.value)


def evolved_avro_archive(root, topic: str) -> None:
    """Avro objects of one topic: partition 0 written with V1 (offsets 0-29) then with V2,
    which adds ``channel`` with a default (offsets 30-59); partition 1 with V1 only (a quiet
    partition, sorted last, must not make the older schema the reader's)."""
    from blockgz.archive.layout import Layout, default_partition
    from blockgz.formats.avro.upload import AvroUpload
    from blockgz.store import LocalStore
    from testkit.avro_data import V1, V2, avro_value_for

    store = LocalStore(root)
    layout = Layout()
    parts = [(0, 0, V1), (0, 15, V1), (0, 30, V2), (0, 45, V2), (1, 0, V1)]
    for partition, start, schema in parts:
        key = layout.data_key(
            "", f"{topic}/{default_partition(partition)}", topic, partition, start, ".avro"
        )
        offsets = range(start, start + 15)
        with AvroUpload(store, key, schema, block_size=512) as out:
            out.write_many([avro_value_for(partition, n, schema) for n in offsets], offsets)


def test_avro_values_read_into_the_newest_schema_with_defaults(spark, tmp_path):
    """value.format=avro takes the newest writer schema of the objects read (the last object
    of each partition), not the first object's: V2's added field is a column, and values
    written with V1 carry its default."""
    evolved_avro_archive(tmp_path, "evolving")
    frame = read(spark, str(tmp_path), {"value.format": "avro"})
    assert "channel" in frame.schema["value"].dataType.fieldNames()
    rows = {
        (r.partition, r.offset): (r.i, r.channel)
        for r in frame.select("partition", "offset", "value.i", "value.channel").collect()
    }
    assert sorted(rows) == [(0, n) for n in range(60)] + [(1, n) for n in range(15)]
    assert {rows[(0, n)] for n in range(30)} == {(n, "web") for n in range(30)}  # V1: default
    assert {rows[(0, n)] for n in range(30, 60)} == {(n, "app") for n in range(30, 60)}
    assert rows[(1, 7)] == (7, "web")
    some = frame.where("partition = 0 AND offset BETWEEN 28 AND 31").select("value.channel")
    assert sorted(r.channel for r in some.collect()) == ["app", "app", "web", "web"]


def test_avro_objects_read_into_the_registrys_newest_schema_with_defaults(
    spark, tmp_path, registry
):
    """With a registry, .avro objects written with an older version come back in the shape of
    the subject's newest schema, defaults filled (not None)."""
    import json

    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    from testkit.avro_data import V1, V2

    topic = "evolving-registry"
    client = SchemaRegistryClient({"url": registry.url})
    for schema in (V1, V2):
        client.register_schema(f"{topic}-value", Schema(json.dumps(schema), "AVRO"))
    evolved_avro_archive(tmp_path, topic)
    frame = read(
        spark, str(tmp_path), {"value.format": "avro", "schema.registry.url": registry.url}
    )
    rows = {
        (r.partition, r.offset): (r.i, r.channel)
        for r in frame.select("partition", "offset", "value.i", "value.channel").collect()
    }
    assert len(rows) == 75
    assert rows[(0, 3)] == (3, "web") and rows[(1, 14)] == (14, "web")  # V1: V2's default
    assert rows[(0, 40)] == (40, "app")


def test_registering_the_sink_again_keeps_reading(spark, tmp_path):
    """An export on a session (``run_export(spark=...)`` registers the sink's sources) must not
    take ``format("blockgz")``'s reading away: ``sink`` cannot import the reader's half."""
    from blockgz.sink.session import has_data_source, register_data_sources

    records = input_records(20)
    export_batches(str(tmp_path / "arch"), records, "default", batches=1)
    register_data_sources(spark)  # what an export on this session does
    assert has_data_source(spark, "blockgz") and not has_data_source(spark, "no-such-source")
    rows = read(spark, str(tmp_path / "arch"), {}).where("partition = 0").collect()
    assert sorted(r.offset for r in rows) == sorted(r.offset for r in records if r.partition == 0)
