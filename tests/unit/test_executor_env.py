"""What the driver forwards to executors, and the redaction pattern (pure logic)."""

from __future__ import annotations

import re

from blockgz.sink.executor_env import REDACTION_KEY, executor_conf, forwarded_env, redaction_regex

DRIVER = {
    "AWS_ACCESS_KEY_ID": "AKIA1",
    "AWS_SECRET_ACCESS_KEY": "s3cr3t",
    "AWS_SESSION_TOKEN": "tok",
    "AWS_ENDPOINT_URL_S3": "http://s3.local:9000",
    "AWS_PROFILE": "prod",  # names a file on the driver: the nodes use their own
    "AWS_REGION": "",
    "PATH": "/usr/bin",
}


def test_only_set_aws_variables_are_forwarded():
    assert forwarded_env(DRIVER) == {
        "spark.executorEnv.AWS_ACCESS_KEY_ID": "AKIA1",
        "spark.executorEnv.AWS_SECRET_ACCESS_KEY": "s3cr3t",
        "spark.executorEnv.AWS_SESSION_TOKEN": "tok",
        "spark.executorEnv.AWS_ENDPOINT_URL_S3": "http://s3.local:9000",
    }
    assert forwarded_env({"PATH": "/bin"}) == {}


def test_config_wins_and_forwarding_can_be_off():
    conf = {"spark.executorEnv.AWS_ACCESS_KEY_ID": "from-config"}
    added = executor_conf(DRIVER, conf)
    assert "spark.executorEnv.AWS_ACCESS_KEY_ID" not in added
    assert added["spark.executorEnv.AWS_SECRET_ACCESS_KEY"] == "s3cr3t"
    assert set(executor_conf(DRIVER, {}, forward=False)) == {REDACTION_KEY}


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
