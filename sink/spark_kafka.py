"""Spark's own Kafka source for the export: where the ``spark-sql-kafka`` connector comes from.

pyspark's wheel does not ship the connector. ``blockgz.spark.kafka.jars`` (:data:`OPTION`) puts
it on the export's ``spark.jars``, and the export then reads Kafka with ``format("kafka")``
instead of blockgz's Python source (:func:`blockgz.sink.session.has_spark_kafka`). Its values:

* ``none`` (the default): add nothing; the job still uses Spark's source when the connector is
  already on the classpath (``spark-submit --packages``, a cluster's own jars);
* ``auto``: the connector of pyspark's own version, from Maven Central (cached, see
  :mod:`blockgz.jars`);
* a version such as ``4.2.0``: that version of the connector, from Maven Central. Maven Central
  may lag pyspark (there was no 4.3.0 connector when pyspark 4.3.0 was out); 4.2.0's connector
  is tested on pyspark 4.3.0;
* a comma list of jar files and folders of jars, used as they are (no network).

Only the jars pyspark lacks are added (the connector, its token provider, ``kafka-clients`` and
``commons-pool2``); a second Hadoop or Scala library on the classpath would clash.

>>> parse("none"), parse(" AUTO "), parse("4.2.0")
('none', 'auto', '4.2.0')
>>> artifact_name("kafka-clients-3.9.2.jar"), artifact_name("scala-library-2.13.18.jar")
('kafka-clients', 'scala-library')
>>> with_jars({"spark.jars": "/a.jar"}, [Path("/b.jar")])
{'spark.jars': '/a.jar,/b.jar'}
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from blockgz.errors import ConfigError, JarResolutionError

OPTION = "blockgz.spark.kafka.jars"
DEFAULT = "none"
GROUP = "org.apache.spark"
CONNECTOR = "spark-sql-kafka-0-10_2.13"
_VERSION = re.compile(r"\d+\.\d+\.\d+(?:[-.][\w.-]+)?")
_JAR_VERSION = re.compile(r"-\d[\w.+-]*\.jar$")


def parse(value: str) -> str:
    """``none``, ``auto``, a version, or the comma list of paths as given (stripped)."""
    text = value.strip()
    if text.lower() in ("", "none", "auto"):
        return text.lower() or DEFAULT
    return text


def artifact_name(jar: str) -> str:
    """A jar file's artifact name, without its version."""
    return _JAR_VERSION.sub("", jar)


def connector_jars(value: str) -> list[Path]:
    """The jars :data:`OPTION`'s ``value`` asks for (none for ``none``).

    Raises :class:`ConfigError` for a path that does not exist or holds no jar, and
    :class:`JarResolutionError` when Maven Central cannot serve the version.
    """
    choice = parse(value)
    if choice == "none":
        return []
    if choice == "auto" or _VERSION.fullmatch(choice):
        return _from_maven(_pyspark_version() if choice == "auto" else choice)
    jars: list[Path] = []
    for item in (p.strip() for p in choice.split(",")):
        if not item:
            continue
        path = Path(item).expanduser()
        if path.is_dir():
            found = sorted(path.glob("*.jar"))
            if not found:
                raise ConfigError(f"{OPTION}: the folder {path} holds no .jar file")
            jars.extend(found)
        elif path.is_file() and path.suffix == ".jar":
            jars.append(path)
        else:
            raise ConfigError(
                f"{OPTION} is none, auto, a connector version (4.2.0) or jar files and folders; "
                f"{item!r} is none of these"
            )
    return jars


def _pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def _from_maven(version: str) -> list[Path]:
    from blockgz.jars import Artifact, resolve

    artifact = Artifact(GROUP, CONNECTOR, version)
    try:
        jars = resolve(artifact)
    except JarResolutionError as exc:
        raise JarResolutionError(
            f"{exc}\nMaven Central may not serve the connector for this Spark version yet: "
            f"name one it serves ({OPTION}=4.2.0) or jar files"
        ) from exc
    return missing_from_spark(jars)


def missing_from_spark(jars: Sequence[Path]) -> list[Path]:
    """The ``jars`` whose artifact pyspark does not ship (in any version)."""
    import pyspark

    shipped = {
        artifact_name(p.name) for p in Path(pyspark.__file__).parent.joinpath("jars").glob("*.jar")
    }
    return [jar for jar in jars if artifact_name(jar.name) not in shipped]


def source_options(options: Mapping[str, str]) -> dict[str, str]:
    """The export's source options for Spark's Kafka connector, which takes the Java client's
    names: librdkafka's security settings under ``kafka.`` become Java's
    (:func:`blockgz.kafka.security.java_settings`; ``sasl.jaas.config`` from the user name
    and password), librdkafka's ``fetch.wait.max.ms`` Java's ``fetch.max.wait.ms``, the rest
    pass as they are; then :data:`READ_DEFAULTS` where the user set nothing.

    >>> source_options({"subscribe": "t", "kafka.sasl.mechanism": "PLAIN",
    ...                 "kafka.sasl.username": "u", "kafka.sasl.password": "p"})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'subscribe': 't', 'kafka.sasl.mechanism': 'PLAIN', 'kafka.sasl.jaas.config':
     'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";',
     'kafka.fetch.max.wait.ms': '20', 'kafka.max.poll.records': '20000'}
    >>> source_options({"kafka.fetch.wait.max.ms": "100", "kafka.max.poll.records": "500"})
    {'kafka.max.poll.records': '500', 'kafka.fetch.max.wait.ms': '100'}
    """
    from blockgz.kafka.security import java_settings

    kafka = {k[len("kafka.") :]: v for k, v in options.items() if k.startswith("kafka.")}
    if "fetch.wait.max.ms" in kafka:  # librdkafka's name (the export's other clients')
        kafka.setdefault("fetch.max.wait.ms", kafka.pop("fetch.wait.max.ms"))
    others = {k: v for k, v in options.items() if not k.startswith("kafka.")}
    java = {f"kafka.{k}": str(v) for k, v in java_settings(kafka).items()}
    return {**others, **java, **{k: v for k, v in READ_DEFAULTS.items() if k not in java}}


#: Java consumer settings for reading a micro-batch's known offset ranges, where the job set
#: none:
#:
#: * ``fetch.max.wait.ms=20``: a consumer that reaches the end of a partition's log has its
#:   next fetch held by the broker for ``fetch.max.wait.ms`` (500 ms by default) waiting for
#:   data, and Spark's consumer waited for it in each task of a backlog's last batch
#:   (measured: 1M records in 4 batches of 4 tasks, the last batch 2.0-2.5 s against 1.1-1.7 s
#:   for the others; 1.3-1.5 s at 20 ms). A task ends at its range's last offset, so a short
#:   wait costs nothing there.
#: * ``max.poll.records=20000``: Spark's consumer asks the partition's earliest and latest
#:   offsets (two ListOffsets round trips: ``seekToBeginning``/``seekToEnd`` and ``position``)
#:   after *every* poll, and a poll returned at most 500 records: 4,000 ListOffsets requests
#:   per million records. A poll still returns only what the consumer has fetched (at most
#:   ``max.partition.fetch.bytes`` per partition, 1 MiB by default), so memory stays bounded
#:   by bytes; measured (``make bench-export``, 1M records of ~250 bytes): the broker's CPU
#:   per record 1.0 → 0.5 µs, the whole path's 8.1 → 7.0 µs.
READ_DEFAULTS = {"kafka.fetch.max.wait.ms": "20", "kafka.max.poll.records": "20000"}


def with_jars(spark_conf: Mapping[str, str], jars: Sequence[Path]) -> dict[str, str]:
    """``spark_conf`` with ``jars`` appended to its ``spark.jars``."""
    conf = dict(spark_conf)
    if jars:
        given = [j for j in conf.get("spark.jars", "").split(",") if j.strip()]
        conf["spark.jars"] = ",".join([*given, *(str(j) for j in jars)])
    return conf
