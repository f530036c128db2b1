"""blockgz's Spark reader gives the record timestamps kept in the sidecars (issue 44) on each of
its paths: plain block-GZIP blocks (the block path, no request for them), Avro values and
values with a keys file beside them (the record path), and an archive written before, with a
timestamps file beside each value object."""

from __future__ import annotations

import pytest

from blockgz.sink.records import KafkaRecord
from blockgz.sink.write import companions
from blockgz.sink.write.commit import write_manifest
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from testkit.batches import arrow_batches

T0 = 1_700_000_000_000
CASES = {
    "blocks": {},
    "avro": {"format.class": "avro", "value.converter": "string", "s3.compression.type": "none"},
    "keys": {"store.kafka.keys": "true", "keys.format.class": "json"},
    "old file": {},
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_spark_reader_gives_the_sidecars_timestamps(spark, tmp_path, monkeypatch, case):
    monkeypatch.setattr(companions, "STAMPS_IN_SIDECAR", case != "old file")
    recs = [
        KafkaRecord("t", p, n, T0 + 7 * n + p, b"k%d" % n, b'{"n": %d}' % n, timestamp_type=n % 2)
        for p in (0, 1)
        for n in range(60)
    ]
    config = SinkSettings.from_options(
        {"path": str(tmp_path), "flush.size": "25", "s3.compression.type": "blockgzip",
         "s3.compression.block.records": "6", **CASES[case]}
    )  # fmt: skip
    messages = [write_task(config, iter(arrow_batches([r for r in recs if r.partition == p])))
                for p in (0, 1)]  # fmt: skip
    write_manifest(config.manifest_log(), 0, messages)
    roles = {f.role for m in messages for f in m.files}
    assert ("timestamps" in roles) == (case == "old file")

    frame = spark.read.format("blockgz").load(str(tmp_path))
    rows = frame.select("partition", "offset", "timestamp", "timestampType").collect()
    got = {(r.partition, r.offset): (int(r.timestamp.timestamp() * 1000), r.timestampType)
           for r in rows}  # fmt: skip
    assert got == {(r.partition, r.offset): (r.timestamp_ms, r.timestamp_type) for r in recs}
    low = T0 + 7 * 40
    inside = frame.where(f"timestamp >= timestamp_millis({low})").select("offset").collect()
    assert len(inside) == sum(r.timestamp_ms >= low for r in recs)
