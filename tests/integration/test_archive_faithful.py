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
from blockgz.sink.export.job import run_export
from blockgz.sink.jobconfig.config import ExportSettings
from testkit.connect_orders import CONNECT_JSON, T0, order
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow


def produce_orders(
    bootstrap: str, topic: str, first: int, count: int, *, together: bool = False
) -> None:
    """Orders ``first..first+count-1`` (Connect JSON, key ``k<n>``, ``T0 + n`` seconds) into
    partition 0, one record per Kafka batch, so order ``n`` lands at offset ``n``. With
    ``together``, all in one Kafka batch instead: the broker appends them at once, so no
    micro-batch can see only some of them."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 60_000 if together else 0,  # flush() sends them, in one batch
            "batch.num.messages": count if together else 1,
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


def export_job(kafka, seaweed_s3, bucket: str, topic: str, **extra: str) -> ExportSettings:
    return ExportSettings.from_mapping(
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


# -- 10: metrics, log and summary count every committed batch ----------------------------------
def _idle_after(query, batch: int) -> bool:
    """Whether the query reported an idle trigger after batch ``batch`` ran."""
    from blockgz.sink.export.tracking import ran

    docs = [json.loads(p.json) for p in query.recentProgress]
    return any(d["batchId"] > batch and not ran(d) for d in docs)


def _ran_batches(query) -> list[int]:
    from blockgz.sink.export.tracking import ran

    return sorted(
        d["batchId"] for d in (json.loads(p.json) for p in query.recentProgress) if ran(d)
    )


def test_the_first_batch_after_idle_triggers_is_counted_in_metrics_log_and_summary(
    spark, kafka, seaweed_s3, weed_bucket, tmp_path, caplog
):
    """Spark reports an idle trigger under the next batch's id: taken for that batch, it hid
    the batch's own report (``batches_total`` short, ``committed_offset`` stale, no log line)
    although its manifest committed it."""
    import logging
    import threading
    import time

    from tests.integration.test_export_metrics import scrape

    topic = "metrics_after_idle"
    kafka.create_topic(topic, partitions=1)
    produce_orders(kafka.bootstrap_servers, topic, 0, 10)
    job = export_job(
        kafka, seaweed_s3, weed_bucket, topic,
        **{"blockgz.metrics.port": "0", "blockgz.trigger.interval": "300 milliseconds"},
    )  # fmt: skip
    stop, seen, failed = threading.Event(), [], []
    # Idle triggers are reported every 10 s by default; sooner here (read at the query's start).
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "200ms")

    def export() -> None:
        try:
            run_export(
                job, checkpoint=tmp_path / "ckpt", once=False, spark=spark, stop_event=stop,
                install_signal_handlers=False, on_progress=seen.append,
            )  # fmt: skip
        except BaseException as exc:  # reported by the test thread
            failed.append(exc)

    def until(condition, what: str, seconds: float = 120) -> None:
        deadline = time.monotonic() + seconds
        while not condition():
            assert not failed, str(failed[0])[-3000:]
            assert time.monotonic() < deadline, f"not within {seconds} s: {what}"
            stop.wait(0.2)

    def figures() -> dict:
        found = scrape(seen[0].metrics_url)
        return {
            "offset": found["blockgz_committed_offset"].get((topic, "0")),
            "batches": found["blockgz_batches_total"].get(("", "")),
        }

    runner = threading.Thread(target=export, name="export", daemon=True)
    with caplog.at_level(logging.INFO, logger="blockgz.export"):
        runner.start()
        try:
            until(lambda: bool(seen), "the export started")
            until(lambda: figures()["offset"] == 10, "the first batch in the metrics")
            (query,) = spark.streams.active
            first = max(_ran_batches(query))
            until(lambda: _idle_after(query, first), "an idle trigger reported")
            # in one Kafka batch: a 300 ms trigger must not plan a batch of only some of them
            produce_orders(kafka.bootstrap_servers, topic, 10, 5, together=True)
            until(lambda: first + 1 in _ran_batches(query), "the next batch ran")
            manifests = len(job.sink.manifest_log().keys())
            assert job.sink.manifest_log().committed_offsets()[topic] == {0: 15}
            # The tracker reads Spark's reports every 0.5 s: a few seconds are plenty.
            until(
                lambda: figures() == {"offset": 15, "batches": manifests},
                f"the metrics count batch {first + 1}: {figures()}",
                seconds=15,
            )
        finally:
            stop.set()
            runner.join(120)
            spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
    assert not runner.is_alive() and not failed, failed
    summary = seen[-1]
    assert (summary.batches, summary.records) == (manifests, 15)
    assert summary.partitions[(topic, 0)].next_offset == 15
    batch_lines = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith(f"batch {first + 1}:")
    ]
    assert batch_lines == [f"batch {first + 1}: 5 records"] or (
        len(batch_lines) == 1 and batch_lines[0].startswith(f"batch {first + 1}: 5 records, ")
    ), batch_lines


# -- 10: JSON output is always JSON ------------------------------------------------------------
def strict_json(line: str):
    """``line`` parsed as RFC 8259 JSON: ``NaN``/``Infinity`` refused, big numbers as text."""

    def refuse(name: str):
        raise AssertionError(f"not JSON: {name} in {line}")

    return json.loads(line, parse_constant=refuse, parse_float=str)


def test_seek_json_output_is_json_and_keeps_a_number_as_archived(
    spark, kafka, seaweed_s3, weed_bucket, tmp_path
):
    """A JSON value ``1e999`` (valid JSON, beyond a double) was printed ``Infinity``."""
    topic = "json_big_numbers"
    kafka.create_topic(topic, partitions=1)
    values = [b'{"x": 1e999, "y": -1E+999, "n": 1.5}', b"1e999", b'{"s": "NaN"}']
    kafka.produce(topic, [(b"k", v) for v in values], partition=0)
    job = export_job(kafka, seaweed_s3, weed_bucket, topic, **{"format.class": "json"})
    run_export(
        job, checkpoint=tmp_path / "ckpt", once=True, spark=spark, install_signal_handlers=False
    )
    url, options = f"s3://{weed_bucket}", s3_options(seaweed_s3.endpoint_url)
    shown = cli(
        "seek", url, "--topic", topic, "--partition", "0", "--offset", "0", "--output", "json",
        *option_flags(options),
    )  # fmt: skip
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    assert "Infinity" not in shown.stdout
    assert [strict_json(line)["value"] for line in lines] == [
        {"x": "1e999", "y": "-1E+999", "n": "1.5"},  # the numbers' text, as archived
        "1e999",
        {"s": "NaN"},
    ]
    assert '"value": {"x": 1e999, "y": -1E+999, "n": 1.5}' in lines[0]
    assert '"value": 1e999' in lines[1]


# -- a reader given part of a layout takes the rest from the manifests --------------------------
def test_a_reader_given_part_of_a_layout_takes_the_rest_from_the_exports_manifests(
    spark, kafka, seaweed_s3, weed_bucket, tmp_path
):
    """An export written with ``topics.dir=arch`` and ``file.delim=-`` (Confluent allows any
    file delimiter; ``directory.delim=-`` itself is refused at the export, since topic names
    hold ``-``), read with only ``-O topics.dir=arch``: the rest comes from its manifests. An
    option that contradicts the archive is an error naming it and the archive's value (it
    hinted at ``format.bytearray.extension``)."""
    topic = "partial_layout"
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, [(b"k%d" % n, b'{"n": %d}' % n) for n in range(12)], partition=0)
    job = export_job(
        kafka, seaweed_s3, weed_bucket, topic,
        **{"format.class": "json", "topics.dir": "arch", "file.delim": "-", "flush.size": "5"},
    )  # fmt: skip
    run_export(
        job, checkpoint=tmp_path / "ckpt", once=True, spark=spark, install_signal_handlers=False
    )
    url, options = f"s3://{weed_bucket}", s3_options(seaweed_s3.endpoint_url)
    keys = [o["Key"] for o in seaweed_s3.client().list_objects_v2(Bucket=weed_bucket)["Contents"]]
    assert f"arch/{topic}/partition=0/{topic}-0-0000000005.json" in keys

    partial = {**options, "topics.dir": "arch"}
    shown = cli(
        "seek", url, "--topic", topic, "--partition", "0", "--offset", "7", "--count", "2",
        *option_flags(partial),
    )  # fmt: skip
    assert (shown.exit_code, shown.stdout.splitlines()) == (0, ['{"n": 7}', '{"n": 8}'])
    with open_archive(url, partial) as archive:
        assert [r.offset for _, r in archive.records(topic)] == list(range(12))
    listed = cli("ls", url, "--topic", topic, *option_flags(partial))
    assert listed.exit_code == 0 and f"{topic}-0-0000000010.json" in listed.output, listed.output

    refused = cli(
        "seek", url, "--topic", topic, "--partition", "0", "--offset", "7",
        *option_flags({**partial, "file.delim": "+"}),
    )  # fmt: skip
    assert refused.exit_code == 1, refused.output
    (line,) = refused.stderr.strip().splitlines()
    assert "file.delim='+'" in line and "written with file.delim='-'" in line, line
    assert "export 'faithful'" in line and "format.bytearray.extension" not in line, line
