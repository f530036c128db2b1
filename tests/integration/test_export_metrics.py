"""The metrics endpoint of a running export (``blockgz.metrics.port=0``), scraped while records
flow and checked against Kafka and the archive; closed when the export stops."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections import defaultdict

import pytest
from prometheus_client.parser import text_string_to_metric_families

from blockgz.commits.cluster_snapshots import Snapshots
from blockgz.sink.export.job import ExportResult, run_export
from testkit.kafka_data import produce_numbered
from tests.integration.test_export import bucket_contents, job_for, topic_for

pytestmark = pytest.mark.slow

PARTITIONS = 2


def scrape(url: str) -> dict[str, dict[tuple[str, str], float]]:
    """``{sample name: {(topic, partition): value}}`` (``("", "")`` for job-level samples)."""
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    out: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if "le" not in s.labels:
                key = (s.labels.get("topic", ""), s.labels.get("partition", ""))
                out[s.name][key] = s.value
    return out


def test_a_running_export_serves_figures_that_match_kafka_and_the_archive(
    spark, kafka, s3_server, bucket, tmp_path, request
):
    topic = topic_for(request)
    kafka.create_topic(topic, partitions=PARTITIONS)
    produce_numbered(kafka.bootstrap_servers, topic, PARTITIONS, 30)
    job = job_for(
        kafka, s3_server, bucket, topic,
        **{"flush.size": "7", "blockgz.metrics.port": "0",
           "blockgz.trigger.interval": "1 second"},
    )  # fmt: skip
    stop, seen, failed = threading.Event(), [], []
    started = time.time()

    def export() -> None:
        try:
            run_export(
                job, checkpoint=tmp_path / "ckpt", once=False, spark=spark, stop_event=stop,
                install_signal_handlers=False, on_progress=seen.append,
            )  # fmt: skip
        except BaseException as exc:  # reported by the test thread
            failed.append(exc)

    runner = threading.Thread(target=export, name="export", daemon=True)
    runner.start()
    try:
        deadline = time.monotonic() + 180
        while not seen:  # the query runs: its result (and the metrics URL) is reported
            assert not failed, str(failed[0])[-3000:]
            assert time.monotonic() < deadline, "the export did not start in 180 s"
            stop.wait(0.1)
        result: ExportResult = seen[0]
        assert result.metrics_url and result.metrics_url.startswith("http://127.0.0.1:")
        produce_numbered(kafka.bootstrap_servers, topic, PARTITIONS, 20, start=30)  # while it runs
        ends = kafka.high_watermarks(topic)
        assert ends == {p: 50 for p in range(PARTITIONS)}
        wanted = {(topic, str(p)): float(n) for p, n in ends.items()}
        while True:
            figures = scrape(result.metrics_url)
            if (
                figures["blockgz_committed_offset"] == wanted
                and figures["blockgz_end_offset"] == wanted
            ):
                break
            assert not failed, failed
            assert time.monotonic() < deadline, f"not caught up in 180 s: {dict(figures)}"
            stop.wait(0.2)
    finally:
        stop.set()
        runner.join(120)
    assert not runner.is_alive() and not failed, failed

    exported, store, prefix = bucket_contents(s3_server, bucket)
    exported.assert_exactly_once(PARTITIONS, 50)
    files = job.sink.manifest_log(store, prefix).committed_files()
    manifests = len(job.sink.manifest_log(store, prefix).keys())
    for p in range(PARTITIONS):
        tp = (topic, str(p))
        mine = [f for f in files if f.partition == p]
        assert figures["blockgz_lag_records"][tp] == 0
        assert figures["blockgz_records_written_total"][tp] == 50
        assert figures["blockgz_objects_committed_total"][tp] == len(mine)
        assert figures["blockgz_bytes_stored_total"][tp] == sum(f.size for f in mine)
        assert figures["blockgz_bytes_stored_total"][tp] == sum(
            store.head(prefix + f.key).size for f in mine
        )
        assert figures["blockgz_dead_letters_total"][tp] == 0
    assert figures["blockgz_batches_total"][("", "")] == manifests
    assert figures["blockgz_batch_duration_seconds_count"][("", "")] == manifests
    assert started <= figures["blockgz_last_commit_timestamp_seconds"][("", "")] <= time.time()
    # The export snapshotted the source cluster for a restore as it committed.
    snapshot = Snapshots(store, prefix, job.sink.layout, job.name).at_or_before()
    assert snapshot is not None and snapshot.topics[topic].partitions == PARTITIONS
    assert started * 1000 <= snapshot.at_ms <= time.time() * 1000
    port = int(result.metrics_url.rsplit(":", 1)[1].split("/")[0])
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), 2):
        pass
