"""``blockgz status`` against a real export: Apache Kafka, SeaweedFS and the shared SparkSession.

One test walks one job through the states a monitoring check sees: exported (lag 0, exit 0),
records produced since (lag shown; ``--max-lag`` exits 1), a stray object and an open multipart
upload under the job's prefixes (listed), and the same config pointed at a closed port (exit 2,
one line, the archive still shown).
"""

from __future__ import annotations

import json
import socket

import pytest
from click.testing import CliRunner

from blockgz.cli import main
from blockgz.sink.export.job import run_export
from blockgz.sink.jobconfig.config import ExportSettings
from testkit.kafka_data import produce_numbered
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow


def write_config(path, **settings) -> str:
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return str(path)


def status(config: str, *args: str) -> tuple[int, dict, list[str]]:
    result = CliRunner().invoke(main, ["status", config, "--output", "json", *args])
    assert "Traceback" not in result.output, result.output
    doc = json.loads(result.stdout)
    return result.exit_code, doc["jobs"][0], [line for line in result.stderr.splitlines() if line]


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_status_of_an_export(spark, kafka, s3_server, bucket, tmp_path):
    topic = "status_of_an_export"
    kafka.create_topic(topic, partitions=2)
    produce_numbered(kafka.bootstrap_servers, topic, 2, 12)
    settings = {
        "name": "status-job",
        "topics": topic,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": bucket,
        "flush.size": "5",
        "s3.compression.type": "blockgzip",
        **s3_options(s3_server.endpoint_url),
    }
    config = write_config(tmp_path / "job.properties", **settings)
    job = ExportSettings.from_file(config)
    run_export(job, checkpoint=tmp_path / "ckpt", once=True, spark=spark,
               install_signal_handlers=False)  # fmt: skip

    # Exported: committed 12 per partition, lag 0, healthy.
    code, doc, issues = status(config, "--max-lag", "0", "--max-commit-age", "1h")
    assert (code, issues) == (0, [])
    rows = {p["partition"]: p for p in doc["partitions"]}
    assert sorted(rows) == [0, 1]
    for p in rows.values():
        assert (p["first_offset"], p["last_offset"], p["committed"]) == (0, 11, 12)
        assert (p["kafka_end"], p["lag"], p["dead_letters"]) == (12, 0, 0)
        assert p["last_commit"] is not None
    assert doc["uncommitted"] == [] and doc["open_uploads"] == []
    assert doc["records"] == 24

    # More records: the lag shows, and --max-lag turns it into a warning.
    produce_numbered(kafka.bootstrap_servers, topic, 2, 7, start=12)
    code, doc, issues = status(config)
    assert code == 0 and [p["lag"] for p in doc["partitions"]] == [7, 7]
    code, doc, issues = status(config, "--max-lag", "5")
    assert code == 1
    assert issues == [
        f"warning: {topic}-0: lag 7 records > --max-lag 5",
        f"warning: {topic}-1: lag 7 records > --max-lag 5",
    ]

    # A stray object no manifest committed, and a multipart upload nobody finished.
    client = s3_server.client()
    stray = f"topics/{topic}/partition=1/{topic}+1+0000000012.json.gz"
    client.put_object(Bucket=bucket, Key=stray, Body=b"not committed")
    left = f"topics/{topic}/partition=0/{topic}+0+0000000012.json.gz"
    upload = client.create_multipart_upload(Bucket=bucket, Key=left)
    try:
        code, doc, issues = status(config)
        assert [o["key"] for o in doc["uncommitted"]] == [stray]
        assert [u["key"] for u in doc["open_uploads"]] == [left]
        table = CliRunner().invoke(main, ["status", config])
        assert stray in table.stdout and left in table.stdout
        assert "uncommitted objects: 1" in table.stdout
    finally:
        client.abort_multipart_upload(Bucket=bucket, Key=left, UploadId=upload["UploadId"])

    # The brokers unreachable: exit 2 in one line, the archive's part still there.
    settings["kafka.bootstrap.servers"] = f"127.0.0.1:{closed_port()}"
    down = write_config(tmp_path / "down.properties", **settings)
    code, doc, issues = status(down)
    assert code == 2
    assert len(issues) == 1 and issues[0].startswith("problem: kafka.bootstrap.servers=127.0.0.1:")
    assert [(p["committed"], p["kafka_end"]) for p in doc["partitions"]] == [(12, None)] * 2
