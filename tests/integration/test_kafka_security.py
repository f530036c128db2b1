"""A secured Kafka (SASL_SSL, SCRAM-SHA-512, a private CA, ACLs): every refusal is one line
naming the setting or the missing ACL, within seconds; and an export with a least-privileged
principal, configured as a pasted Connect config, archives exactly the records.

The broker is :func:`tests.conftest.secured_kafka`; each test makes its own principal with
exactly the ACLs it names. The refusals run ``blockgz export --once`` (and ``blockgz replay``)
through the CLI in a subprocess, so what is counted is what a terminal shows; they fail in the
preflight, before Spark starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from testkit.throwaway_ca import TestCA

ROOT = Path(__file__).resolve().parents[2]
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
#: Each refusal: an exit code, at most this many lines, within this many seconds.
MAX_LINES = 3
MAX_SECONDS = 30.0


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


def connect_config(kafka, user: str, password: str, **more: str) -> dict[str, str]:
    """The Java client's settings, as pasted from a Connect worker or connector config."""
    return {
        "kafka.bootstrap.servers": kafka.secure_bootstrap,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": f'{SCRAM} required username="{user}" password="{password}";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(kafka.ca_file),
        **more,
    }


def write_config(tmp_path: Path, settings: dict[str, str]) -> Path:
    path = tmp_path / "job.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def run_cli(*args: str, cwd: Path) -> tuple[int, list[str], str, float]:
    """``blockgz ARGS`` in a subprocess: exit code, output lines, all output, seconds."""
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "blockgz.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    output = proc.stdout + proc.stderr
    return proc.returncode, output.strip().splitlines(), output, time.monotonic() - started


def refused(tmp_path: Path, settings: dict[str, str], *words: str, secret: str = "") -> str:
    """Run an export of ``settings`` and check it is refused as the module says."""
    config = write_config(
        tmp_path, {"name": unique("sec"), "path": str(tmp_path / "a"), **settings}
    )
    code, lines, output, seconds = run_cli("export", str(config), "--once", cwd=tmp_path)
    assert code != 0, output
    assert len(lines) <= MAX_LINES, output
    assert seconds < MAX_SECONDS, f"{seconds:.1f} s"
    assert "Traceback" not in output
    for word in words:
        assert word in output, output
    if secret:
        assert secret not in output
    return output


@pytest.fixture
def topic(secured_kafka):
    name = unique("orders")
    secured_kafka.create_topic(name, partitions=2)
    secured_kafka.produce(name, [b'{"n":%d}' % n for n in range(5)], partition=0)
    return name


# -- connecting -----------------------------------------------------------------------------------
def test_a_wrong_password(secured_kafka, topic, tmp_path):
    secured_kafka.add_user("wrongpw", "right-password", read=[topic])
    settings = connect_config(secured_kafka, "wrongpw", "wrong-password", topics=topic)
    refused(
        tmp_path, settings, "kafka.sasl.username/kafka.sasl.password", "User:wrongpw",
        "refused the credentials", secret="wrong-password",
    )  # fmt: skip


def test_a_certificate_from_another_ca(secured_kafka, topic, tmp_path):
    secured_kafka.add_user("otherca", "pw", read=[topic])
    other = TestCA("someone else's CA").write_ca(tmp_path / "other-ca.pem")
    settings = connect_config(
        secured_kafka, "otherca", "pw", topics=topic, **{"ssl.truststore.location": str(other)}
    )
    refused(tmp_path, settings, "kafka.ssl.ca.location", "not signed by a CA given there")


def test_a_host_name_the_certificate_does_not_hold(secured_kafka, topic, tmp_path):
    """The OTHERNAME listener's certificate is for ``localhost`` only; the job connects to
    127.0.0.1 with the Java client's default identification (https). Turned off the Java way
    (an empty value), the same settings pass the preflight."""
    secured_kafka.add_user("misnamed", "pw", read=[topic])
    settings = connect_config(
        secured_kafka, "misnamed", "pw", topics=topic,
        **{"kafka.bootstrap.servers": secured_kafka.misnamed_bootstrap},
    )  # fmt: skip
    refused(
        tmp_path, settings, "ssl.endpoint.identification.algorithm=https",
        "not for 127.0.0.1", "localhost",
    )  # fmt: skip
    from blockgz.sink.export.preflight import check_kafka
    from blockgz.sink.jobconfig.config import ExportSettings

    unchecked = {**settings, "ssl.endpoint.identification.algorithm": ""}
    job = ExportSettings.from_mapping({"name": "n", "path": str(tmp_path / "b"), **unchecked})
    check_kafka(job, once=True)  # connects, sees the topic, may READ it


# -- ACLs -----------------------------------------------------------------------------------------
def test_a_topic_the_principal_may_only_describe(secured_kafka, topic, tmp_path):
    secured_kafka.add_user("describer", "pw", describe=[topic])
    settings = connect_config(secured_kafka, "describer", "pw", topics=topic)
    refused(
        tmp_path, settings, f"User:describer may not READ topic {topic}",
        f"kafka-acls --add --allow-principal User:describer --operation Read --topic {topic}",
    )  # fmt: skip


def test_a_topic_the_principal_may_not_see(secured_kafka, topic, tmp_path):
    secured_kafka.add_user("stranger", "pw")
    settings = connect_config(secured_kafka, "stranger", "pw", topics=topic)
    refused(tmp_path, settings, f"no such topic {topic}", "User:stranger may not DESCRIBE it")


def test_a_dead_letter_topic_the_principal_may_not_write(secured_kafka, topic, tmp_path):
    dead = unique("dlq")
    secured_kafka.create_topic(dead)
    secured_kafka.add_user("nodlqwrite", "pw", read=[topic, dead])
    settings = connect_config(
        secured_kafka, "nodlqwrite", "pw", topics=topic,
        **{"errors.tolerance": "all", "errors.deadletterqueue.topic.name": dead},
    )  # fmt: skip
    refused(
        tmp_path, settings, f"errors.deadletterqueue.topic.name={dead}",
        "User:nodlqwrite may not WRITE it", "--operation Write",
    )  # fmt: skip


def test_a_dead_letter_topic_the_preflight_may_not_create(secured_kafka, topic, tmp_path):
    dead = unique("dlq")
    secured_kafka.add_user("nocreate", "pw", read=[topic], write=[dead])
    settings = connect_config(
        secured_kafka, "nocreate", "pw", topics=topic,
        **{
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dead,
            "errors.deadletterqueue.topic.replication.factor": "1",
        },
    )  # fmt: skip
    refused(tmp_path, settings, "User:nocreate may not CREATE it", "--operation Create")
    assert dead not in secured_kafka.admin().list_topics(timeout=10).topics


def test_the_dead_letter_topic_is_created_with_create_and_written_with_write(
    secured_kafka, topic, tmp_path
):
    """The ACLs docs/security.md lists for a dead-letter topic the preflight creates pass it."""
    from blockgz.sink.export.preflight import ensure_dead_letter_topic
    from blockgz.sink.jobconfig.config import ExportSettings

    dead = unique("dlq")
    secured_kafka.add_user("dlqowner", "pw", read=[topic], write=[dead], create=[dead])
    settings = connect_config(
        secured_kafka, "dlqowner", "pw", topics=topic,
        **{
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dead,
            "errors.deadletterqueue.topic.replication.factor": "1",
        },
    )  # fmt: skip
    ensure_dead_letter_topic(ExportSettings.from_mapping({"path": str(tmp_path), **settings}))
    assert dead in secured_kafka.admin().list_topics(timeout=10).topics


def test_a_replay_target_the_principal_may_not_write(secured_kafka, tmp_path):
    from tests.integration.test_replay import archive_of

    archive_of(tmp_path / "archive", "orders", 1, 10)
    target = unique("restored")
    secured_kafka.create_topic(target)
    options = connect_config(secured_kafka, "noreplaywrite", "replay-secret")
    secured_kafka.add_user("noreplaywrite", "replay-secret", read=[target])
    args = [f"-Okafka.{k}={v}" for k, v in options.items() if k != "kafka.bootstrap.servers"]
    code, lines, output, seconds = run_cli(
        "replay", str(tmp_path / "archive"), "--topic", "orders", "--to-topic", target,
        "--bootstrap-servers", secured_kafka.secure_bootstrap, *args, cwd=tmp_path,
    )  # fmt: skip
    assert code != 0 and len(lines) <= MAX_LINES and seconds < MAX_SECONDS, output
    assert f"--to-topic {target}: User:noreplaywrite may not WRITE it" in output
    assert "replay-secret" not in output and "Traceback" not in output


# -- a secured export that works ------------------------------------------------------------------
@pytest.mark.slow
def test_a_least_privileged_export_and_replay_over_sasl_ssl(spark, secured_kafka, tmp_path):
    """The exporting principal may READ the topic and WRITE its dead-letter topic, nothing else
    (no group, no cluster ACL: the idempotent dead-letter producer needs none beside WRITE);
    its settings are a pasted Connect config with a PKCS12 truststore and host-name checks on.
    The archive holds exactly the good records, the dead-letter topic the bad ones; a replay
    by another principal (WRITE and READ on its target) restores the archive there."""
    from blockgz.sink.export.job import run_export
    from blockgz.sink.jobconfig.config import ExportSettings
    from blockgz.store import LocalStore
    from testkit.deadletters import produce_mixed
    from testkit.kafka_data import read_exported

    topic, dead = unique("archived"), unique("archived-dlq")
    secured_kafka.create_topic(topic, partitions=2)
    secured_kafka.create_topic(dead)
    bad = produce_mixed(secured_kafka, topic, 2, 25)  # through the super user's listener
    secured_kafka.add_user("archiver", "archiver-secret", read=[topic], write=[dead])
    truststore = secured_kafka.ca.write_pkcs12_truststore(tmp_path / "trust.p12", "changeit")
    settings = connect_config(
        secured_kafka, "archiver", "archiver-secret",
        **{
            "name": "secured",
            "topics": topic,
            "path": str(tmp_path / "archive"),
            "flush.size": "10",
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dead,
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(truststore),
            "ssl.truststore.password": "changeit",
            "ssl.endpoint.identification.algorithm": "https",
        },
    )  # fmt: skip
    job = ExportSettings.from_mapping(settings)
    result = run_export(
        job, checkpoint=tmp_path / "ckpt", once=True, spark=spark, install_signal_handlers=False
    )
    archived = read_exported(LocalStore(str(tmp_path / "archive"))).offsets()
    assert set(archived) == {(p, i) for p in range(2) for i in range(25)} - bad
    assert max(archived.values()) == 1 and result.records == 50
    assert secured_kafka.high_watermarks(dead) == {0: len(bad)} and len(bad) == 4
    checkpoint_files = [f for f in (tmp_path / "ckpt").rglob("*") if f.is_file()]
    assert not [f for f in checkpoint_files if b"archiver-secret" in f.read_bytes()]

    target = unique("restored")
    secured_kafka.create_topic(target, partitions=2)
    secured_kafka.add_user("restorer", "restorer-secret", read=[target], write=[target])
    replay_options = [
        f"-Okafka.{k}={v}"
        for k, v in connect_config(secured_kafka, "restorer", "restorer-secret").items()
        if k != "kafka.bootstrap.servers"
    ]
    code, _, output, _ = run_cli(
        "replay", str(tmp_path / "archive"), "--topic", topic, "--to-topic", target,
        "--bootstrap-servers", secured_kafka.secure_bootstrap, *replay_options, cwd=tmp_path,
    )  # fmt: skip
    assert code == 0, output
    assert "restorer-secret" not in output
    assert secured_kafka.high_watermarks(target) == {0: 23, 1: 23}


@pytest.mark.slow
def test_spark_kafka_connector_reads_over_sasl_ssl_with_the_same_settings(secured_kafka, tmp_path):
    """The same pasted Connect config, with Spark's own Kafka connector
    (``blockgz.spark.kafka.jars``) as the source: its Java consumers get the Java names back
    (:func:`blockgz.sink.spark_kafka.source_options`) and read as the least-privileged
    principal (READ on the topic, nothing else: no group ACL either); the password is in no
    output, log or checkpoint file."""
    from blockgz.errors import JarResolutionError
    from blockgz.sink.spark_kafka import connector_jars
    from blockgz.store import LocalStore
    from testkit.kafka_data import produce_numbered, read_exported

    try:
        connector_jars("4.2.0")
    except JarResolutionError as exc:
        pytest.skip(f"Spark's Kafka connector is not available: {exc}")
    topic = unique("spark-read")
    secured_kafka.create_topic(topic, partitions=2)
    produce_numbered(secured_kafka.bootstrap_servers, topic, 2, 15)
    password = "spark-reader-" + uuid.uuid4().hex
    secured_kafka.add_user("spark-reader", password, read=[topic])
    settings = connect_config(
        secured_kafka, "spark-reader", password,
        **{"name": unique("spark-sec"), "topics": topic, "path": str(tmp_path / "archive"),
           "flush.size": "10", "blockgz.spark.kafka.jars": "4.2.0"},
    )  # fmt: skip
    config = write_config(tmp_path, settings)
    code, _, output, _ = run_cli(
        "export", str(config), "--once", "--checkpoint", str(tmp_path / "ckpt"), cwd=tmp_path
    )
    job_log = (tmp_path / "ckpt" / "blockgz-export.log").read_text()
    assert code == 0, output[-3000:] + job_log[-3000:]
    assert "reading Kafka with the Spark Kafka source" in job_log
    read_exported(LocalStore(str(tmp_path / "archive"))).assert_exactly_once(2, 15)
    leaked = [
        str(p)
        for p in tmp_path.rglob("*")
        if p.is_file() and p != config and password.encode() in p.read_bytes()
    ]
    assert password not in output and leaked == []


@pytest.mark.parametrize(("acl", "missing"), [("describe", "READ"), ("none", "DESCRIBE")])
def test_a_topic_the_principal_may_not_read_fails_the_export_without_preflight(
    acl, missing, secured_kafka, s3_server, bucket, tmp_path
):
    """``blockgz.preflight=false`` and READ on one of two topics: the export used to end
    ``done: 50 records`` with exit 0 and the other topic absent. Every topic the job names is
    archived or the export fails: here before anything is written, naming the topic and the
    permission (issue 41, situation 9)."""
    from testkit.s3 import s3_options

    readable, other = unique("ok"), unique("hidden")
    for name in (readable, other):
        secured_kafka.create_topic(name)
        secured_kafka.produce(name, [b'{"n":%d}' % n for n in range(50)])
    user = unique("half")
    described = [other] if acl == "describe" else []
    secured_kafka.add_user(user, "pw", read=[readable], describe=described)
    settings = connect_config(
        secured_kafka, user, "pw", topics=f"{readable},{other}",
        **{"blockgz.preflight": "false", "s3.bucket.name": bucket},
        **s3_options(s3_server.endpoint_url),
    )  # fmt: skip
    config = write_config(tmp_path, {"name": unique("half"), **settings})
    code, lines, output, seconds = run_cli("export", str(config), "--once", cwd=tmp_path)
    assert code != 0 and len(lines) <= MAX_LINES and "Traceback" not in output, output
    assert seconds < MAX_SECONDS, f"{seconds:.1f} s"
    assert f"User:{user} may not {missing} topic {other}" in output, output
    assert f"--operation Read --topic {other}" in output, output
    listed = s3_server.client().list_objects_v2(Bucket=bucket, Prefix="topics/")
    assert listed.get("KeyCount", 0) == 0, "nothing archived of either topic"
