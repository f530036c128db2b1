"""Crash tests: SIGKILL ``blockgz export`` mid-batch and inside the commit, then restart.

Each run is a real ``blockgz export`` process (its own JVM and Python workers) against the
session's Apache Kafka and S3 servers. The sink pauses at the chosen point (``testkit.faults``,
through the sink's listener hook) and writes a marker file; the test then SIGKILLs the job's
whole process group, as a machine failure would, and restarts it. Afterwards every offset
must be in S3 exactly once and every object must be listed by a manifest.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from blockgz.local_servers import fake_aws_env
from blockgz.sink.write.config import SinkSettings
from blockgz.store import open_store
from testkit.faults import fault_options
from testkit.kafka_data import manifest_keys_of, produce_numbered, read_exported
from testkit.s3 import s3_options

pytestmark = [pytest.mark.slow, pytest.mark.crash]

PARTITIONS = 3
PER_PARTITION = 60
BLOCKGZ = str(Path(sys.executable).with_name("blockgz"))
ROOT = Path(__file__).resolve().parents[2]


def write_config(path: Path, kafka, s3_server, bucket, topic, **extra) -> Path:
    options = {
        "name": "crash-test",
        "topics": topic,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": bucket,
        **s3_options(s3_server.endpoint_url),
        "s3.compression.type": "blockgzip",
        "flush.size": "7",
        "maxOffsetsPerTrigger": "60",
        **extra,
    }
    path.write_text("".join(f"{k}={v}\n" for k, v in options.items()))
    return path


class ExportProcess:
    """``blockgz export --once`` in its own session, killable as a whole."""

    def __init__(
        self,
        config: Path,
        checkpoint: Path,
        log: Path,
        *,
        once: bool = True,
        master: str = "local[2,3]",
    ):
        self.tag = uuid.uuid4().hex
        # The driver loads the fault listener from testkit/, which is not installed: put the
        # checkout on the path (Spark's workers get it from blockgz.sink.session).
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, **fake_aws_env(), "BLOCKGZ_TEST_RUN": self.tag, "PYTHONPATH": path}
        self.log = log
        self.proc = subprocess.Popen(
            [BLOCKGZ, "export", str(config), "--checkpoint", str(checkpoint)]
            + (["--once"] if once else [])
            + ["--master", master],
            stdout=log.open("ab"),
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    def wait_for(self, marker: Path, timeout_s: float = 150) -> None:
        deadline = time.monotonic() + timeout_s
        while not marker.exists():
            if self.proc.poll() is not None:
                pytest.fail(
                    f"export exited ({self.proc.returncode}) before {marker.name}:\n"
                    + self.log.read_text()[-3000:]
                )
            if time.monotonic() > deadline:
                self.kill()
                pytest.fail(
                    f"no {marker.name} within {timeout_s} s:\n" + self.log.read_text()[-3000:]
                )
            time.sleep(0.2)  # polling a file with a deadline, not synchronising on time

    def finish(self, timeout_s: float = 180) -> None:
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail("export did not finish:\n" + self.log.read_text()[-3000:])
        assert code == 0, self.log.read_text()[-3000:]

    def kill(self) -> None:
        """SIGKILL the job's process group, then any process that inherited its tag."""
        import psutil

        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        for p in psutil.process_iter():
            try:
                if p.environ().get("BLOCKGZ_TEST_RUN") == self.tag:
                    p.kill()
            except (psutil.Error, OSError):
                continue


@pytest.fixture
def crash_setup(kafka, s3_server, bucket, tmp_path, request):
    topic = "crash_" + re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[-45:]
    kafka.create_topic(topic, partitions=PARTITIONS)
    produce_numbered(kafka.bootstrap_servers, topic, PARTITIONS, PER_PARTITION)
    return topic


def killed_at(
    fault: str, tmp_path: Path, kafka, s3_server, bucket, topic, master="local[2,3]", **options
) -> None:
    """Run the export of ``topic`` (``tmp_path``'s ``job.properties``, ``ckpt`` and
    ``export.log``) with the ``fault`` (:func:`testkit.faults.fault_options`, ``{marker}`` for
    the file it pauses at) until it pauses there, then SIGKILL it."""
    marker = tmp_path / "paused"
    with_fault = fault_options(fault.format(marker=marker))
    config = write_config(
        tmp_path / "job.properties", kafka, s3_server, bucket, topic, **options, **with_fault
    )
    run = ExportProcess(config, tmp_path / "ckpt", tmp_path / "export.log", master=master)
    run.wait_for(marker)
    run.kill()


def check_exactly_once(s3_server, bucket, config_path: Path) -> None:
    from blockgz.sink.jobconfig.config import load_config_file

    options = load_config_file(config_path)
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    exported = read_exported(store, prefix)
    exported.assert_exactly_once(PARTITIONS, PER_PARTITION)
    sink_config = SinkSettings.from_options({"s3.bucket.name": bucket, "name": options["name"]})
    listed = manifest_keys_of(store, prefix, sink_config)
    assert exported.written == listed, "objects outside the manifests"


def orphans(s3_server, bucket) -> set[str]:
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    exported = read_exported(store, prefix)
    listed = manifest_keys_of(
        store, prefix, SinkSettings.from_options({"s3.bucket.name": bucket, "name": "crash-test"})
    )
    return set(exported.objects) - listed


def test_sigkill_mid_batch_then_restart_from_checkpoint(
    crash_setup, kafka, s3_server, bucket, tmp_path
):
    plan = {"blockgz.tasks.read.kafka": "false"}
    kill_mid_batch_then_restart(kafka, s3_server, bucket, tmp_path, crash_setup, plan)


def test_sigkill_mid_batch_on_a_cluster_with_tasks_reading_kafka(
    crash_setup, kafka, s3_server, bucket, tmp_path, spark_cluster
):
    """The same on a standalone cluster, the sink's tasks reading their Kafka ranges: the
    executors die with the driver, the restarted job's tasks redo the batch."""
    plan = {"blockgz.tasks.read.kafka": "true", "spark.executorEnv.PYTHONPATH": str(ROOT)}
    master = spark_cluster.master_url
    kill_mid_batch_then_restart(kafka, s3_server, bucket, tmp_path, crash_setup, plan, master)


#: Spark's own Kafka source: its connector from Maven Central (4.2.0, the newest served; see
#: tests/integration/test_spark_kafka_source.py) on the export's classpath.
SPARK_SOURCE = {"blockgz.spark.kafka.jars": "4.2.0"}


def test_sigkill_mid_batch_with_sparks_kafka_source(
    crash_setup, kafka, s3_server, bucket, tmp_path
):
    kill_mid_batch_then_restart(kafka, s3_server, bucket, tmp_path, crash_setup, SPARK_SOURCE)
    log = (tmp_path / "export.log").read_text(errors="replace")
    assert "reading Kafka with the Spark Kafka source" in log


def test_sigkill_mid_batch_on_a_cluster_with_sparks_kafka_source(
    crash_setup, kafka, s3_server, bucket, tmp_path, spark_cluster
):
    """The connector's jars reach the executors through spark.jars."""
    plan = {**SPARK_SOURCE, "spark.executorEnv.PYTHONPATH": str(ROOT)}
    master = spark_cluster.master_url
    kill_mid_batch_then_restart(kafka, s3_server, bucket, tmp_path, crash_setup, plan, master)
    log = (tmp_path / "export.log").read_text(errors="replace")
    assert "reading Kafka with the Spark Kafka source" in log


def kill_mid_batch_then_restart(
    kafka, s3_server, bucket, tmp_path, topic, options, master: str = "local[2,3]"
) -> None:
    """Pause after batch 1's first object, SIGKILL, restart cleanly, check exactly once."""
    fault = "pause-after-files:1:1:{marker}"
    killed_at(fault, tmp_path, kafka, s3_server, bucket, topic, master=master, **options)
    assert orphans(s3_server, bucket), "the crash should leave batch 1's first object uncommitted"
    clean = write_config(tmp_path / "job2.properties", kafka, s3_server, bucket, topic, **options)
    ExportProcess(clean, tmp_path / "ckpt", tmp_path / "export.log", master=master).finish()
    check_exactly_once(s3_server, bucket, clean)


HOURLY = {
    "partitioner.class": "io.confluent.connect.storage.partitioner.HourlyPartitioner",
    "locale": "en-US",
    "timezone": "UTC",
}


@pytest.mark.parametrize("layout", [{}, HOURLY], ids=["default", "hourly"])
def test_lost_checkpoint_resumes_from_s3_manifests(
    crash_setup, kafka, s3_server, bucket, tmp_path, layout
):
    """Hourly: the orphans are found through the dead batch's intents (blockgz.commits.intents)."""
    fault = "pause-after-files:2:1:{marker}"
    killed_at(fault, tmp_path, kafka, s3_server, bucket, crash_setup, **layout)
    # Batch 1 starts at offset 20 in each partition; with flush.size=7 its second file starts
    # at 27, which the resumed run (flush.size=5: 20, 25, 30, ...) never writes.
    assert any("+0000000027." in key for key in orphans(s3_server, bucket))
    shutil.rmtree(tmp_path / "ckpt")
    # A different flush.size too, so the new run's keys cannot simply overwrite the orphans.
    resumed = write_config(
        tmp_path / "job2.properties",
        kafka,
        s3_server,
        bucket,
        crash_setup,
        **layout,
        **{"startingOffsets": "s3", "flush.size": "5"},
    )
    ExportProcess(resumed, tmp_path / "ckpt2", tmp_path / "export.log").finish()
    check_exactly_once(s3_server, bucket, resumed)
    if layout:
        log = (tmp_path / "export.log").read_text()
        assert "uncommitted objects removed" in log and "(0 uncommitted" not in log
        assert re.search(r"-[0-9]+: intents from offset 20 on name [1-9]", log), log[-3000:]


def test_sigterm_stops_a_running_export_cleanly(crash_setup, kafka, s3_server, bucket, tmp_path):
    config = write_config(
        tmp_path / "job.properties",
        kafka,
        s3_server,
        bucket,
        crash_setup,
        **{"blockgz.trigger.interval": "1 second"},
    )
    run = ExportProcess(config, tmp_path / "ckpt", tmp_path / "export.log", once=False)
    sink_config = SinkSettings.from_options({"s3.bucket.name": bucket, "name": "crash-test"})
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    deadline = time.monotonic() + 120
    while not manifest_keys_of(store, prefix, sink_config):  # the first batch committed
        assert run.proc.poll() is None, run.log.read_text()[-3000:]
        assert time.monotonic() < deadline, "no batch committed in 120 s"
        time.sleep(0.2)
    run.proc.send_signal(signal.SIGTERM)
    try:
        code = run.proc.wait(60)
    finally:
        run.kill()
    log = run.log.read_text()
    assert code == 0, log[-3000:]
    assert "stopped:" in log and "Traceback" not in log


# -- Avro, and the dead-letter topic, through a crash --------------------------------------------
def dead_letter_crash(
    kafka, s3_server, bucket, tmp_path, topic: str, fault: str, *, registry=None
) -> tuple[set[tuple[int, int]], Counter, int]:
    """Produce a topic where every tenth record is bad, crash the export at ``fault``, restart
    it; return the bad offsets, how often each reached the dead-letter topic, and the count
    the manifests hold. The good records must be archived exactly once. With ``registry`` the
    good records are Avro (written as Avro) and the bad ones are not Avro."""
    from testkit.avro_data import V1, produce_avro
    from testkit.deadletters import produce_mixed, read_topic

    kafka.create_topic(topic, partitions=PARTITIONS)
    options = {
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": f"{topic}-dlq",
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true",
    }
    if registry is None:
        bad = produce_mixed(kafka, topic, PARTITIONS, PER_PARTITION)
    else:
        bad = {(p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION) if i % 10 == 7}
        good = [(p, i, V1) for p in range(PARTITIONS) for i in range(PER_PARTITION)]
        produce_avro(kafka.bootstrap_servers, registry.url, topic, good, skip=bad)
        options.update(
            {
                "format.class": "io.confluent.connect.s3.format.avro.AvroFormat",
                "s3.compression.type": "none",
                "avro.codec": "deflate",
                "value.converter": "io.confluent.connect.avro.AvroConverter",
                "value.converter.schema.registry.url": registry.url,
            }
        )
    killed_at(fault, tmp_path, kafka, s3_server, bucket, topic, **options)
    if fault.startswith("pause-in-commit"):
        assert not (tmp_path / "ckpt" / "commits" / "1").exists(), "Spark must not have committed"
    else:
        assert orphans(s3_server, bucket), "the crash should leave batch 1's objects uncommitted"
    clean = write_config(tmp_path / "job2.properties", kafka, s3_server, bucket, topic, **options)
    ExportProcess(clean, tmp_path / "ckpt", tmp_path / "export.log").finish()

    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    archived = read_exported(store, prefix).offsets()
    every = {(p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION)}
    assert set(archived) == every - bad and max(archived.values()) == 1
    assert not orphans(s3_server, bucket), "objects outside the manifests"
    sent = Counter()
    for message in read_topic(kafka, f"{topic}-dlq"):
        headers = {k: v.decode() for k, v in message.headers()}
        sent[
            (int(headers["__connect.errors.partition"]), int(headers["__connect.errors.offset"]))
        ] += 1
    log = SinkSettings.from_options({"s3.bucket.name": bucket, "name": "crash-test"}).manifest_log(
        store, prefix
    )
    manifest_keys = log.keys()
    counted = sum(log.read(key).dead_lettered for key in manifest_keys)
    return bad, sent, counted


def test_avro_kill_between_dead_letter_sends_and_the_manifest(
    kafka, s3_server, registry, bucket, tmp_path
):
    """Avro in and out, bad records among them. Batch 1 wrote an object and sent some dead
    letters, then the job died before its manifest: after the restart every good record is
    archived exactly once; the replay sends batch 1's dead letters again (at least once, each
    identifiable by its context headers); the manifests count every bad record once."""
    bad, sent, counted = dead_letter_crash(
        kafka,
        s3_server,
        bucket,
        tmp_path,
        "crash_avro_dlq_mid_batch",
        "pause-after-files:1:1:{marker}",
        registry=registry,
    )
    assert set(sent) == bad, "every bad record reaches the dead-letter topic"
    assert counted == len(bad), "the manifests count each bad record once"
    assert max(sent.values()) <= 2, "only the uncommitted batch is sent again, once"


def test_kill_inside_the_commit_does_not_send_dead_letters_again(
    kafka, s3_server, bucket, tmp_path
):
    """Killed inside the commit: batch 1's manifest was written, Spark's commit was not. The
    replay overwrites its objects with themselves and, finding the manifest, sends no dead
    letter again: every good record once in S3, every bad one once in the topic."""
    bad, sent, counted = dead_letter_crash(
        kafka, s3_server, bucket, tmp_path, "crash_dlq_in_commit", "pause-in-commit:1:{marker}"
    )
    assert set(sent) == bad and max(sent.values()) == 1
    assert counted == len(bad)
