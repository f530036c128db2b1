"""``blockgz export --once`` reading Kafka with Spark's own source (``format("kafka")``).

``blockgz.spark.kafka.jars=4.2.0`` puts Spark's Kafka connector (from Maven Central, cached) on
the export's ``spark.jars``; the job then reads with Spark's source instead of blockgz's Python
one. Maven Central has no 4.3.0 connector, so this runs the 4.2.0 connector on pyspark 4.3.0:
two runs (the second on a fresh checkpoint, so it
resumes from the manifests) must archive every record exactly once, each object listed by a
manifest.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from blockgz.errors import JarResolutionError
from blockgz.local_servers import fake_aws_env
from blockgz.sink.write.config import SinkSettings
from blockgz.store import open_store
from testkit.kafka_data import manifest_keys_of, produce_numbered, read_exported, value_for
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow

PARTITIONS = 2
PER_PARTITION = 40
MORE = 15
CONNECTOR = "4.2.0"
BLOCKGZ = str(Path(sys.executable).with_name("blockgz"))
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def connector():
    from blockgz.sink.spark_kafka import connector_jars

    try:
        return connector_jars(CONNECTOR)
    except JarResolutionError as exc:
        pytest.skip(f"Spark's Kafka connector is not available: {exc}")


def test_export_once_reads_with_spark_kafka_source(connector, kafka, s3_server, bucket, tmp_path):
    assert [j.name for j in connector] == [
        "commons-pool2-2.13.1.jar",
        "kafka-clients-3.9.2.jar",
        "spark-sql-kafka-0-10_2.13-4.2.0.jar",
        "spark-token-provider-kafka-0-10_2.13-4.2.0.jar",
    ]  # only what pyspark lacks: no second Hadoop or Scala library
    topic = "spark_kafka_source"
    kafka.create_topic(topic, partitions=PARTITIONS)
    produce_numbered(kafka.bootstrap_servers, topic, PARTITIONS, PER_PARTITION)
    options = job_options("spark-kafka", topic, kafka, s3_server, bucket) | {
        "s3.compression.type": "blockgzip",
        "maxOffsetsPerTrigger": "30",  # several batches
        "blockgz.spark.kafka.jars": CONNECTOR,
    }
    config = write_config(tmp_path / "job.properties", options)
    export_once(config, tmp_path / "checkpoint")
    # More records, and a fresh checkpoint: the job resumes from what the manifests committed,
    # handing Spark's source per-partition startingOffsets.
    produce_numbered(kafka.bootstrap_servers, topic, PARTITIONS, MORE, start=PER_PARTITION)
    job_log = export_once(config, tmp_path / "fresh-checkpoint")
    assert "resuming from the archive's manifests" in job_log, job_log[-3000:]

    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    exported = read_exported(store, prefix)
    exported.assert_exactly_once(PARTITIONS, PER_PARTITION + MORE)
    for docs in exported.objects.values():  # record by record: each value as produced
        for doc in docs:
            assert doc == value_for(doc["p"], doc["i"])
    sink_config = SinkSettings.from_options({"s3.bucket.name": bucket, "name": options["name"]})
    listed = manifest_keys_of(store, prefix, sink_config)
    assert exported.written == listed, "objects outside the manifests"


def test_blockgzs_source_can_be_chosen_over_sparks_and_a_checkpoint_keeps_its_source(
    connector, kafka, s3_server, bucket, tmp_path
):
    """With Spark's connector on the classpath (``spark.jars``, as a cluster's own jars would
    put it), ``blockgz.kafka.source=blockgz`` still reads with blockgz's source; the checkpoint
    then refuses Spark's, and nothing is archived twice."""
    topic = "kafka_source_choice"
    kafka.create_topic(topic, partitions=PARTITIONS)
    produce_numbered(kafka.bootstrap_servers, topic, PARTITIONS, PER_PARTITION)
    options = job_options("source-choice", topic, kafka, s3_server, bucket) | {
        "spark.jars": ",".join(str(j) for j in connector),
        "blockgz.kafka.source": "blockgz",
    }
    config = write_config(tmp_path / "job.properties", options)
    checkpoint = tmp_path / "checkpoint"
    job_log = export_once(config, checkpoint, source="blockgz")
    assert "spark-sql-kafka-0-10_2.13-4.2.0.jar" not in job_log  # none added by blockgz

    produce_numbered(kafka.bootstrap_servers, topic, PARTITIONS, MORE, start=PER_PARTITION)
    config.write_text(config.read_text() + "blockgz.kafka.source=spark\n")
    refused = run_export(config, checkpoint)
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0, said[-3000:]
    assert "was started with the blockgz-kafka source" in said, said[-3000:]
    assert "Set blockgz.kafka.source=blockgz to go on with this checkpoint" in said
    assert "Traceback" not in said  # one line, no stack

    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    read_exported(store, prefix).assert_exactly_once(PARTITIONS, PER_PARTITION)


def job_options(name: str, topic: str, kafka, s3_server, bucket: str) -> dict[str, str]:
    """An export job of ``topic`` into ``bucket`` on the local servers, 7 records a file."""
    return {
        "name": name,
        "topics": topic,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": bucket,
        **s3_options(s3_server.endpoint_url),
        "flush.size": "7",
    }


def write_config(path: Path, options: dict[str, str]) -> Path:
    """``options`` as a ``.properties`` job config at ``path``."""
    path.write_text("".join(f"{k}={v}\n" for k, v in options.items()))
    return path


def run_export(config: Path, checkpoint: Path) -> subprocess.CompletedProcess[str]:
    """``blockgz export --once`` on ``local[2,3]``, as a user runs it."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return subprocess.run(
        [BLOCKGZ, "export", str(config), "--checkpoint", str(checkpoint), "--once",
         "--master", "local[2,3]"],
        capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, **fake_aws_env(), "PYTHONPATH": path},
    )  # fmt: skip


def export_once(config: Path, checkpoint: Path, *, source: str = "Spark Kafka") -> str:
    """Run ``blockgz export --once``; its job log, checked for the ``source`` that read Kafka."""
    done = run_export(config, checkpoint)
    log_file = checkpoint / "blockgz-export.log"
    job_log = log_file.read_text() if log_file.exists() else ""
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:] + job_log[-3000:]
    assert f"reading Kafka with the {source} source" in job_log, job_log[-3000:]
    if source == "Spark Kafka":
        assert "spark-sql-kafka-0-10_2.13-4.2.0.jar" in job_log  # the jars it added, named
    return job_log
