"""The export's Prometheus metrics: fed a manifest and Spark's progress, read back as scraped."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from blockgz.commits.manifests import Manifest
from blockgz.errors import ConfigError
from blockgz.sink.export.metrics import ExportMetrics, serve_metrics
from blockgz.sink.export.tracking import ExportResult, ProgressTracker
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.written.files import WrittenFile
from testkit.tools import require_tool

ALERTS = Path(__file__).parents[2] / "deploy" / "prometheus" / "blockgz-alerts.yml"
DASHBOARD = Path(__file__).parents[2] / "deploy" / "grafana" / "blockgz-export.json"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``{(sample name, sorted labels): value}`` of an exposition."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(found, name: str, **labels) -> float:
    return found[(name, tuple(sorted({"job": "s3-sink", **labels}.items())))]


def scraped(metrics: ExportMetrics):
    return samples(generate_latest(metrics.registry).decode())


def written(topic: str, part: int, first: int, records: int, size: int, role="value"):
    return WrittenFile(
        f"{topic}/{part}/{first}.{role}", topic, part, f"partition={part}", first,
        first + records - 1, records, size, size * 4, role=role,
    )  # fmt: skip


def manifest(batch: int, files, offsets, dead_letters=None) -> Manifest:
    return Manifest(
        "s3-sink", "e", str(batch), offsets=offsets, files=tuple(files),
        dead_letters=dead_letters or {},
    )  # fmt: skip


def test_a_batch_sets_offsets_counts_records_bytes_objects_and_dead_letters():
    m = ExportMetrics("s3-sink")
    m.committed({"t": {0: 100}})  # what the manifests committed before this process
    first = manifest(
        7,
        [written("t", 0, 100, 10, 500), written("t", 0, 100, 10, 40, role="keys")],
        {"t": {0: 112, 1: 5}},
        dead_letters={"t": {0: 2}},
    )
    m.batch(first, {"durationMs": {"triggerExecution": 2500, "addBatch": 2000}}, now=1234.5)
    m.batch(manifest(8, [written("t", 1, 0, 5, 60)], {"t": {1: 5}}), {}, now=1300.0)
    m.end_offsets({("t", 0): 130, ("t", 1): 5})
    found = scraped(m)
    assert value(found, "blockgz_committed_offset", topic="t", partition="0") == 112
    assert value(found, "blockgz_end_offset", topic="t", partition="0") == 130
    assert value(found, "blockgz_lag_records", topic="t", partition="0") == 18
    assert value(found, "blockgz_lag_records", topic="t", partition="1") == 0
    assert value(found, "blockgz_records_written_total", topic="t", partition="0") == 10
    assert value(found, "blockgz_records_written_total", topic="t", partition="1") == 5
    assert value(found, "blockgz_bytes_stored_total", topic="t", partition="0") == 540
    assert value(found, "blockgz_bytes_raw_total", topic="t", partition="0") == 2160
    assert value(found, "blockgz_objects_committed_total", topic="t", partition="0") == 2
    assert value(found, "blockgz_dead_letters_total", topic="t", partition="0") == 2
    assert value(found, "blockgz_dead_letters_total", topic="t", partition="1") == 0
    assert value(found, "blockgz_batches_total") == 2
    assert value(found, "blockgz_batch_duration_seconds_count") == 1  # the second had none
    assert value(found, "blockgz_batch_duration_seconds_sum") == 2.5
    assert value(found, "blockgz_last_commit_timestamp_seconds") == 1300.0


def test_lag_waits_for_both_offsets_and_never_goes_negative():
    m = ExportMetrics("s3-sink")
    m.end_offsets({("t", 0): 10})
    assert not [key for key in scraped(m) if key[0] == "blockgz_lag_records"]
    m.committed({"t": {0: 12}})  # Kafka's end read before the last batch committed
    assert value(scraped(m), "blockgz_lag_records", topic="t", partition="0") == 0


def test_two_exports_in_one_process_keep_their_own_registries():
    a, b = ExportMetrics("s3-sink"), ExportMetrics("s3-sink")
    a.batch(manifest(0, [written("t", 0, 0, 3, 9)], {"t": {0: 3}}), {})
    assert value(scraped(a), "blockgz_batches_total") == 1
    assert value(scraped(b), "blockgz_batches_total") == 0


def test_the_tracker_tells_its_observer_each_counted_batch_and_the_end_offsets():
    job = ExportSettings.from_mapping(
        {"name": "s3-sink", "topics": "t", "kafka.bootstrap.servers": "127.0.0.1:9",
         "s3.bucket.name": "archive", "blockgz.snapshot.interval": "off"}
    )  # fmt: skip
    m = ExportMetrics("s3-sink")
    tracker = ProgressTracker(job, "e", ExportResult(), observer=m)
    committed = {0: manifest(0, [written("t", 0, 0, 4, 10)], {"t": {0: 4}})}
    tracker.manifests.read_batch = lambda batch_id: committed.get(batch_id)
    tracker.watermarks.refresh = lambda partitions, now=False: {("t", 0): 6}
    asked = []
    tracker.record_times.at = lambda offsets: asked.append(offsets) or {("t", 0): 1.0}
    tracker.update([{"batchId": 0, "numInputRows": 4, "durationMs": {"triggerExecution": 900}}])
    tracker.update([{"batchId": 1, "numInputRows": 0}])  # no manifest: not counted
    found = scraped(m)
    assert value(found, "blockgz_batches_total") == 1
    assert value(found, "blockgz_lag_records", topic="t", partition="0") == 2
    assert value(found, "blockgz_batch_duration_seconds_sum") == 0.9
    assert asked[0] == {("t", 0): 4}, "the record at the committed offset is the oldest waiting"
    assert value(found, "blockgz_lag_seconds", topic="t", partition="0") > 1e9


def test_lag_in_seconds_is_the_age_of_the_oldest_record_not_yet_archived():
    m = ExportMetrics("s3-sink")
    m.committed({"t": {0: 4, 1: 9}})
    m.end_offsets({("t", 0): 6, ("t", 1): 9})
    assert m.pending() == {("t", 0): 4}, "only partitions with records waiting"
    m.oldest_waiting({("t", 0): 1000.0}, now=1060.5)
    found = scraped(m)
    assert value(found, "blockgz_lag_seconds", topic="t", partition="0") == 60.5
    assert value(found, "blockgz_lag_seconds", topic="t", partition="1") == 0
    m.committed({"t": {0: 5}})  # another record is the oldest now: its age is not known yet
    m.end_offsets({("t", 0): 6})
    assert value(scraped(m), "blockgz_lag_seconds", topic="t", partition="0") == 60.5
    m.oldest_waiting({("t", 0): 1030.0}, now=1061.0)
    assert value(scraped(m), "blockgz_lag_seconds", topic="t", partition="0") == 31
    m.committed({"t": {0: 6}})  # caught up
    assert value(scraped(m), "blockgz_lag_seconds", topic="t", partition="0") == 0
    assert m.pending() == {}


def test_s3_requests_come_from_the_manifest_with_retries_apart():
    m = ExportMetrics("s3-sink")
    batch = Manifest(
        "s3-sink", "e", "0", offsets={"t": {0: 1}},
        requests={"PutObject": {"ok": 3, "server_error": 1, "retries": 1},
                  "UploadPart": {"connection_error": 2}},
    )  # fmt: skip
    assert Manifest.from_json(batch.to_json()).requests == batch.requests
    m.batch(batch, {})
    found = scraped(m)
    req = "blockgz_s3_requests_total"
    assert value(found, req, operation="PutObject", outcome="ok") >= 3  # + the driver's own
    assert value(found, req, operation="PutObject", outcome="server_error") == 1
    assert value(found, req, operation="UploadPart", outcome="connection_error") == 2
    assert value(found, "blockgz_s3_retries_total", operation="PutObject") == 1
    assert ("blockgz_s3_requests_total", ()) not in found


def test_the_endpoint_serves_the_registry_and_closes_with_the_block(caplog):
    caplog.set_level("INFO", logger="blockgz.export")
    with serve_metrics("s3-sink", "127.0.0.1", 0) as m:
        assert m is not None and m.url is not None
        m.committed({"t": {0: 42}})
        with urllib.request.urlopen(m.url, timeout=5) as response:
            text = response.read().decode()
        port = int(re.search(r":(\d+)/metrics$", m.url).group(1))
    assert value(samples(text), "blockgz_committed_offset", topic="t", partition="0") == 42
    assert f"metrics at {m.url}" in caplog.text
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), 2):
        pass


def test_off_by_default_and_a_taken_port_is_a_config_error():
    assert ExportSettings.from_mapping(
        {"name": "j", "topics": "t", "kafka.bootstrap.servers": "b:9092", "s3.bucket.name": "b"}
    ).metrics_port == -1  # fmt: skip
    with serve_metrics("j", "127.0.0.1", -1) as m:
        assert m is None
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = pytest.raises(ConfigError, match=f"blockgz.metrics.port={port}")
        with refused, serve_metrics("j", "127.0.0.1", port):
            pass


def test_the_alert_rules_name_only_metrics_the_exporter_defines():
    import yaml

    doc = yaml.safe_load(ALERTS.read_text())
    defined = ExportMetrics("s3-sink").names
    rules = [rule for group in doc["groups"] for rule in group["rules"]]
    assert rules and {"alert", "expr"} <= set(rules[0])
    for rule in rules:
        assert set(rule) <= {"alert", "expr", "for", "labels", "annotations"}, rule["alert"]
        used = set(re.findall(r"\bblockgz_[a-z0-9_]+\b", rule["expr"]))
        assert used, f"{rule['alert']}: names no blockgz metric"
        assert used <= defined, f"{rule['alert']}: {sorted(used - defined)} not exported"
        for text in rule.get("annotations", {}).values():
            # Labels the expression keeps: the metric's own, or those it aggregates by.
            kept = {"job", "topic", "partition"}
            kept |= {
                x.strip()
                for by in re.findall(r"by \(([^)]*)\)", rule["expr"])
                for x in by.split(",")
            }
            assert set(re.findall(r"\$labels\.(\w+)", text)) <= kept, rule["alert"]
        if "for" in rule:
            assert re.fullmatch(r"\d+[smh]", rule["for"]), rule["alert"]


def test_the_dashboard_queries_only_metrics_the_exporter_defines():
    """deploy/grafana/blockgz-export.json: valid JSON in Grafana's dashboard shape, every
    panel on the Prometheus datasource variable, every query naming exported metrics only and
    filtered by the dashboard's job variable."""
    doc = json.loads(DASHBOARD.read_text())
    defined = ExportMetrics("s3-sink").names
    assert {"title", "uid", "panels", "templating", "schemaVersion"} <= set(doc)
    variables = {v["name"] for v in doc["templating"]["list"]}
    assert variables == {"datasource", "job"}
    assert len({p["id"] for p in doc["panels"]}) == len(doc["panels"]) > 0
    for panel in doc["panels"]:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            used = set(re.findall(r"\bblockgz_[a-z0-9_]+\b", target["expr"]))
            assert used and used <= defined, f"{panel['title']}: {sorted(used - defined)}"
            assert target["expr"].count("(") == target["expr"].count(")"), panel["title"]
            assert all(
                '{job=~"$job"}' in target["expr"][m.end() : m.end() + 14]
                for m in re.finditer(r"\bblockgz_[a-z0-9_]+\b", target["expr"])
            ), panel["title"]


def test_promtool_accepts_the_alert_rules_and_their_unit_tests_pass():
    """Prometheus's own checker on the rule file, then the rule unit tests beside it (each
    alert fires on the series it is meant for, with its labels and text, and not before)."""
    import yaml

    promtool = require_tool("promtool")
    rules = [
        rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]
    ]
    checked = subprocess.run(
        [promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules)} rules found" in checked.stdout
    tests = ALERTS.parent / "tests" / "blockgz-alerts.test.yml"
    ran = subprocess.run(
        [promtool, "test", "rules", str(tests)], capture_output=True, text=True, check=False
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_an_idle_trigger_under_the_next_batch_id_does_not_hide_that_batch():
    """Spark reports an idle trigger with the id of the batch to come; that batch's own
    report, when it runs, is still counted (issue 41: ``batches_total`` stayed 1)."""
    job = ExportSettings.from_mapping(
        {"name": "s3-sink", "topics": "t", "kafka.bootstrap.servers": "127.0.0.1:9",
         "s3.bucket.name": "archive", "blockgz.snapshot.interval": "off"}
    )  # fmt: skip
    m = ExportMetrics("s3-sink")
    tracker = ProgressTracker(job, "e", ExportResult(), observer=m)
    committed = {0: manifest(0, [written("t", 0, 0, 4, 10)], {"t": {0: 4}})}
    tracker.manifests.read_batch = lambda batch_id: committed.get(batch_id)
    tracker.watermarks.refresh = lambda partitions, now=False: {}
    idle = {"batchId": 1, "numInputRows": 0, "durationMs": {"triggerExecution": 3}}
    tracker.update([{"batchId": 0, "numInputRows": 4, "durationMs": {"addBatch": 900}}, idle])
    committed[1] = manifest(1, [written("t", 0, 4, 3, 10)], {"t": {0: 7}})
    ran = {"batchId": 1, "numInputRows": 3, "durationMs": {"addBatch": 700}}
    tracker.update([idle, ran])
    found = scraped(m)
    assert value(found, "blockgz_batches_total") == 2
    assert value(found, "blockgz_committed_offset", topic="t", partition="0") == 7
    assert (tracker.result.batches, tracker.result.records) == (2, 7)
