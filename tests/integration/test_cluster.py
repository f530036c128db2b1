"""The export on a Spark standalone cluster: credentials reach the executors, secrets stay out
of logs, UI events and the checkpoint, a failure is one line, and ``spark-submit`` runs it.

The cluster (``spark_cluster``) is a real master and worker on loopback whose nodes do not
share the driver's environment, as on a real cluster; S3 is a SeaweedFS with keys of its own,
so a test can search everything the job left behind for them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from blockgz.local_servers.moto_s3 import REGION
from blockgz.local_servers.seaweed import SeaweedS3
from blockgz.store import open_store
from testkit.kafka_data import produce_numbered, read_exported

pytestmark = pytest.mark.slow

BLOCKGZ = str(Path(sys.executable).with_name("blockgz"))
PARTITIONS, PER_PARTITION = 2, 30
ACCESS_KEY = "AKIDBLOCKGZ" + uuid.uuid4().hex[:9].upper()
SECRET_KEY = "blockgz-secret-" + uuid.uuid4().hex


@pytest.fixture(scope="module")
def private_s3():
    """SeaweedFS with keys no other test uses."""
    reason = SeaweedS3.unavailable_reason()
    if reason:
        pytest.skip(reason)
    with SeaweedS3(access_key=ACCESS_KEY, secret_key=SECRET_KEY) as server:
        yield server


@pytest.fixture
def job(kafka, private_s3, tmp_path, request):
    """A topic with records, a bucket, and a config that names neither key."""
    name = "cl-" + uuid.uuid4().hex[:10]
    kafka.create_topic(name, partitions=PARTITIONS)
    produce_numbered(kafka.bootstrap_servers, name, PARTITIONS, PER_PARTITION)
    private_s3.client().create_bucket(Bucket=name)
    config = tmp_path / "job.properties"
    settings = {
        "name": name,
        "topics": name,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": name,
        "store.url": private_s3.endpoint_url,
        "s3.region": REGION,
        "s3.compression.type": "blockgzip",
        "flush.size": "10",
        "spark.eventLog.enabled": "true",  # what the Spark UI and history server show
        "spark.eventLog.dir": str(tmp_path / "events"),
        "spark.eventLog.compress": "false",  # searched as text below
    }
    (tmp_path / "events").mkdir()
    config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return name, config


def driver_env(**aws: str) -> dict[str, str]:
    """This machine's environment without any AWS setting, plus ``aws``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=os.devnull, AWS_SHARED_CREDENTIALS_FILE=os.devnull, **aws)
    return env


def run(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        command, env=env, cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )


def assert_exported_once(private_s3, bucket: str) -> None:
    store, prefix = open_store(
        f"s3://{bucket}",
        {
            "store.url": private_s3.endpoint_url,
            "aws.access.key.id": ACCESS_KEY,
            "aws.secret.access.key": SECRET_KEY,
        },
    )
    read_exported(store, prefix).assert_exactly_once(PARTITIONS, PER_PARTITION)


def spark_events(directory: Path, kind: str) -> list[dict]:
    """The events of type ``kind`` in the (uncompressed) Spark event logs under ``directory``."""
    events = []
    for path in directory.rglob("events_*"):
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event.get("Event") == kind:
                events.append(event)
    return events


def files_containing(text: str, *roots: Path) -> list[str]:
    found = []
    for root in roots:
        for path in Path(root).rglob("*"):
            if path.is_file() and text.encode() in path.read_bytes():
                found.append(str(path))
    return found


def test_executors_get_the_drivers_credentials_and_no_secret_leaks(
    spark_cluster, private_s3, job, tmp_path
):
    name, config = job
    # (No session token: SeaweedFS takes a request that carries one for an STS credential.)
    env = driver_env(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
    checkpoint = tmp_path / "ckpt"
    done = run(
        [
            BLOCKGZ,
            "export",
            str(config),
            "--once",
            "--master",
            spark_cluster.master_url,
            "--checkpoint",
            str(checkpoint),
        ],
        env,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert_exported_once(private_s3, name)
    # The tasks had the keys; nothing the job wrote, logged or showed has them.
    for secret in (SECRET_KEY, ACCESS_KEY):
        assert secret not in done.stdout + done.stderr
        assert (
            files_containing(secret, checkpoint, tmp_path / "events", spark_cluster.work_dir) == []
        )
    events = "".join(p.read_text() for p in (tmp_path / "events").rglob("*") if p.is_file())
    # The keys reached the executors inside the sink's writer, not as Spark settings.
    assert "spark.executorEnv.AWS_SECRET_ACCESS_KEY" not in events
    assert "spark.executorEnv.AWS_ACCESS_KEY_ID" not in events


def test_without_forwarding_a_task_failure_is_one_line_then_a_node_profile_works(
    spark_cluster, private_s3, job, tmp_path
):
    name, config = job
    env = driver_env(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
    export = [BLOCKGZ, "export", str(config), "--once", "--master", spark_cluster.master_url]
    export += ["-O", "blockgz.executor.env.forward=false"]

    spark_cluster.credentials_file.write_text("")  # the nodes have no credentials at all
    # Two attempts are enough to show the task is retried before the job gives up.
    once_retried = ["-O", "spark.task.maxFailures=2"]
    failed = run([*export, *once_retried, "--checkpoint", str(tmp_path / "ckpt1")], env, tmp_path)
    assert failed.returncode == 1
    lines = failed.stderr.strip().splitlines()
    assert lines[-1].startswith("error: StoreError: "), failed.stderr[-3000:]
    assert "Unable to locate credentials" in lines[-1]
    assert "Traceback" not in failed.stderr and len(lines) < 10, failed.stderr[-3000:]

    # A profile on the nodes (as an instance role would be) is used when nothing is forwarded.
    spark_cluster.credentials_file.write_text(
        f"[default]\naws_access_key_id = {ACCESS_KEY}\naws_secret_access_key = {SECRET_KEY}\n"
    )
    try:
        done = run([*export, "--checkpoint", str(tmp_path / "ckpt2")], env, tmp_path)
    finally:
        spark_cluster.credentials_file.write_text("")
    assert done.returncode == 0, done.stderr[-3000:]
    assert_exported_once(private_s3, name)


def test_spark_submit_runs_the_same_config_with_keys_in_it(
    spark_cluster, private_s3, job, tmp_path
):
    name, config = job
    with config.open("a") as out:  # Confluent's way: the keys in the connector config
        out.write(f"aws.access.key.id={ACCESS_KEY}\naws.secret.access.key={SECRET_KEY}\n")
    env = driver_env()
    # As with the environment activated: spark-submit finds Spark and Python on PATH.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    printed = run(
        [
            BLOCKGZ,
            "export",
            str(config),
            "--once",
            "--master",
            spark_cluster.master_url,
            "--checkpoint",
            str(tmp_path / "ckpt"),
            "--print-submit",
        ],
        env,
        tmp_path,
    )
    assert printed.returncode == 0, printed.stderr
    command = printed.stdout.split()
    assert command[:3] == ["spark-submit", "--master", spark_cluster.master_url]
    done = run(command, env, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    # spark-submit merges the driver's stderr into its stdout.
    assert "done: 60 records" in done.stdout, done.stdout[-3000:]
    assert_exported_once(private_s3, name)
    events = tmp_path / "events"
    assert files_containing(SECRET_KEY, tmp_path / "ckpt", events, spark_cluster.work_dir) == []


def test_a_killed_python_worker_is_retried_and_the_batch_lands_exactly_once(
    spark_cluster, private_s3, job, tmp_path
):
    """SIGKILL the executor's Python worker in the middle of a write task (after its first
    object): Spark retries the task on the cluster and the batch is exported exactly once."""
    from testkit.faults import fault_options

    name, config = job
    marker = tmp_path / "paused"
    root = str(Path(__file__).resolve().parents[2])  # testkit/ is not installed: ship the path
    with config.open("a") as out:
        for key, value in {
            **fault_options(f"pause-after-files:1:0:{marker}"),
            "spark.executorEnv.PYTHONPATH": root,
        }.items():
            out.write(f"{key}={value}\n")
    env = driver_env(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
    env["PYTHONPATH"] = root
    checkpoint = tmp_path / "ckpt"
    export = subprocess.Popen(
        [
            BLOCKGZ,
            "export",
            str(config),
            "--once",
            "--master",
            spark_cluster.master_url,
            "--checkpoint",
            str(checkpoint),
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not (marker.exists() and marker.read_text().strip()):
            assert export.poll() is None, export.stdout.read()[-3000:]
            assert time.monotonic() < deadline, "no task paused within 180 s"
            time.sleep(0.2)  # polling a file with a deadline
        worker = int(marker.read_text())
        assert worker in spark_cluster.python_worker_pids(), "the pause is in a cluster worker"
        os.kill(worker, signal.SIGKILL)
        output, _ = export.communicate(timeout=240)
    finally:
        if export.poll() is None:
            export.kill()
    assert export.returncode == 0, output[-3000:]
    assert "done: 60 records" in output
    failed = [
        e
        for e in spark_events(tmp_path / "events", "SparkListenerTaskEnd")
        if e["Task End Reason"]["Reason"] != "Success"
    ]
    assert len(failed) == 1, "exactly the killed attempt failed"
    assert "Python worker exited unexpectedly" in json.dumps(failed[0])
    assert_exported_once(private_s3, name)
