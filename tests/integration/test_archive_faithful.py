"""What an archive kept comes back as it was kept (issue 41), on Apache Kafka + SeaweedFS:
a Parquet export's timestamps when keys are stored beside it, every committed batch in the
export's metrics and summary, JSON output that is JSON, and a reader given part of a layout.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from blockgz.cli import main
from blockgz.reader import open_archive
from blockgz.sink.export.config import ExportConfig
from blockgz.sink.export.job import run_export
from testkit.connect_orders import CONNECT_JSON, T0, order
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow


def produce_orders(bootstrap: str, topic: str, first: int, count: int) -> None:
    """Orders ``first..first+count-1`` (Connect JSON, key ``k<n>``, ``T0 + n`` seconds) into
    partition 0, one record per Kafka batch, so order ``n`` lands at offset ``n``."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 0,
            "batch.num.messages": 1,
            "max.in.flight.requests.per.connection": 1,
        }
    )
    for n in range(first, first + count):
        record = order(n)
        producer.produce(
            topic, record.value, key=record.key, partition=0, timestamp=record.timestamp_ms
        )
        producer.poll(0)
    assert producer.flush(30) == 0, "records left unsent"


def export_job(kafka, seaweed_s3, bucket: str, topic: str, **extra: str) -> ExportConfig:
    return ExportConfig.from_mapping(
        {
            "name": "faithful",
            "topics": topic,
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": bucket,
            **s3_options(seaweed_s3.endpoint_url),
            **extra,
        }
    )


def cli(*args: str):
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output, result.output
    return result


def option_flags(options: dict[str, str]) -> list[str]:
    return [a for k, v in options.items() for a in ("-O", f"{k}={v}")]


# -- 8: Parquet with store.kafka.keys=true keeps its timestamps --------------------------------
def test_a_parquet_export_with_keys_gives_every_reader_its_timestamps(
    spark, kafka, seaweed_s3, weed_bucket, tmp_path
):
    """The keys file beside a Parquet object used to replace the records' own timestamps
    (``__kafka_timestamp``) with none: seek without timestamps, a time window of 0 rows."""
    topic = "pq_keys_times"
    kafka.create_topic(topic, partitions=1)
    produce_orders(kafka.bootstrap_servers, topic, 0, 60)
    job = export_job(
        kafka, seaweed_s3, weed_bucket, topic,
        **CONNECT_JSON, **{"format.class": "parquet", "store.kafka.keys": "true",
                           "flush.size": "20", "s3.compression.block.records": "5"},
    )  # fmt: skip
    result = run_export(
        job, checkpoint=tmp_path / "ckpt", once=True, spark=spark, install_signal_handlers=False
    )
    assert result.records == 60
    url, options = f"s3://{weed_bucket}", s3_options(seaweed_s3.endpoint_url)
    late = T0 + 50_000  # orders 50..59

    with open_archive(url, options) as archive:
        got = list(archive.seek(topic, 0, 21, count=3, timestamps=True))
        assert [(r.offset, r.key, r.timestamp) for r in got] == [
            (n, b"k%d" % n, T0 + n * 1000) for n in (21, 22, 23)
        ]
        window = [r for _, r in archive.records(topic, from_time=late)]
        assert [(r.offset, r.timestamp) for r in window] == [
            (n, T0 + n * 1000) for n in range(50, 60)
        ]

    shown = cli(
        "seek", url, "--topic", topic, "--partition", "0", "--offset", "7", "--count", "1",
        "--output", "json", *option_flags(options),
    )  # fmt: skip
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["timestamp"] == T0 + 7000

    frame = (
        spark.read.format("blockgz")
        .options(**options, **{"value.format": "json", "value.schema": "id BIGINT, item STRING"})
        .load(url)
    )
    assert frame.where("timestamp IS NULL").count() == 0
    rows = frame.where(f"timestamp >= timestamp_millis({late})").select("offset", "key")
    assert sorted((r.offset, bytes(r.key)) for r in rows.collect()) == [
        (n, b"k%d" % n) for n in range(50, 60)
    ]

    planned = cli(
        "restore", url, topic, "--from-time", str(late), "--dry-run", "--output", "json",
        *option_flags(options),
    )  # fmt: skip
    assert planned.exit_code == 0, planned.output
    plan = json.loads(planned.stdout)
    assert plan["records"] == 10
    (window_plan,) = plan["topics"][0]["windows"]
    assert (window_plan["first_offset"], window_plan["last_offset"]) == (50, 59)
