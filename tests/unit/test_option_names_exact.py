"""Option names are exact (issue 42): a case or spelling slip in any key family is an error
with a "did you mean", before Spark starts, never a warning or a traceback."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from blockgz.errors import ConfigError
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.sink.jobconfig.settings_names import case_slip, check_keys
from blockgz.sink.kafka.client_names import is_client_name, kafka_name_problem, librdkafka_names

BASE = {"name": "j", "topics": "t", "kafka.bootstrap.servers": "127.0.0.1:1", "path": "/tmp/x"}


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("Flush.Size", "flush.size"),
        ("FLUSH.SIZE", "flush.size"),
        ("S3.Bucket.Name", "s3.bucket.name"),
        ("Kafka.Bootstrap.Servers", "kafka.bootstrap.servers"),
        ("Spark.executor.memory", "spark.executor.memory"),
        ("Value.Converter.schemas.enable", "value.converter.schemas.enable"),
        ("value.converter.Schemas.Enable", "value.converter.schemas.enable"),
        ("Blockgz.Resume", "blockgz.resume"),
        ("kafka.bootstrap.server", "kafka.bootstrap.servers"),
        ("kafka.Isolation.Level", "kafka.isolation.level"),
        ("kafka.fetch.wait.max.msx", "kafka.fetch.wait.max.ms"),
        ("kafka.sasl.jaas.confg", "kafka.sasl.jaas.config"),
        ("kafka.fetch.max.wait.ms", "kafka.fetch.wait.max.ms"),  # Java's spelling
        ("value.converter.schemas.enabled", "value.converter.schemas.enable"),
        ("key.converter.schema.registry.ur", "key.converter.schema.registry.url"),
        ("value.converter.basic.auth.userinfo", "value.converter.basic.auth.user.info"),
    ],
)
def test_a_slip_is_an_error_naming_the_setting_meant(key, meant):
    with pytest.raises(ConfigError) as caught:
        check_keys({**BASE, key: "1"})
    assert f"{key}: " in str(caught.value)
    assert f"did you mean {meant}?" in str(caught.value)


def test_the_export_config_refuses_a_capitalised_key_instead_of_running_without_it():
    with pytest.raises(ConfigError, match=r"Flush\.Size: .*did you mean flush\.size\?"):
        ExportSettings.from_mapping({**BASE, "Flush.Size": "3"})


def test_a_kafka_name_no_client_knows_is_an_error_even_with_no_close_name():
    problem = kafka_name_problem("kafka.zzz.qqq")
    assert problem is not None and problem.startswith("kafka.zzz.qqq: not a Kafka client setting")
    with pytest.raises(ConfigError, match=r"kafka\.zzz\.qqq"):
        check_keys({**BASE, "kafka.zzz.qqq": "1"})


@pytest.mark.parametrize(
    "name",
    [
        "acks",
        "isolation.level",
        "fetch.queue.backoff.ms",
        "sasl.username",
        "ssl.ca.location",
        "sasl.jaas.config",  # Java names blockgz translates
        "ssl.truststore.location",
        "ssl.protocol",
        "sasl.login.callback.handler.class",  # refused later, with its own message
    ],
)
def test_names_the_kafka_client_takes_pass(name):
    assert is_client_name(name)
    assert check_keys({**BASE, f"kafka.{name}": "x"}) == []


def test_librdkafkas_table_is_read_whole():
    names = librdkafka_names()
    assert {"bootstrap.servers", "acks", "isolation.level", "sasl.username"} <= names
    assert "Property" not in names and len(names) > 150


def test_converter_settings_blockgz_does_not_read_pass_as_before():
    given = {
        "value.converter.schema.registry.url": "http://r:8081",
        "value.converter.auto.register.schemas": "false",
        "key.converter.use.latest.version": "true",
    }
    assert check_keys({**BASE, **given}) == []


def test_exact_names_and_unrelated_keys_are_no_slip():
    assert case_slip("flush.size") is None and case_slip("my.custom.option") is None
    assert check_keys({**BASE, "my.custom.option": "1"}) == ["my.custom.option"]


def test_export_with_a_slipped_key_fails_fast_before_spark(tmp_path):
    config = tmp_path / "slip.properties"
    config.write_text(
        "name=slip\ntopics=t\nkafka.bootstrap.servers=127.0.0.1:1\ns3.bucket.name=b\n"
        "Flush.Size=3\nkafka.bootstrap.server=127.0.0.1:2\n"
    )
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "blockgz.cli", "export", str(config), "--once"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    seconds = time.monotonic() - started
    assert proc.returncode == 1, proc.stderr
    assert seconds < 10, seconds  # no JVM was started (a SparkSession takes longer)
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "Flush.Size: not a setting blockgz knows; did you mean flush.size?" in lines[0]
    assert "kafka.bootstrap.server: not a Kafka client setting; did you mean" in lines[0]
    assert not (tmp_path / "checkpoints").exists()  # nothing was started


def test_without_librdkafkas_table_each_name_is_asked_of_librdkafka(monkeypatch):
    import blockgz.sink.kafka.client_names as names

    monkeypatch.setattr(names, "librdkafka_names", frozenset)  # the table could not be read
    assert names.is_client_name("acks") and names.is_client_name("fetch.wait.max.ms")
    assert not names.is_client_name("bootstrap.server")
    assert names.is_client_name("ssl.truststore.location")  # a Java name blockgz translates
