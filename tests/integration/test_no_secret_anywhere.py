"""No secret anywhere: a secured export through a failure and a restart, locally and on the
standalone cluster, leaves none of its secrets in anything it printed, logged or wrote.

The export reads Avro records (AvroConverter, a registry with basic auth) from the SASL_SSL
broker as a least-privileged SCRAM principal, pasted as a Connect config, and writes them to
the TLS SeaweedFS with least-privilege keys and SSE-C. The first run (local mode, ``--debug``)
meets a record that is not Avro with ``errors.tolerance=none`` and fails with its traceback; the
rerun (on the standalone cluster, ``errors.tolerance=all``) resumes and sends it to the
dead-letter topic. Then ``--print-submit`` prints the spark-submit command, and the archive is
read back with the reader's keys (``seek``, Spark) and replayed by another least-privileged
principal into a topic of the secured broker (Avro, through the registry). Every secret is then
searched for, as text and as base64, in: what each command printed; every file under the
working directory but the config itself (the checkpoint, the job's log, Spark's event log);
the cluster's work directory (the worker and executor logs); every object of the bucket
(data, sidecars, manifests, catalog, snapshots, read back with the SSE-C key); and every record
of the dead-letter topic, headers included. The other tests take the S3 keys from the
environment only and scan the process arguments while a command runs: a running export, and a
restore on the standalone cluster (whose executors must get the keys some other way).
"""

from __future__ import annotations

import base64
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from blockgz.archive.layout import Layout
from blockgz.commits.cluster_snapshots import Snapshots
from blockgz.local_servers.schema_registry import LocalSchemaRegistry
from blockgz.store import open_store
from testkit.avro_data import V1, produce_avro
from testkit.kafka_data import read_exported
from testkit.s3 import fake_aws_env
from testkit.secure_s3 import secure_options, user_key
from tests.integration.test_kafka_security import connect_config, unique

#: A failed run and a restart on the cluster, then three readers: ~2 min, in `make test-crash`.
pytestmark = pytest.mark.crash

BLOCKGZ = str(Path(sys.executable).with_name("blockgz"))
PARTITIONS, PER_PARTITION, BAD = 2, 12, (1, 5)


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [BLOCKGZ, *args], cwd=cwd, capture_output=True, text=True, timeout=300, check=False,
        env={**os.environ, **fake_aws_env()},
    )  # fmt: skip


def forms(secret: str) -> list[bytes]:
    """A secret as it could be found: as text, and in base64 (as an HTTP header carries it)."""
    return [secret.encode(), base64.b64encode(secret.encode())]


def found_in(blobs: dict[str, bytes], secrets: dict[str, str]) -> list[str]:
    """``"<what> in <where>"`` for every secret found in any blob."""
    return [
        f"{what} in {where}"
        for where, blob in blobs.items()
        for what, secret in secrets.items()
        if any(form in blob for form in forms(secret))
    ]


def files_under(root: Path, *, but: Path | None = None) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in root.rglob("*") if p.is_file() and p != but}


def dead_letters(kafka, topic: str) -> dict[str, bytes]:
    """Every record of ``topic``: its key, value and headers, as one blob per record."""
    from confluent_kafka import Consumer, TopicPartition

    ends = kafka.high_watermarks(topic)
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": unique("dlq")})
    found: dict[str, bytes] = {}
    try:
        for partition, end in ends.items():
            consumer.assign([TopicPartition(topic, partition, 0)])
            got: list = []
            deadline = time.monotonic() + 60  # a whole read, not each fetch: a busy broker lags
            while len(got) < end:
                assert time.monotonic() < deadline, f"{topic}-{partition}: {len(got)} of {end}"
                got += [m for m in consumer.consume(100, timeout=1) if m.error() is None]
            for m in got:
                parts = [m.key() or b"", m.value() or b""]
                parts += [k.encode() + b"=" + (v or b"") for k, v in m.headers() or []]
                found[f"{topic}-{partition}@{m.offset()}"] = b"\n".join(parts)
    finally:
        consumer.close()
    return found


def test_a_secured_export_and_its_readers_leave_no_secret_anywhere(
    secured_kafka, secure_s3, secure_bucket, spark_cluster, spark, tmp_path
):
    sasl_password = "sasl-" + uuid.uuid4().hex
    registry_password = "registry-" + uuid.uuid4().hex
    sse_key = base64.b64encode(os.urandom(32)).decode()
    s3_secret = user_key("exporter")[1]
    secrets = {
        "the SASL password": sasl_password,
        "the registry password": registry_password,
        "the SSE-C key": sse_key,
        "the S3 secret key": s3_secret,
    }
    topic, dead = unique("guarded"), unique("guarded-dlq")
    secured_kafka.create_topic(topic, partitions=PARTITIONS)
    secured_kafka.create_topic(dead)
    secured_kafka.add_user("guard", sasl_password, read=[topic], write=[dead])
    with LocalSchemaRegistry(users={"alice": registry_password}) as registry:
        with_userinfo = registry.url.replace("http://", f"http://alice:{registry_password}@")
        rows = [(p, i, V1) for p in range(PARTITIONS) for i in range(PER_PARTITION)]
        produce_avro(secured_kafka.bootstrap_servers, with_userinfo, topic, rows, skip={BAD})
        settings = {
            **connect_config(secured_kafka, "guard", sasl_password),
            "name": "guarded",
            "topics": topic,
            "s3.bucket.name": secure_bucket,
            **secure_options(secure_s3, "exporter"),
            "s3.sse.customer.key": sse_key,
            "format.class": "io.confluent.connect.s3.format.avro.AvroFormat",
            "flush.size": "5",
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": registry.url,
            "value.converter.basic.auth.credentials.source": "USER_INFO",
            "value.converter.basic.auth.user.info": f"alice:{registry_password}",
            "errors.deadletterqueue.topic.name": dead,
            "spark.eventLog.enabled": "true",  # what the Spark UI and history server show
            "spark.eventLog.dir": str(tmp_path / "events"),
            "spark.eventLog.compress": "false",
        }
        (tmp_path / "events").mkdir()
        config = tmp_path / "guarded.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        checkpoint = ["--checkpoint", str(tmp_path / "ckpt")]

        failed = run(["--debug", "export", str(config), "--once", *checkpoint], tmp_path)
        assert failed.returncode != 0, failed.stderr[-3000:]
        assert "Traceback" in failed.stderr, "--debug shows the traceback"
        on_cluster = ["--master", spark_cluster.master_url, "-O", "errors.tolerance=all"]
        done = run(["export", str(config), "--once", *checkpoint, *on_cluster], tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        printed = run(["export", str(config), "--print-submit", *checkpoint, *on_cluster], tmp_path)
        assert printed.returncode == 0, printed.stderr[-3000:]

        # Read back as the reader (GetObject and ListBucket only): seek, Spark, replay.
        reading = {**secure_options(secure_s3, "reader"), "s3.sse.customer.key": sse_key}
        as_reader = [f"-O{k}={v}" for k, v in reading.items()]
        seek = ["seek", f"s3://{secure_bucket}", "--topic", topic, "--partition", "0"]
        sought = run([*seek, "--offset", "3", "--count", "2", *as_reader], tmp_path)
        assert sought.returncode == 0 and len(sought.stdout.splitlines()) == 2, sought.stderr
        rows = (
            spark.read.format("blockgz").options(**reading).load(f"s3://{secure_bucket}")
            .where(f"topic = '{topic}'").count()
        )  # fmt: skip
        assert rows == PARTITIONS * PER_PARTITION - 1
        target = unique("guarded-restored")
        secured_kafka.create_topic(target, partitions=PARTITIONS)
        restorer_password = "restorer-" + uuid.uuid4().hex
        secrets["the restorer's SASL password"] = restorer_password
        secured_kafka.add_user("restorer", restorer_password, read=[target], write=[target])
        restorer = connect_config(secured_kafka, "restorer", restorer_password)
        as_restorer = [
            f"-Okafka.{k}={v}" for k, v in restorer.items() if not k.startswith("kafka.")
        ]
        replayed = run(
            ["replay", f"s3://{secure_bucket}", "--topic", topic, "--to-topic", target,
             "--bootstrap-servers", secured_kafka.secure_bootstrap, *as_reader, *as_restorer,
             "--schema-registry-url", registry.url, "-Obasic.auth.credentials.source=USER_INFO",
             f"-Obasic.auth.user.info=alice:{registry_password}"],
            tmp_path,
        )  # fmt: skip
        assert replayed.returncode == 0, replayed.stderr[-3000:]
        restored = secured_kafka.high_watermarks(target)
        assert restored == {p: PER_PARTITION - (p == BAD[0]) for p in range(PARTITIONS)}

    # It worked: every good record archived once, the bad one dead-lettered.
    store, prefix = open_store(
        f"s3://{secure_bucket}", {**secure_options(secure_s3), "s3.sse.customer.key": sse_key}
    )
    archived = read_exported(store, prefix).offsets()
    wanted = {(p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION)} - {BAD}
    assert set(archived) == wanted and max(archived.values()) == 1
    assert secured_kafka.high_watermarks(dead) == {0: 1}
    # The principal may not DESCRIBE_CONFIGS: the snapshot keeps the rest and says what it lacks.
    snapshot = Snapshots(store, prefix, Layout(), "guarded").at_or_before()
    assert snapshot is not None and snapshot.topics[topic].partitions == PARTITIONS
    assert any(f"configs of topic {topic}" in line for line in snapshot.missing), snapshot.missing

    blobs = {
        "the failed run's output": (failed.stdout + failed.stderr).encode(),
        "the cluster run's output": (done.stdout + done.stderr).encode(),
        "--print-submit's output": (printed.stdout + printed.stderr).encode(),
        "seek's output": (sought.stdout + sought.stderr).encode(),
        "replay's output": (replayed.stdout + replayed.stderr).encode(),
        **files_under(tmp_path, but=config),
        **files_under(Path(spark_cluster.work_dir)),
        **{f"s3://{secure_bucket}/{info.key}": store.get(info.key) for info in store.list(prefix)},
        **dead_letters(secured_kafka, dead),
    }
    assert any(k.startswith(str(tmp_path / "events")) for k in blobs), "Spark's event log"
    assert any(k.endswith("blockgz-export.log") for k in blobs), "the job's log"
    assert any("/manifests/" in k for k in blobs) and any("/snapshots/" in k for k in blobs)
    assert found_in(blobs, secrets) == []


def test_a_running_export_with_keys_from_its_environment_shows_them_to_no_process(
    kafka, secure_s3, secure_bucket, tmp_path
):
    """The keys come from the environment (no key in the config): while the export runs,
    ``ps -ww -eo pid,args`` of every process of its tree (the Python driver, Spark's JVM,
    its Python workers) never shows the secret, and after a clean stop neither does Spark's
    event log (what the UI's environment page and the history server show) nor any file the
    job wrote."""
    from testkit.kafka_data import produce_numbered
    from testkit.service_export import ServiceExport, service_config

    access, secret = user_key("exporter")
    topic = unique("env-keys")
    kafka.create_topic(topic, partitions=2)
    produce_numbered(kafka.bootstrap_servers, topic, 2, 20)
    events = tmp_path / "events"
    events.mkdir()
    store = secure_options(secure_s3)  # the endpoint and its CA; the keys only in the env
    config = service_config(
        tmp_path / "job.properties", kafka, secure_s3, secure_bucket, topic, store=store,
        **{"spark.eventLog.enabled": "true", "spark.eventLog.dir": str(events),
           "spark.eventLog.compress": "false", "blockgz.log.format": "json"},
    )  # fmt: skip
    assert secret not in config.read_text()
    env = {"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret}
    run = ServiceExport(config, tmp_path / "ckpt", tmp_path / "output.txt", env=env)
    try:
        run.wait_committed(secure_s3, secure_bucket, store=store)
        shown = run.arguments()
    finally:
        run.signal(signal.SIGTERM, to="group")
        code = run.wait()
    printed = (tmp_path / "output.txt").read_text()
    assert code == 0, printed[-3000:]
    # The whole tree was seen: the driver, Spark's JVM and at least one Python worker.
    assert any("SparkSubmit" in args for args in shown.values()), shown
    assert any("pyspark.daemon" in args or "pyspark/daemon" in args for args in shown.values())
    assert [pid for pid, args in shown.items() if secret in args] == []
    bucket_store, prefix = open_store(f"s3://{secure_bucket}", store)
    blobs = {
        "the export's output": printed.encode(),
        **files_under(tmp_path, but=config),
        **{info.key: bucket_store.get(info.key) for info in bucket_store.list(prefix)},
    }
    assert any(k.startswith(str(events)) for k in blobs), "Spark's event log"
    assert any("/manifests/" in k for k in blobs), "the job's manifests"
    assert found_in(blobs, {"the S3 secret key": secret}) == []
    assert b"spark.executorEnv.AWS_SECRET_ACCESS_KEY" not in b"".join(blobs.values())


def test_a_restore_on_the_cluster_with_keys_from_its_environment_shows_them_to_no_process(
    kafka, secure_s3, secure_bucket, spark_cluster, tmp_path
):
    """``blockgz restore --master spark://…`` with the reader's keys in its environment only:
    the cluster's executors (whose nodes have no keys) read the archive, so the keys reached
    them, yet ``ps -ww -eo pid,ppid,args`` of the restore's whole tree (its Spark JVM) and of
    the cluster's executors, polled while it runs, never shows the secret, and no
    ``spark.executorEnv.AWS_*`` credential setting is anywhere in them."""
    from tests.integration.test_restore import archive_of

    access, secret = user_key("reader")  # GetObject and ListBucket only
    topic = unique("restore-env-keys")
    records = archive_of(tmp_path / "archive", topic, 2, 30)
    client = secure_s3.client()
    for path in (tmp_path / "archive").rglob("*"):
        if path.is_file():
            key = path.relative_to(tmp_path / "archive").as_posix()
            client.put_object(Bucket=secure_bucket, Key=key, Body=path.read_bytes())
    store = [f"-O{k}={v}" for k, v in secure_options(secure_s3).items() if not k.startswith("aws.")]
    env = {**os.environ, **fake_aws_env(), "AWS_ACCESS_KEY_ID": access,
           "AWS_SECRET_ACCESS_KEY": secret}  # fmt: skip
    env.pop("AWS_SESSION_TOKEN", None)
    target, output = unique("restored-env-keys"), tmp_path / "restore.txt"
    restore = subprocess.Popen(
        [BLOCKGZ, "restore", f"s3://{secure_bucket}", topic, "--rename", f"{topic}={target}",
         "--bootstrap-servers", kafka.bootstrap_servers, "--master", spark_cluster.master_url,
         *store, "-Okafka.linger.ms=0"],
        cwd=tmp_path, env=env, stdout=output.open("wb"), stderr=subprocess.STDOUT,
    )  # fmt: skip
    shown = arguments_while_running(restore, timeout_s=240)
    printed = output.read_text()
    assert restore.returncode == 0, printed[-3000:]
    assert f"{topic} -> {target} (created): {len(records)} records sent" in printed, printed
    # The restore's Spark JVM and the cluster's executors were seen while it ran.
    assert any("SparkSubmit" in args for args in shown.values()), shown
    assert any("CoarseGrainedExecutorBackend" in args for args in shown.values()), shown
    assert [pid for pid, args in shown.items() if secret in args] == []
    assert [pid for pid, args in shown.items() if "executorEnv.AWS_SECRET" in args] == []
    assert [pid for pid, args in shown.items() if "executorEnv.AWS_ACCESS_KEY" in args] == []
    blobs = {"the restore's output": printed.encode(), **files_under(Path(spark_cluster.work_dir))}
    assert found_in(blobs, {"the S3 secret key": secret}) == []


def arguments_while_running(proc: subprocess.Popen, timeout_s: float) -> dict[int, str]:
    """Every ``(pid, args)`` seen, while ``proc`` runs, of its process tree and of Spark's
    executors (``ps -ww -eo pid,ppid,args``, polled until it exits)."""
    seen: dict[int, str] = {}
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None:
        assert time.monotonic() < deadline, f"still running after {timeout_s} s"
        listing = subprocess.run(
            ["ps", "-ww", "-eo", "pid,ppid,args"], capture_output=True, text=True, check=True
        ).stdout.splitlines()[1:]
        rows = [line.split(None, 2) for line in listing]
        parents = {int(r[0]): int(r[1]) for r in rows if len(r) >= 2}
        tree = {proc.pid}
        for pid in sorted(parents):  # descendants, whatever order ps lists them in
            chain, up = [], pid
            while up in parents and up not in tree and up not in chain and up > 1:
                chain.append(up)
                up = parents[up]
            if up in tree:
                tree.update(chain)
        for row in rows:
            args = row[2] if len(row) == 3 else ""
            if int(row[0]) in tree or "CoarseGrainedExecutorBackend" in args:
                seen[int(row[0])] = args
        time.sleep(0.05)  # polling ps with a deadline
    return seen
