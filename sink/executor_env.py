"""What the driver hands its executors: AWS settings from its environment, and secrets redacted.

On a cluster, executors do not inherit the driver's environment, so AWS credentials exported in
the shell that started ``blockgz export`` never reach the tasks that write to S3. Spark solves
this for s3a by copying ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN``
into the Hadoop config; blockgz's tasks use boto3, so :func:`forwarded_env` sets the same
variables (and the region and endpoint ones boto3 reads) as ``spark.executorEnv.*``. Only
variables that are set are forwarded: with none, executors resolve credentials themselves
(a profile or an instance role on the nodes). A ``spark.executorEnv.*`` the config sets wins.

Spark shows its config in the UI's Environment tab and data source options in query plans,
each passed through ``spark.redaction.regex``. Spark's default pattern misses
``AWS_ACCESS_KEY_ID`` (an underscore, not a dot), SASL JAAS configs, the registry's
``basic.auth.user.info``, SSE-C keys and Kafka clients' inline PEM private keys
(librdkafka's ``ssl.key.pem``, Java's ``ssl.keystore.key``); :data:`REDACTION_REGEX` covers
them too.

>>> env = {"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "s", "HOME": "/root"}
>>> sorted(forwarded_env(env))
['spark.executorEnv.AWS_ACCESS_KEY_ID', 'spark.executorEnv.AWS_SECRET_ACCESS_KEY']
>>> import re
>>> [bool(re.search(REDACTION_REGEX, k)) for k in (
...     "spark.executorEnv.AWS_ACCESS_KEY_ID", "aws.secret.access.key",
...     "kafka.sasl.jaas.config", "value.converter.basic.auth.user.info", "s3.part.size")]
[True, True, True, True, False]
"""

from __future__ import annotations

from collections.abc import Mapping

#: The driver's environment variables that executors get (when set): boto3's credentials,
#: region, endpoints and CA bundle.
FORWARDED_VARIABLES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL_STS",
    "AWS_CA_BUNDLE",  # a path: the file must be at the same place on every node
)

#: Config keys whose values are secrets, for ``spark.redaction.regex``: Spark's default
#: (``secret|password|token|access[.]?key``) widened to underscores and to the secrets of
#: Kafka clients, the Schema Registry and S3 SSE-C.
REDACTION_REGEX = (
    r"(?i)secret|password|passwd|token|credential|access[._]?key|jaas|user[._]info"
    r"|customer[._]key|private[._]key|key[._]pem|keystore[._]key"
)

#: Spark's conf key for the pattern.
REDACTION_KEY = "spark.redaction.regex"


def forwarded_env(environ: Mapping[str, str]) -> dict[str, str]:
    """``spark.executorEnv.*`` settings for the AWS variables set (non-empty) in ``environ``."""
    return {
        f"spark.executorEnv.{name}": environ[name]
        for name in FORWARDED_VARIABLES
        if environ.get(name)
    }


def redaction_regex(configured: str | None) -> str:
    """blockgz's pattern, or the user's joined with it (both apply).

    >>> redaction_regex("(?i)mykey").startswith("(?i)mykey|(?i:secret|password|")
    True
    """
    if not configured:
        return REDACTION_REGEX
    ours = REDACTION_REGEX.removeprefix("(?i)")
    return f"{configured}|(?i:{ours})"


def executor_conf(
    environ: Mapping[str, str], conf: Mapping[str, str], *, forward: bool = True
) -> dict[str, str]:
    """The Spark settings to add to ``conf``: the forwarded environment (unless ``forward`` is
    false, or ``conf`` already sets that variable) and the widened redaction pattern."""
    added = {REDACTION_KEY: redaction_regex(conf.get(REDACTION_KEY))}
    if forward:
        added.update({k: v for k, v in forwarded_env(environ).items() if k not in conf})
    return added


__all__ = [
    "FORWARDED_VARIABLES",
    "REDACTION_REGEX",
    "executor_conf",
    "forwarded_env",
    "redaction_regex",
]
