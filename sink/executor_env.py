"""What the driver hands its executors: AWS settings from its environment, and secrets redacted.

On a cluster, executors do not inherit the driver's environment, so AWS credentials exported in
the shell that started ``blockgz export`` never reach the tasks that write to S3. blockgz's
tasks use boto3, which reads ``AWS_*`` variables. The ones that are no secret (region,
endpoints, CA bundle) go as ``spark.executorEnv.*`` (:func:`forwarded_env`). The credentials
(:data:`SECRET_VARIABLES`) never go into Spark's config: PySpark puts every setting on the
``spark-submit`` command line, readable by every local user in ``ps``, and Spark's environment
page and event log list ``spark.executorEnv.*``. The export hands them to its sink instead, in
one option (:func:`credentials_option`) that travels inside the pickled writer to the tasks,
which set them in their worker's environment (:func:`apply_credentials`) before touching S3.
Only variables that are set are forwarded: with none, executors resolve credentials themselves
(a profile or an instance role on the nodes). A ``spark.executorEnv.*`` the config sets wins.

Spark shows its config in the UI's Environment tab and data source options in query plans,
each passed through ``spark.redaction.regex``. Spark's default pattern misses
``AWS_ACCESS_KEY_ID`` (an underscore, not a dot), SASL JAAS configs, the registry's
``basic.auth.user.info``, SSE-C keys and Kafka clients' inline PEM private keys
(librdkafka's ``ssl.key.pem``, Java's ``ssl.keystore.key``); :data:`REDACTION_REGEX` covers
them too.

>>> env = {"AWS_ACCESS_KEY_ID": "AKIA", "AWS_SECRET_ACCESS_KEY": "s", "AWS_REGION": "eu"}
>>> sorted(forwarded_env(env))
['spark.executorEnv.AWS_REGION']
>>> sorted(json.loads(credentials_option(env)[CREDENTIALS_OPTION]))
['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY']
>>> import re
>>> [bool(re.search(REDACTION_REGEX, k)) for k in (
...     "spark.executorEnv.AWS_ACCESS_KEY_ID", "aws.secret.access.key",
...     "kafka.sasl.jaas.config", "value.converter.basic.auth.user.info", "s3.part.size")]
[True, True, True, True, False]
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, MutableMapping

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

#: The credentials among them: never in Spark's config (its argv, environment page, event log).
SECRET_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")

#: The sink option that carries :data:`SECRET_VARIABLES` to the tasks (a JSON object). Its name
#: matches :data:`REDACTION_REGEX`, so a plan that shows the sink's options shows it redacted.
CREDENTIALS_OPTION = "blockgz.executor.credentials"

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
    """``spark.executorEnv.*`` settings for the AWS variables set (non-empty) in ``environ``,
    but the credentials (:data:`SECRET_VARIABLES`, see :func:`credentials_option`)."""
    return {
        f"spark.executorEnv.{name}": environ[name]
        for name in FORWARDED_VARIABLES
        if environ.get(name) and name not in SECRET_VARIABLES
    }


def credentials_option(
    environ: Mapping[str, str], conf: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The sink option holding the credentials set in ``environ`` (none when none is set, or
    when ``conf`` sets that variable as ``spark.executorEnv.*``, which then wins)."""
    conf = conf or {}
    found = {
        name: environ[name]
        for name in SECRET_VARIABLES
        if environ.get(name) and f"spark.executorEnv.{name}" not in conf
    }
    return {CREDENTIALS_OPTION: json.dumps(found)} if found else {}


def apply_credentials(
    options: Mapping[str, object], environ: MutableMapping[str, str] | None = None
) -> list[str]:
    """In a task: set the credentials the driver handed over (:data:`CREDENTIALS_OPTION` of the
    sink's ``options``) in this worker's environment, as ``spark.executorEnv`` would have;
    returns the names set.

    >>> env = {}
    >>> apply_credentials({CREDENTIALS_OPTION: '{"AWS_ACCESS_KEY_ID": "AKIA"}'}, env), env
    (['AWS_ACCESS_KEY_ID'], {'AWS_ACCESS_KEY_ID': 'AKIA'})
    >>> apply_credentials({}, env)
    []
    """
    environ = os.environ if environ is None else environ
    text = options.get(CREDENTIALS_OPTION)
    if not text:
        return []
    given = {k: str(v) for k, v in json.loads(str(text)).items() if k in SECRET_VARIABLES}
    environ.update(given)
    return sorted(given)


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
    environ: Mapping[str, str],
    conf: Mapping[str, str],
    *,
    forward: bool = True,
    secrets: bool = False,
) -> dict[str, str]:
    """The Spark settings to add to ``conf``: the forwarded environment (unless ``forward`` is
    false, or ``conf`` already sets that variable) and the widened redaction pattern.

    ``secrets`` adds the credentials as ``spark.executorEnv.*`` too, for a caller that has no
    other way to hand them to a cluster's executors (they are then in the JVM's argv)."""
    added = {REDACTION_KEY: redaction_regex(conf.get(REDACTION_KEY))}
    if forward:
        wanted = dict(forwarded_env(environ))
        if secrets:
            wanted.update(
                (f"spark.executorEnv.{k}", v) for k, v in environ.items()
                if k in SECRET_VARIABLES and v
            )  # fmt: skip
        added.update({k: v for k, v in wanted.items() if k not in conf})
    return added


def is_local(master: str | None) -> bool:
    """Whether ``master`` runs the executors in the driver's JVM, whose Python workers inherit
    the driver's environment (nothing to forward then).

    >>> is_local("local[2,3]"), is_local("spark://h:7077"), is_local(None)
    (True, False, False)
    """
    return bool(master) and str(master).startswith("local")


__all__ = [
    "CREDENTIALS_OPTION",
    "FORWARDED_VARIABLES",
    "REDACTION_REGEX",
    "SECRET_VARIABLES",
    "apply_credentials",
    "credentials_option",
    "executor_conf",
    "forwarded_env",
    "is_local",
    "redaction_regex",
]
