"""Kafka security settings as users paste them: Java (Connect) names → librdkafka's, librdkafka
names → Java's (Spark's connector), and the one-line refusals of what cannot be translated.

The translated settings are handed to a real librdkafka client (no broker needed: it checks
its settings, and loads CA certificates, when it is made)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from blockgz.errors import ConfigError
from blockgz.kafka.security import (
    java_settings,
    librdkafka_settings,
    lift_connect_settings,
    producer_settings,
)
from testkit.throwaway_ca import TestCA

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def jaas(module: str = SCRAM, user: str = "archiver", password: str = "pw") -> str:
    return f'{module} required username="{user}" password="{password}";'


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return TestCA("unit test CA")


def librdkafka_accepts(settings: dict) -> None:
    """A librdkafka producer is made from ``settings`` (raises if librdkafka refuses them)."""
    confluent_kafka = pytest.importorskip("confluent_kafka")
    producer = confluent_kafka.Producer({"bootstrap.servers": "127.0.0.1:1", **settings})
    producer.flush(0)


# -- Java names → librdkafka --------------------------------------------------------------------
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
def test_a_scram_jaas_config_becomes_username_and_password(mechanism):
    out = librdkafka_settings(
        {"security.protocol": "sasl_ssl", "sasl.mechanism": mechanism, "sasl.jaas.config": jaas()}
    )
    assert out == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.username": "archiver",
        "sasl.password": "pw",
    }
    librdkafka_accepts(out)


def test_a_plain_jaas_config_with_escapes_and_unquoted_values():
    text = f'{PLAIN}  required\n  username=key   password="a \\"quoted\\" \\\\ secret" ;'
    out = librdkafka_settings({"sasl.mechanism": "PLAIN", "sasl.jaas.config": text})
    assert out["sasl.username"] == "key" and out["sasl.password"] == 'a "quoted" \\ secret'


def test_librdkafka_names_given_beside_a_jaas_config_win():
    out = librdkafka_settings(
        {"sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas(PLAIN), "sasl.username": "other"}
    )
    assert out["sasl.username"] == "other" and out["sasl.password"] == "pw"


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"sasl.jaas.config": jaas()}, ["kafka.sasl.mechanism=SCRAM-SHA-256 or SCRAM-SHA-512"]),
        ({"sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas()}, ["ScramLoginModule", "SCRAM"]),
        (
            {
                "sasl.mechanism": "GSSAPI",
                "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required "
                'useKeyTab=true keyTab="/etc/k.keytab" principal="a@B";',
            },
            ["kafka.sasl.kerberos.keytab", "kafka.sasl.kerberos.principal"],
        ),
        (
            {
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer."
                'OAuthBearerLoginModule required clientId="c" clientSecret="s";',
            },
            ["kafka.sasl.oauthbearer.method=oidc", "kafka.sasl.oauthbearer.client.id"],
        ),
        (
            {
                "sasl.mechanism": "OAUTHBEARER",
                "sasl.login.callback.handler.class": "org.apache.kafka.common.security."
                "oauthbearer.OAuthBearerLoginCallbackHandler",
            },
            ["kafka.sasl.login.callback.handler.class", "kafka.sasl.oauthbearer.method=oidc"],
        ),
        ({"sasl.jaas.config": "nonsense"}, ["kafka.sasl.jaas.config", "JAAS entry"]),
        (
            {"sasl.mechanism": "PLAIN", "sasl.jaas.config": f'{PLAIN} required username="u";'},
            ["no password"],
        ),
        (
            {"sasl.mechanism": "SCRAM-SHA-1"},
            ["kafka.sasl.mechanism=SCRAM-SHA-1", "SCRAM-SHA-256, SCRAM-SHA-512"],
        ),
        ({"security.protocol": "TLS"}, ["kafka.security.protocol=TLS", "SASL_SSL"]),
        (
            {"ssl.endpoint.identification.algorithm": "http"},
            ["ssl.endpoint.identification.algorithm=http", "https", "none"],
        ),
        ({"ssl.keystore.type": "JKS", "ssl.keystore.location": "/k.jks"}, ["PKCS12"]),
    ],
)
def test_what_cannot_be_translated_is_refused_in_one_line_naming_the_setting(settings, words):
    with pytest.raises(ConfigError) as caught:
        librdkafka_settings(settings)
    message = str(caught.value)
    assert "\n" not in message and '"pw"' not in message and '"s"' not in message
    for word in words:
        assert word in message


def test_the_password_never_appears_in_a_refusal():
    with pytest.raises(ConfigError) as caught:
        librdkafka_settings({"sasl.jaas.config": jaas(password="hunter2-secret")})
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    ("given", "expected"), [("", "none"), ("https", "https"), ("HTTPS", "https")]
)
def test_endpoint_identification(given, expected):
    out = librdkafka_settings({"ssl.endpoint.identification.algorithm": given})
    assert out == {"ssl.endpoint.identification.algorithm": expected}
    librdkafka_accepts({"security.protocol": "SSL", **out})


def test_a_pem_truststore_becomes_the_ca_location(ca, tmp_path):
    path = ca.write_ca(tmp_path / "ca.pem")
    for extra in ({"ssl.truststore.type": "PEM"}, {}):  # given, or seen in the file
        out = librdkafka_settings({"ssl.truststore.location": str(path), **extra})
        assert out == {"ssl.ca.location": str(path)}
    librdkafka_accepts({"security.protocol": "SSL", **out})


def test_a_pkcs12_truststore_becomes_pem_certificates(ca, tmp_path):
    path = ca.write_pkcs12_truststore(tmp_path / "trust.p12", "changeit")
    for extra in ({"ssl.truststore.type": "PKCS12"}, {}):
        out = librdkafka_settings(
            {"ssl.truststore.location": str(path), "ssl.truststore.password": "changeit", **extra}
        )
        assert out == {"ssl.ca.pem": ca.cert_pem.decode()}
    librdkafka_accepts({"security.protocol": "SSL", **out})


def test_a_pkcs12_truststore_with_the_wrong_password_is_refused(ca, tmp_path):
    path = ca.write_pkcs12_truststore(tmp_path / "trust.p12", "changeit")
    with pytest.raises(ConfigError, match=r"ssl\.truststore\.password is wrong"):
        librdkafka_settings(
            {
                "ssl.truststore.location": str(path),
                "ssl.truststore.type": "PKCS12",
                "ssl.truststore.password": "nope",
            }
        )


def test_a_jks_truststore_is_refused_naming_ssl_ca_location(tmp_path):
    path = tmp_path / "trust.jks"
    path.write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))  # JKS's magic number
    for extra in ({"ssl.truststore.type": "JKS"}, {}):
        with pytest.raises(ConfigError) as caught:
            librdkafka_settings({"ssl.truststore.location": str(path), **extra})
        assert "kafka.ssl.ca.location" in str(caught.value) and "keytool" in str(caught.value)


def test_inline_pem_stores_and_java_tuning(ca):
    out = librdkafka_settings(
        {
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": ca.cert_pem.decode(),
            "ssl.enabled.protocols": "TLSv1.3",
            "ssl.protocol": "TLSv1.3",
        }
    )
    assert out == {"ssl.ca.pem": ca.cert_pem.decode()}
    assert librdkafka_settings({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/c.pem"}) == {
        "ssl.key.location": "/c.pem",
        "ssl.certificate.location": "/c.pem",
    }


def test_librdkafka_names_pass_unchanged():
    given = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "u",
        "sasl.password": "p",
        "ssl.ca.location": "/ca.pem",
        "ssl.keystore.location": "/me.p12",
        "ssl.keystore.password": "k",
        "acks": "all",
    }
    assert librdkafka_settings(given) == given


# -- Connect configs: top level, consumer.override., producer.override. -------------------------
def test_a_pasted_connect_config_reaches_the_source_and_the_dead_letter_producer():
    from blockgz.sink.jobconfig.config import ExportSettings

    job = ExportSettings.from_mapping(
        {
            "name": "secured",
            "topics": "orders",
            "path": "/tmp/archive",
            "kafka.bootstrap.servers": "b:9093",
            "security.protocol": "SASL_SSL",  # a worker's lines, pasted
            "consumer.override.sasl.mechanism": "SCRAM-SHA-512",
            "consumer.override.sasl.jaas.config": jaas(),
            "consumer.override.ssl.endpoint.identification.algorithm": "",
            "producer.override.sasl.jaas.config": jaas(user="dlq-writer", password="pw2"),
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": "orders-dlq",
        }
    )
    client = job.source.client_config()
    assert client == {
        "reconnect.backoff.ms": 10,  # blockgz's default (sink/kafka/options.py)
        "bootstrap.servers": "b:9093",
        "isolation.level": "read_committed",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "archiver",
        "sasl.password": "pw",
        "ssl.endpoint.identification.algorithm": "none",
    }
    producer = job.sink.dead_letters.producer
    assert (producer["sasl.username"], producer["sasl.password"]) == ("dlq-writer", "pw2")
    assert producer["security.protocol"] == "SASL_SSL"
    librdkafka_accepts(dict(producer))


def test_lifting_order():
    lifted = lift_connect_settings(
        {
            "sasl.mechanism": "PLAIN",
            "consumer.override.sasl.mechanism": "SCRAM-SHA-256",
            "consumer.override.max.poll.records": "10",
        }
    )
    assert lifted == {
        "consumer.override.max.poll.records": "10",  # not a security setting: Connect's own
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
    }
    assert producer_settings({"acks": "all"}, {"ssl.ca.location": "/x", "linger.ms": "9"}) == {
        "acks": "all",
        "ssl.ca.location": "/x",
    }


def test_restore_takes_java_names_too():
    from blockgz.reader.restore.send import restore_options

    _, producer = restore_options(
        {"kafka.sasl.mechanism": "SCRAM-SHA-512", "kafka.sasl.jaas.config": jaas()}
    )
    assert producer == {
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "archiver",
        "sasl.password": "pw",
    }


# -- librdkafka names → Java (Spark's Kafka connector) ------------------------------------------
def test_spark_connector_options_get_java_names(tmp_path):
    from blockgz.sink.spark_kafka import source_options

    ca_file = tmp_path / "ca.pem"
    ca_file.write_text("")
    options = source_options(
        {
            "subscribe": "t",
            "kafka.bootstrap.servers": "b:9093",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-512",
            "kafka.sasl.username": "u",
            "kafka.sasl.password": 'p"w',
            "kafka.ssl.ca.location": str(ca_file),
            "kafka.ssl.endpoint.identification.algorithm": "none",
        }
    )
    assert options == {
        "subscribe": "t",
        "kafka.bootstrap.servers": "b:9093",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": f'{SCRAM} required username="u" password="p\\"w";',
        "kafka.ssl.truststore.location": str(ca_file),
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.endpoint.identification.algorithm": "",
        "kafka.fetch.max.wait.ms": "20",  # READ_DEFAULTS
        "kafka.max.poll.records": "20000",
    }
    # and back: what Java takes, librdkafka takes too
    back = librdkafka_settings({k[6:]: v for k, v in options.items() if k.startswith("kafka.")})
    assert back["sasl.password"] == 'p"w' and back["ssl.ca.location"] == str(ca_file)


def test_java_names_pass_to_the_spark_connector_unchanged():
    given = {
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": jaas(PLAIN),
        "ssl.truststore.type": "JKS",
    }
    assert java_settings(given) == given


def test_spark_connector_refusals(tmp_path):
    with pytest.raises(ConfigError, match=r"kafka\.sasl\.jaas\.config"):
        java_settings({"sasl.mechanism": "GSSAPI", "sasl.username": "u"})
    with pytest.raises(ConfigError, match="directory"):
        java_settings({"ssl.ca.location": str(tmp_path)})


# -- through the CLI ----------------------------------------------------------------------------
def test_an_unknown_mechanism_is_refused_by_the_cli_in_one_line(tmp_path):
    """Config time: no broker is asked (the brokers named do not exist)."""
    config = tmp_path / "job.properties"
    config.write_text(
        "name=j\ntopics=t\nkafka.bootstrap.servers=127.0.0.1:1\npath=" + str(tmp_path / "a") + "\n"
        "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-1024\n"
        f"sasl.jaas.config={jaas(password='top-secret')}\n"
    )
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "blockgz.cli", "export", str(config), "--once"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert proc.returncode != 0 and len(lines) <= 3 and time.monotonic() - started < 30
    assert "kafka.sasl.mechanism=SCRAM-SHA-1024" in proc.stderr and "SCRAM-SHA-512" in proc.stderr
    assert "top-secret" not in proc.stdout + proc.stderr


# -- secrets stay redacted where Spark shows options ----------------------------------------------
@pytest.mark.parametrize(
    "name",
    [
        "kafka.sasl.password",
        "kafka.sasl.jaas.config",
        "consumer.override.sasl.jaas.config",
        "producer.override.sasl.jaas.config",
        "kafka.ssl.truststore.password",
        "kafka.ssl.keystore.password",
        "kafka.ssl.key.password",
        "kafka.ssl.key.pem",
        "kafka.ssl.keystore.key",
        "kafka.sasl.oauthbearer.client.secret",
        "blockgz.source.kafka.sasl.password",  # the sink's copy when its tasks read Kafka
    ],
)
def test_every_kafka_secret_setting_is_redacted_by_spark(name):
    import re

    from blockgz.sink.executor_env import REDACTION_REGEX

    assert re.search(REDACTION_REGEX, name)


def test_settings_that_are_no_secret_stay_visible():
    import re

    from blockgz.sink.executor_env import REDACTION_REGEX

    for name in ("kafka.sasl.username", "kafka.ssl.ca.location", "kafka.sasl.mechanism"):
        assert not re.search(REDACTION_REGEX, name)
