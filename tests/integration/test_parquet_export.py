"""``format.class=parquet`` on the local servers: the seek counted at the S3 server (SeaweedFS),
the Spark export end to end (Apache Kafka, the registry stand-in), and the files read by Spark's
own Parquet reader and by ``spark.read.format("blockgz")`` with row-group pruning."""

from __future__ import annotations

import json
from urllib.parse import unquote

import pytest

from blockgz.formats.parquet.read import FOOTER_READ, parquet_index
from blockgz.formats.parquet.writer import ParquetObjectWriter
from blockgz.reader import open_archive
from blockgz.sink.convert.schemas import ValueSchema
from blockgz.store import open_store
from testkit.archives import write_once
from testkit.connect_orders import CONNECT_JSON, T0, orders
from testkit.s3 import s3_options


def data_gets(proxy, suffix: str = ".parquet"):
    return [r for r in proxy.requests if r.method == "GET" and r.path.endswith(suffix)]


def test_a_seek_is_one_footer_get_and_one_row_group_get_at_the_server(weed_proxy, weed_bucket):
    options = s3_options(weed_proxy.endpoint_url)
    store, prefix = open_store(f"s3://{weed_bucket}/exports", options)
    key = f"{prefix}topics/t/partition=0/t+0+0000000000.snappy.parquet"
    writer = ParquetObjectWriter(store, key, ValueSchema.from_json("string"), block_records=2000)
    for n in range(40_000):
        writer.write(f"value-{n:08d}-" + "x" * (n % 50), n, T0 + n)
    done = writer.close()
    weed_proxy.clear_log()
    with open_archive(f"s3://{weed_bucket}/exports", options) as archive:
        got = list(archive.seek("t", 0, 31_234, count=3))
    assert [(r.offset, r.value[:15]) for r in got] == [
        (n, f"value-{n:08d}-") for n in (31_234, 31_235, 31_236)
    ]
    gets = data_gets(weed_proxy)
    assert len(gets) == 2, [(g.path, g.header("Range")) for g in gets]  # footer, row group 15
    assert all(g.header("Range") for g in gets)
    assert sum(g.response_bytes for g in gets) < FOOTER_READ + done.size // 10
    assert weed_proxy.count(method="HEAD") == 0


def test_spark_reads_the_files_natively_and_blockgz_prunes_row_groups(
    spark, weed_proxy, weed_bucket, tmp_path
):
    options = s3_options(weed_proxy.endpoint_url)
    sink = {
        "format.class": "parquet",
        **CONNECT_JSON,
        "s3.compression.block.records": "50",
        "flush.size": "500",
    }
    records = orders(1000)
    write_once(records, {"path": f"s3://{weed_bucket}/pq", **sink, **options})
    write_once(records, {"path": str(tmp_path / "local"), **sink})

    native = spark.read.parquet(str(tmp_path / "local" / "topics" / "orders" / "partition=0"))
    assert native.count() == 1000
    assert set(native.columns) == {"id", "item", "__kafka_offset", "__kafka_timestamp"}
    row = native.where("__kafka_offset = 777").selectExpr(
        "id", "item", "unix_millis(__kafka_timestamp) AS ms"
    )
    assert tuple(row.first()) == (777, "i777", T0 + 777_000)

    weed_proxy.clear_log()
    frame = (
        spark.read.format("blockgz")
        .options(**options, **{"value.format": "json", "value.schema": "id BIGINT, item STRING"})
        .load(f"s3://{weed_bucket}/pq")
    )
    rows = frame.where("offset BETWEEN 612 AND 614").select("offset", "value.id", "value.item")
    assert sorted(tuple(r) for r in rows.collect()) == [(n, n, f"i{n}") for n in (612, 613, 614)]
    gets = data_gets(weed_proxy)
    # The footer of the one object holding 612..614 (on the driver, and once more on the
    # executor) and its one row group; never the other object, never a whole object.
    named = {unquote(g.path.rsplit("/", 1)[1]) for g in gets}
    assert named == {"orders+0+0000000500.snappy.parquet"}
    assert len(gets) <= 3 and all(g.header("Range") for g in gets)

    late = frame.where(f"timestamp >= timestamp_millis({T0 + 990_000})").select("offset")
    assert sorted(r.offset for r in late.collect()) == list(range(990, 1000))


def test_a_deep_audit_reads_each_row_group_once_and_finds_a_flipped_byte(
    seaweed_s3, weed_proxy, weed_bucket
):
    """``blockgz audit --deep`` of a Parquet archive on SeaweedFS (written by the sink's write
    task: objects, manifests, catalog): intact, every object read once with ranged GETs; a
    flipped byte in a row group is one ``corrupt_block`` finding naming its offsets."""
    from click.testing import CliRunner

    from blockgz.cli import main
    from testkit.archives import export_batches

    url = f"s3://{weed_bucket}/audit"
    records = orders(300)
    sink = {
        "format.class": "parquet",
        "s3.compression.type": "none",
        **CONNECT_JSON,
        "s3.compression.block.records": "25",
        "flush.size": "100",
    }
    export_batches(
        url, records, "default", batches=3, **sink, **s3_options(seaweed_s3.endpoint_url)
    )
    flags = [a for k, v in s3_options(weed_proxy.endpoint_url).items() for a in ("-O", f"{k}={v}")]

    def audit() -> tuple[int, dict]:
        result = CliRunner().invoke(main, ["audit", url, *flags, "--output", "json", "--deep"])
        assert "Traceback" not in result.output, result.output
        (job,) = json.loads(result.stdout)["jobs"]
        return result.exit_code, job

    weed_proxy.clear_log()
    code, job = audit()
    assert (code, job["findings"]) == (0, [])
    gets = data_gets(weed_proxy)
    stored = sum(p["bytes"] for p in job["partitions"])
    assert job["bytes_read"] == stored  # every object read once
    assert all(g.header("Range") for g in gets)  # footers and row groups: never a whole GET
    assert sum(g.response_bytes for g in gets) < 2 * stored

    store, prefix = open_store(url, s3_options(seaweed_s3.endpoint_url))
    key = f"{prefix}topics/orders/partition=0/orders+0+0000000100.snappy.parquet"
    data = store.get(key)
    index = parquet_index(lambda a, b: data[a:b], len(data))
    chunk = index.chunks[1]
    store.put(key, data[: chunk.byte_offset + 40] + bytes([data[chunk.byte_offset + 40] ^ 1])
              + data[chunk.byte_offset + 41 :])  # fmt: skip
    code, job = audit()
    assert code == 2
    assert [(f["kind"], f["first"], f["last"], f["key"]) for f in job["findings"]] == [
        ("corrupt_block", 125, 149, key)
    ]


@pytest.mark.slow
def test_the_parquet_export_end_to_end(spark, kafka, s3_server, registry, bucket, tmp_path):
    from blockgz.sink.export.job import run_export
    from blockgz.sink.jobconfig.config import ExportSettings
    from testkit.avro_data import avro_value_for, produce_avro_numbered
    from testkit.kafka_data import manifest_keys_of, read_exported

    topic = "parquet_export"
    kafka.create_topic(topic, partitions=2)
    produce_avro_numbered(kafka.bootstrap_servers, registry.url, topic, 2, 9)
    job = ExportSettings.from_mapping(
        {
            "name": "parquet-export",
            "topics": topic,
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": bucket,
            **s3_options(s3_server.endpoint_url),
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": registry.url,
            "format.class": "io.confluent.connect.s3.format.parquet.ParquetFormat",
            "parquet.codec": "zstd",
            "flush.size": "3",
            "s3.compression.block.records": "2",
        }
    )
    result = run_export(
        job, checkpoint=tmp_path / "ckpt", once=True, spark=spark, install_signal_handlers=False
    )
    assert result.records == 18 and result.files == 6
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    exported = read_exported(store, prefix)
    exported.assert_exactly_once(2, 9)
    assert sorted(k for k in exported.objects if "partition=0" in k) == [
        f"topics/{topic}/partition=0/{topic}+0+{n:010d}.zstd.parquet" for n in (0, 3, 6)
    ]
    assert exported.objects[f"topics/{topic}/partition=1/{topic}+1+0000000003.zstd.parquet"] == [
        avro_value_for(1, n) for n in (3, 4, 5)
    ]
    assert not exported.indexes  # no sidecars: the footers are the indexes
    assert manifest_keys_of(store, prefix, job.sink) == set(exported.objects)
    entries = {f.key: f for f in job.sink.manifest_log(store, prefix).committed_files()}
    entry = entries[f"topics/{topic}/partition=1/{topic}+1+0000000003.zstd.parquet"]
    assert (entry.first_offset, entry.last_offset, entry.records) == (3, 5, 3)
    assert entry.min_timestamp is not None and entry.min_timestamp <= entry.max_timestamp
    with open_archive(f"s3://{bucket}", s3_options(s3_server.endpoint_url)) as archive:
        got = list(archive.seek(topic, 1, 4, count=3))
    assert [r.offset for r in got] == [4, 5, 6]
    assert got[0].value["country"] == avro_value_for(1, 4)["country"]
