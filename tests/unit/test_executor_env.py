"""What the driver forwards to executors, and the redaction pattern (pure logic)."""

from __future__ import annotations

import json
import re

from blockgz.sink.executor_env import (
    CREDENTIALS_OPTION,
    REDACTION_KEY,
    apply_credentials,
    credentials_option,
    executor_conf,
    forwarded_env,
    redaction_regex,
)

DRIVER = {
    "AWS_ACCESS_KEY_ID": "AKIA1",
    "AWS_SECRET_ACCESS_KEY": "s3cr3t",
    "AWS_SESSION_TOKEN": "tok",
    "AWS_ENDPOINT_URL_S3": "http://s3.local:9000",
    "AWS_PROFILE": "prod",  # names a file on the driver: the nodes use their own
    "AWS_REGION": "",
    "PATH": "/usr/bin",
}


def test_only_set_aws_variables_are_forwarded_and_no_credential_in_sparks_conf():
    assert forwarded_env(DRIVER) == {
        "spark.executorEnv.AWS_ENDPOINT_URL_S3": "http://s3.local:9000",
    }
    assert forwarded_env({"PATH": "/bin"}) == {}
    conf = executor_conf(DRIVER, {})
    assert [v for v in conf.values() if v in ("AKIA1", "s3cr3t", "tok")] == []


def test_credentials_travel_in_the_sink_option_and_land_in_the_task_environment():
    option = credentials_option(DRIVER)
    assert json.loads(option[CREDENTIALS_OPTION]) == {
        "AWS_ACCESS_KEY_ID": "AKIA1",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t",
        "AWS_SESSION_TOKEN": "tok",
    }
    worker = {"AWS_SECRET_ACCESS_KEY": "the node's", "PATH": "/bin"}
    assert apply_credentials(option, worker) == [
        "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"
    ]  # fmt: skip
    assert worker["AWS_SECRET_ACCESS_KEY"] == "s3cr3t" and worker["PATH"] == "/bin"
    assert credentials_option({"PATH": "/bin"}) == {}
    assert apply_credentials({CREDENTIALS_OPTION: ""}, worker) == []
    # Something outside the three credentials is never set from the option.
    assert apply_credentials({CREDENTIALS_OPTION: '{"PATH": "/x"}'}, worker) == []
    assert worker["PATH"] == "/bin"


def test_config_wins_and_forwarding_can_be_off():
    conf = {"spark.executorEnv.AWS_ACCESS_KEY_ID": "from-config"}
    assert "AWS_ACCESS_KEY_ID" not in json.loads(
        credentials_option(DRIVER, conf)[CREDENTIALS_OPTION]
    )
    added = executor_conf(DRIVER, conf, secrets=True)  # a caller with no other way
    assert "spark.executorEnv.AWS_ACCESS_KEY_ID" not in added
    assert added["spark.executorEnv.AWS_SECRET_ACCESS_KEY"] == "s3cr3t"
    assert set(executor_conf(DRIVER, {}, forward=False, secrets=True)) == {REDACTION_KEY}


def test_every_secret_carrying_option_is_redacted():
    pattern = re.compile(executor_conf({}, {})[REDACTION_KEY])
    secret = [
        "spark.executorEnv.AWS_ACCESS_KEY_ID",
        "spark.executorEnv.AWS_SECRET_ACCESS_KEY",
        "spark.executorEnv.AWS_SESSION_TOKEN",
        "aws.access.key.id",
        "aws.secret.access.key",
        "s3.proxy.password",
        "s3.sse.customer.key",
        "kafka.sasl.jaas.config",
        "kafka.sasl.password",
        "kafka.ssl.key.password",
        "kafka.ssl.keystore.password",
        "value.converter.basic.auth.user.info",
        "schema.registry.basic.auth.user.info",
        "kafka.sasl.oauthbearer.client.secret",
        "fs.s3a.secret.key",
    ]
    plain = ["s3.bucket.name", "flush.size", "kafka.bootstrap.servers", "store.url", "topics"]
    assert [k for k in secret if not pattern.search(k)] == []
    assert [k for k in plain if pattern.search(k)] == []


def test_a_users_pattern_is_kept_and_ours_added():
    joined = re.compile(redaction_regex("(?i)internal[.]host"))
    assert joined.search("my.internal.host") and joined.search("aws.secret.access.key")
