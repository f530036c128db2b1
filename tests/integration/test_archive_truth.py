"""Issue 24, situations 3-5: what an archive gives back is what went in.

* A stray beside the real objects (``….json.gz.bak``, ``.txt``) is never read as records; ``ls``
  and ``verify`` name it (SeaweedFS).
* Query engines reading a topic's folder (Spark's own JSON, text and Avro readers, pyarrow
  datasets, pandas over the partition folders) count exactly the records: the index sidecars
  and the record timestamps files (kept by default) are hidden files.
* ``verify --topic`` gives every object a line: a missing sidecar is a problem, and ``--scan``
  checks that object by reading it whole (SeaweedFS).
"""

from __future__ import annotations

import json
from glob import glob
from pathlib import Path

import pytest
from click.testing import CliRunner

from blockgz.cli import main
from blockgz.reader import open_archive
from blockgz.sink.records import KafkaRecord
from blockgz.store import open_store
from blockgz.written.sidecars import legacy_sidecar_key, sidecar_key
from testkit.archives import build_partition, write_once
from testkit.s3 import s3_options

PARTITION = "topics/orders/partition=0/"


def cli(endpoint_url: str, *args: str):
    """``blockgz`` through click, against the S3 server at ``endpoint_url``."""
    flags = ["--endpoint-url", endpoint_url, "-O", "s3.region=us-east-1"]
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    return CliRunner(env=env).invoke(main, [args[0], *flags, *args[1:]])


# -- 3. a stray file replaces real data ------------------------------------------------------------
def test_a_stray_beside_the_objects_is_never_read_and_is_named(spark, seaweed_s3, weed_bucket):
    url = f"s3://{weed_bucket}"
    options = s3_options(seaweed_s3.endpoint_url)
    store, _ = open_store(url, options)
    expected = build_partition(store, objects=2, records_per_object=300)  # offsets 0..599
    strays = [
        f"{PARTITION}orders+0+0000000450.json.gz.bak",  # starts inside the second object
        f"{PARTITION}orders+0+0000000451.txt",
        f"{PARTITION}orders+0+0000000600.json.gz~",  # "after the end"
    ]
    for key in strays:
        store.put(key, b"vm\n")

    result = cli(seaweed_s3.endpoint_url, "seek", "--offset", "450", "--count", "2",
                 "--topic", "orders", "--partition", "0", url)  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == expected[450] + b"\n" + expected[451] + b"\n"

    with open_archive(url, options) as archive:
        records = list(archive.records("orders"))
        assert [r.offset for _, r in records] == sorted(expected)
        assert all(r.value == expected[r.offset] for _, r in records)
        listing = archive.ls("orders")
        assert [row.first_offset for row in listing] == [0, 300]
        assert sorted(listing.strays) == sorted(strays)
        with pytest.raises(Exception, match="past the end"):
            next(archive.seek("orders", 0, 600))

    frame = spark.read.format("blockgz").options(**options).load(url)  # blockgz's Spark reader
    rows = frame.where("topic = 'orders'").select("offset", "value").collect()
    assert sorted((r.offset, bytes(r.value)) for r in rows) == sorted(expected.items())

    result = cli(seaweed_s3.endpoint_url, "ls", "--topic", "orders", url)
    assert result.exit_code == 0, result.output
    assert "2 objects, 3 strays" in result.stderr
    for key in strays:
        assert f"stray: {url}/{key} is not a data object" in result.stdout

    result = cli(seaweed_s3.endpoint_url, "verify", "--topic", "orders", url)
    assert result.exit_code == 1, result.output
    assert result.stderr.count(": ok,") == 2
    for key in strays:
        assert f"stray: {url}/{key}" in result.stderr
    assert "Traceback" not in result.output


# -- 4. query engines read the sidecars as data --------------------------------------------------
ORDER_SCHEMA = {
    "type": "struct",
    "name": "Order",
    "optional": False,
    "fields": [
        {"field": "id", "type": "int64", "optional": False},
        {"field": "p", "type": "int32", "optional": False},
        {"field": "item", "type": "string", "optional": True},
    ],
}


def orders(partitions: int, per_partition: int, *, schema: bool = False) -> list[KafkaRecord]:
    """JSON orders; with ``schema``, in the JsonConverter's schema-and-payload envelope."""
    out = []
    for p in range(partitions):
        for n in range(per_partition):
            doc = {"id": n, "p": p, "item": f"i{n}"}
            if schema:
                doc = {"schema": ORDER_SCHEMA, "payload": doc}
            value = json.dumps(doc).encode()
            out.append(KafkaRecord("orders", p, n, 1_700_000_000_000 + n, None, value))
    return out


def test_query_engines_count_exactly_the_records(spark, tmp_path):
    import pandas as pd
    import pyarrow.dataset as ds

    records = orders(partitions=2, per_partition=250)
    json_root, avro_root = tmp_path / "json", tmp_path / "avro"
    write_once(records, {"path": str(json_root), "flush.size": "100",
                         "s3.compression.type": "blockgzip"})  # fmt: skip
    write_once(
        orders(partitions=2, per_partition=250, schema=True),
        {"path": str(avro_root), "flush.size": "100", "format.class": "avro",
         "value.converter": "org.apache.kafka.connect.json.JsonConverter"},
    )  # fmt: skip
    topic = json_root / "topics" / "orders"
    sidecars = sorted(topic.rglob("*.index.json"))  # one per object
    assert len(sidecars) == 6 and all(p.name.startswith(".") for p in sidecars)
    # The record timestamps are kept by default, in each object's sidecar (issue 44).
    assert not list(topic.rglob("*.timestamps.*"))
    assert all('"timestamps":' in p.read_text() for p in sidecars)

    frame = spark.read.json(str(topic))
    assert frame.count() == len(records)
    assert set(frame.columns) == {"id", "p", "item", "partition"}  # no "chunks", "codec", ...
    assert spark.read.text(str(topic)).count() == len(records)
    assert ds.dataset(str(topic), format="json").count_rows() == len(records)
    files = sorted(glob(str(topic / "partition=*" / "*")))
    assert len(files) == 6
    assert len(pd.concat(pd.read_json(f, lines=True) for f in files)) == len(records)

    avro_topic = avro_root / "topics" / "orders"
    assert all(p.name.startswith(".") for p in avro_topic.rglob("*.index.json"))
    assert not list(avro_topic.rglob("*.timestamps.*"))  # in the sidecars
    # Spark's own Avro reader; this pyspark ships it in spark-sql without the short name "avro".
    avro = spark.read.format("org.apache.spark.sql.avro.AvroFileFormat").load(str(avro_topic))
    assert avro.count() == len(records)
    assert avro.where("id = 7").count() == 2


# -- 5. verify skips an object whose sidecar is missing -------------------------------------------
def test_verify_gives_every_object_a_line_and_scan_checks_one_without_sidecar(
    seaweed_s3, weed_bucket
):
    url = f"s3://{weed_bucket}"
    store, _ = open_store(url, s3_options(seaweed_s3.endpoint_url))
    build_partition(store, objects=4, records_per_object=100)
    keys = [f"{PARTITION}orders+0+{start:010d}.json.gz" for start in (0, 100, 200, 300)]
    store.delete(sidecar_key(keys[2]))  # the object stays, its index is gone
    old = store.get(sidecar_key(keys[3]))  # one sidecar under the old name: still found
    store.put(legacy_sidecar_key(keys[3]), old)
    store.delete(sidecar_key(keys[3]))

    result = cli(seaweed_s3.endpoint_url, "verify", "--topic", "orders", url)
    assert result.exit_code == 1, result.output
    lines = result.stderr.splitlines()
    assert sum(": ok, " in line for line in lines) == 3
    (missing,) = [line for line in lines if keys[2] in line]
    assert "no index sidecar" in missing and "--scan" in missing
    assert "4 objects: 3 ok, 1 problem(s)" in result.stderr
    assert "Traceback" not in result.output

    result = cli(seaweed_s3.endpoint_url, "verify", "--topic", "orders", "--scan", url)
    assert result.exit_code == 0, result.output
    assert f"{url}/{keys[2]}: ok, read whole (no index), 100 records" in result.stderr
    assert "4 objects: 4 ok, 0 problem(s)" in result.stderr


def test_verify_scan_finds_an_object_that_does_not_read_whole(seaweed_s3, weed_bucket):
    url = f"s3://{weed_bucket}"
    store, _ = open_store(url, s3_options(seaweed_s3.endpoint_url))
    build_partition(store, objects=2, records_per_object=100)
    key = f"{PARTITION}orders+0+0000000100.json.gz"
    store.put(key, store.get(key)[:-20])  # truncated: no gzip trailer
    store.delete(sidecar_key(key))

    result = cli(seaweed_s3.endpoint_url, "verify", "--topic", "orders", "--scan", url)
    assert result.exit_code == 2, result.output  # damage: records that cannot be read
    assert f"{url}/{key}: cannot be read whole" in result.stderr
    assert "Traceback" not in result.output


def test_the_sidecar_is_hidden_from_glob_as_from_the_engines(tmp_path):
    """The rule the engines share: a leading dot hides a file (as for glob and the shell): the
    index sidecars (which keep the record timestamps too)."""
    write_once(orders(1, 10), {"path": str(tmp_path), "s3.compression.type": "blockgzip"})
    folder = Path(tmp_path, PARTITION)
    assert [Path(p).name for p in glob(f"{folder}/*")] == ["orders+0+0000000000.json.gz"]
    assert sorted(Path(p).name for p in glob(f"{folder}/.*")) == [
        ".orders+0+0000000000.json.index.json",  # with the record timestamps, kept by default
    ]
