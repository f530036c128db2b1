"""``blockgz audit CONFIG`` after a real export (Apache Kafka, SeaweedFS, Spark): the gaps that
transactions leave between objects (markers, aborted records) are explained by the broker, and
stay warnings without it."""

from __future__ import annotations

import json
import uuid

import pytest
from click.testing import CliRunner

from blockgz.cli import main
from blockgz.sink.export.job import run_export
from blockgz.sink.jobconfig.config import ExportSettings
from testkit.s3 import s3_options
from tests.integration.test_real_broker import _transactional_history, settled_end_offsets

pytestmark = pytest.mark.slow


def audit(config: str, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["audit", config, "--output", "json", *args])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, json.loads(result.stdout)["jobs"][0]


def test_gaps_of_transactions_are_explained_by_the_broker(
    spark, kafka, s3_server, bucket, tmp_path
):
    topic = "audit_txn_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=1)
    _transactional_history(kafka, topic)
    end = settled_end_offsets(kafka, topic)[0]
    settings = {
        "name": "audit-job",
        "topics": topic,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": bucket,
        "flush.size": "2",
        "s3.compression.type": "blockgzip",
        **s3_options(s3_server.endpoint_url),
    }
    config = tmp_path / "job.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    run_export(ExportSettings.from_file(str(config)), checkpoint=tmp_path / "ckpt", once=True,
               spark=spark, install_signal_handlers=False)  # fmt: skip

    code, job = audit(str(config), "--deep")
    assert code == 0, job["findings"]
    (partition,) = job["partitions"]
    assert partition["committed"] == end
    assert partition["gaps_explained"] > 0  # markers and aborted records between objects
    assert job["kafka"] == kafka.bootstrap_servers

    code, job = audit(str(config), "--no-kafka")
    gaps = [f for f in job["findings"] if f["kind"] == "unexplained_gap"]
    assert code == 1 and gaps and len(gaps) == len(job["findings"])
    assert len(gaps) == partition["gaps_explained"]
