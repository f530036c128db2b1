"""The export job's own options: neither the Kafka source's nor the sink's, declared once.

>>> JOB_OPTIONS.read({"blockgz.lease.ttl.ms": "5000"}, "blockgz.lease.ttl.ms")
5000
>>> "topics" in JOB_OPTIONS, JOB_OPTIONS["blockgz.preflight"].default
(True, True)
"""

from __future__ import annotations

import re

from blockgz.commits.writer_lease import DEFAULT_TTL_MS
from blockgz.errors import ConfigError
from blockgz.option_defs import OptionSet, declarer
from blockgz.times import parse_duration

DEFAULT_TRIGGER = "5 seconds"
#: ``blockgz.resume``'s values: where a fresh checkpoint starts.
RESUME_CHOICES = ("archive", "checkpoint-only")
#: ``blockgz.log.format``'s values (:mod:`blockgz.sink.jobconfig.events`).
LOG_FORMATS = ("text", "json")
#: ``blockgz.kafka.source``'s values: which source reads Kafka
#: (:func:`blockgz.sink.export.query.kafka_source`).
KAFKA_SOURCES = ("auto", "blockgz", "spark")


_job = declarer("job", "blockgz")

#: The export job's own options (neither the source's nor the sink's).
JOB_OPTIONS = OptionSet(
    _job(
        "topics", "text", "", "the Kafka topics, a comma list (or `topics.regex`)", origin="connect"
    ),
    _job("topics.regex", "text", "", "a regex of the Kafka topics", origin="connect"),
    _job("spark.", "text", "", "the SparkSession's settings", origin="spark", prefix=True),
    _job(
        "blockgz.trigger.interval",
        "text",
        DEFAULT_TRIGGER,
        "how often a running job starts a micro-batch",
    ),
    _job(
        "blockgz.checkpoint.dir",
        "text",
        "",
        "instead of `--checkpoint`",
        shown="`checkpoints/<name>`",
    ),
    _job(
        "blockgz.kafka.source",
        "choice",
        "auto",
        "which source reads Kafka: `auto` is Spark's own when its connector is on the "
        "classpath and blockgz's otherwise; `blockgz` is blockgz's always (it holds each "
        "partition's partial file; see [With Spark's Kafka source](#with-sparks-kafka-source)); "
        "`spark` is Spark's, an error without its connector. A checkpoint keeps the source it "
        "was started with",
        allowed=KAFKA_SOURCES,
    ),
    _job(
        "blockgz.tasks.read.kafka",
        "flag",
        True,
        "with the blockgz-kafka source, the sink's tasks read their Kafka offset ranges "
        "themselves, so records skip the JVM; `false` hands Spark the records (see below)",
    ),
    _job(
        "blockgz.resume",
        "choice",
        "archive",
        "where a **fresh** checkpoint starts: `archive` resumes each partition from what the "
        "job's manifests committed (partitions they do not name start at `startingOffsets`), "
        "as a Connect sink resumes from its consumer offsets; `checkpoint-only` ignores the "
        "archive and starts at `startingOffsets`. An existing checkpoint always resumes from "
        "itself. See [One writer per archive](#one-writer-per-archive)",
        allowed=RESUME_CHOICES,
    ),
    _job(
        "blockgz.log.format",
        "choice",
        "text",
        "the job's log file: `text` lines, or `json` lines with an `event` (start, batch, "
        "partition, lease, failure) for a log shipper",
        allowed=LOG_FORMATS,
    ),
    _job(
        "blockgz.metrics.port",
        "int",
        -1,
        "serve Prometheus metrics from the driver at `http://<host>:<port>/metrics`: `-1` "
        "(the default) serves none, `0` a port the OS picks (logged). Off unless asked: a "
        "port opened on every driver unasked is a surprise, and a listener to secure; one "
        "option turns it on (see [Metrics](#metrics))",
        low=-1,
        high=65535,
    ),
    _job(
        "blockgz.metrics.host",
        "text",
        "127.0.0.1",
        "the address the metrics endpoint listens on (`0.0.0.0`: every interface, for a "
        "Prometheus on another host)",
    ),
    _job(
        "blockgz.snapshot.interval",
        "text",
        "1m",
        "how often (at most; after a batch commits) the export writes a snapshot of the source "
        "cluster for a restore: the archived topics' partition counts and configs, and the "
        "consumer groups' committed offsets on them; `off` for never",
    ),
    _job(
        "blockgz.snapshot.groups",
        "text",
        ".*",
        "a regex of the consumer groups whose offsets each snapshot keeps (the default: every "
        "group with offsets on an archived topic)",
    ),
    _job(
        "blockgz.lease.ttl.ms",
        "int",
        DEFAULT_TTL_MS,
        "how long the job's lease outlives its last renewal (renewed every third of it, and "
        "before each batch manifest); at least `1000`",
        low=1000,
        also=("sink",),
    ),
    _job(
        "blockgz.lease.takeover",
        "flag",
        False,
        "take the job's lease even from a live export (which then stops before its next commit)",
    ),
    _job(
        "blockgz.share.topics",
        "flag",
        False,
        "start even though another job archives the same topics under the same `topics.dir` "
        "and key layout (each record is then archived twice)",
    ),
    _job("blockgz.preflight", "flag", True, "the checks before Spark starts (below)"),
    _job(
        "blockgz.executor.env.forward",
        "flag",
        True,
        "executors get the driver's `AWS_*` variables (see "
        "[On a Spark cluster](#on-a-spark-cluster))",
    ),
    _job(
        "blockgz.spark.kafka.jars",
        "text",
        "none",
        "put Spark's Kafka connector on the job's `spark.jars`, so it reads with Spark's own "
        "source: `auto` (the connector of pyspark's version, from Maven Central), a version "
        "(`4.2.0`), or a comma list of jar files and folders; `none` adds nothing (see below)",
    ),
)


#: ``blockgz.snapshot.interval`` values that turn snapshots off.
OFF = ("off", "none", "false")


def parse_interval(text: str) -> float | None:
    """``blockgz.snapshot.interval`` as seconds (``None``: off).

    >>> parse_interval("1m"), parse_interval("off"), parse_interval("0")
    (60.0, None, 0.0)
    """
    if text.strip().lower() in OFF:
        return None
    return parse_duration(text, name="blockgz.snapshot.interval")


def parse_groups(text: str) -> re.Pattern[str]:
    """``blockgz.snapshot.groups``: a regex the whole group id must match.

    >>> bool(parse_groups("orders-.*").fullmatch("orders-billing"))
    True
    """
    try:
        return re.compile(text)
    except re.error as exc:
        raise ConfigError(f"blockgz.snapshot.groups={text!r}: not a regex ({exc})") from exc
