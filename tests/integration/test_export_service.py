"""``blockgz export`` as a service: a stop signal to the process or to its whole process group
(systemd's default, a container runtime's) ends it in a few lines with exit 0, and a restart
archives every record exactly once; ``blockgz.log.format=json`` keeps the JVM's output out of
the JSON log; a SIGKILLed driver leaves no Spark process behind.

Each test runs real ``blockgz export`` processes (their own JVM and Python workers) against
the session's Kafka broker and S3 server: ~40 s each, in ``make test-crash``.
"""

from __future__ import annotations

import json
import re
import signal

import pytest

from blockgz.sink.write.config import SinkSettings
from blockgz.store import open_store
from testkit.kafka_data import produce_numbered, read_exported
from testkit.s3 import s3_options
from testkit.service_export import ServiceExport, service_config

pytestmark = [pytest.mark.slow, pytest.mark.crash]

PARTITIONS, PER_PARTITION = 3, 40
# The export's progress lines: a batch's report, its snapshot, a partition's position.
PROGRESS = re.compile(r"batch \d+: |snapshot of \d+ topics|: next offset \d+, lag ")


@pytest.fixture
def topic(kafka, request):
    name = "service_" + re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[-45:]
    kafka.create_topic(name, partitions=PARTITIONS)
    produce_numbered(kafka.bootstrap_servers, name, PARTITIONS, PER_PARTITION)
    return name


@pytest.mark.parametrize(
    ("signum", "to"),
    [(signal.SIGTERM, "group"), (signal.SIGTERM, "tree"), (signal.SIGINT, "process")],
    ids=["sigterm-group", "sigterm-every-process", "sigint-process"],
)
def test_a_stop_signal_ends_the_export_cleanly_and_a_restart_loses_nothing(
    kafka, s3_server, bucket, tmp_path, topic, signum, to
):
    config = service_config(
        tmp_path / "job.properties", kafka, s3_server, bucket, topic,
        **{"blockgz.log.format": "json"},
    )  # fmt: skip
    output = tmp_path / "output.txt"
    run = ServiceExport(config, tmp_path / "ckpt", output)
    run.wait_committed(s3_server, bucket)
    run.signal(signum, to=to)
    code = run.wait()
    printed = output.read_text()
    assert code == 0, printed[-3000:]
    lines = printed.strip().splitlines()
    assert "Traceback" not in printed and "error" not in printed.lower(), printed[-3000:]
    assert lines[-1].startswith("stopped: "), printed[-3000:]
    # After the progress lines: what the stop itself says, in a few lines. A batch that
    # finished while the query stopped still reports its progress lines after "stopping:".
    stopping = next(i for i, line in enumerate(lines) if "stopping: " in line)
    said = [line for line in lines[stopping:] if not PROGRESS.search(line)]
    assert len(said) <= 3, printed[-3000:]
    # It counts what the manifests committed, even when Spark went before reporting it.
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    job = SinkSettings.from_options({"s3.bucket.name": bucket, "name": "service-test"})
    committed = job.manifest_log(store, prefix).committed_offsets().get(topic, {})
    assert sum(committed.values()) > 0
    assert lines[-1].startswith(f"stopped: {sum(committed.values())} records"), lines[-1]

    # The restart drains the topic: every record archived once, none outside the manifests.
    again = ServiceExport(config, tmp_path / "ckpt", tmp_path / "again.txt", once=True)
    assert again.wait(180) == 0, (tmp_path / "again.txt").read_text()[-3000:]
    read_exported(store, prefix).assert_exactly_once(PARTITIONS, PER_PARTITION)

    # Two runs' JSON logs: JSON lines only; the JVM's output in its own file beside it.
    log = tmp_path / "ckpt" / "blockgz-export.log"
    not_json = [line for line in log.read_text().splitlines() if not _is_json(line)]
    assert not_json == [], not_json[:5]
    assert any('"kind": "batch"' in line for line in log.read_text().splitlines())
    assert (tmp_path / "ckpt" / "blockgz-export.jvm.log").exists()


def _is_json(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def test_a_sigkilled_driver_leaves_no_spark_process_behind(
    kafka, s3_server, bucket, tmp_path, topic
):
    """Spark's JVM runs in a session of its own (so a stop signal to the group reaches the
    driver alone); a SIGKILL of the group, which the JVM does not get, still ends it and its
    Python workers: the JVM exits when the driver's end of its stdin pipe closes."""
    import time

    config = service_config(tmp_path / "job.properties", kafka, s3_server, bucket, topic)
    run = ServiceExport(config, tmp_path / "ckpt", tmp_path / "output.txt")
    try:
        run.wait_committed(s3_server, bucket)
        spark = [pid for pid in run.tree() if pid != run.proc.pid]
        assert spark, "the JVM and its workers were seen"
        run.signal(signal.SIGKILL, to="group")
        run.proc.wait(30)
        deadline = time.monotonic() + 60
        while left := [pid for pid in spark if _alive(pid)]:
            assert time.monotonic() < deadline, f"still running 60 s after the driver: {left}"
            time.sleep(0.2)  # polling the process table with a deadline
    finally:
        run.kill()


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent does not)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
