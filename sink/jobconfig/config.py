"""The export job's config file: a Kafka Connect ``.properties`` or JSON config, split in three.

A user brings the config of their Confluent S3 sink connector. ``topics``/``topics.regex`` and
``kafka.*`` settings go to the Kafka source (as Spark's Kafka source names them), Spark's
source options (``startingOffsets``, ``maxOffsetsPerTrigger``, ...) may sit in the same file,
``spark.*`` keys configure the SparkSession, and everything else is the sink's.

>>> job = ExportSettings.from_mapping({
...     "name": "s3-sink", "topics": "s3_topic", "kafka.bootstrap.servers": "127.0.0.1:9092",
...     "s3.bucket.name": "quickstart", "flush.size": "3",
...     "format.class": "io.confluent.connect.s3.format.json.JsonFormat"})
>>> job.source_options["subscribe"], job.source_options["kafka.bootstrap.servers"]
('s3_topic', '127.0.0.1:9092')
>>> job.sink.flush_size, job.name
(3, 's3-sink')
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from blockgz.commits.writer_lease import DEFAULT_TTL_MS
from blockgz.errors import ConfigError
from blockgz.kafka.security import lift_connect_settings
from blockgz.options import Options
from blockgz.sink.iceberg.settings import pin_catalog
from blockgz.sink.jobconfig.job_options import (
    DEFAULT_TRIGGER,
    JOB_OPTIONS,
    parse_groups,
    parse_interval,
)
from blockgz.sink.jobconfig.settings_names import (
    check_keys,
    describe_ignored,
    job_options,
    source_options,
)
from blockgz.sink.kafka.options import SourceSettings, parse_options
from blockgz.sink.spark_kafka import parse as parse_spark_kafka_jars
from blockgz.sink.transforms.chain import reads_headers
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.options import SINK_OPTIONS

log = logging.getLogger("blockgz.export")


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text: ``=``/``:``/space separators, ``#``/``!`` comments,
    backslash line continuations and escapes.

    Hand-written because the format is small and stable and no stdlib module reads it.

    >>> parse_properties("# c\\na=1\\nb : two \\\\\\n  three\\nc\\\\ d=\\\\u0041\\\\t")
    {'a': '1', 'b': 'two three', 'c d': 'A\\t'}
    """
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if _continues(line):
            logical += line[:-1]
            continue
        logical += line
        key, value = _split_property(logical)
        props[_unescape(key)] = _unescape(value)
        logical = ""
    if logical:
        key, value = _split_property(logical)
        props[_unescape(key)] = _unescape(value)
    return props


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t":
            key = line[:i]
            rest = line[i:].lstrip(" \t")
            if rest[:1] in ("=", ":") and ch in " \t":
                rest = rest[1:].lstrip(" \t")
            elif ch in "=:":
                rest = line[i + 1 :].lstrip(" \t")
            return key, rest
        i += 1
    return line, ""


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = []
    i = 0
    simple = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "u" and i + 6 <= len(text):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(simple.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def load_config_file(path: str | Path) -> dict[str, str]:
    """Read a ``.properties`` file or a Connect JSON config (``{"name":…, "config":{…}}``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such config file") from exc
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{path}: not valid JSON ({exc})") from exc
        if not isinstance(doc, dict):
            raise ConfigError(f"{path}: a Connect JSON config is an object")
        config = doc.get("config", doc)
        if not isinstance(config, dict):
            raise ConfigError(f"{path}: 'config' must be an object of settings")
        options = {str(k): _json_value(v) for k, v in config.items()}
        if "name" in doc and "name" not in options:
            options["name"] = str(doc["name"])
        return options
    return parse_properties(text)


def _json_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class ExportSettings:
    """The validated job: source options, sink config, Spark settings and the trigger."""

    name: str
    #: The Kafka source's options as Spark gets them (strings, Spark's names).
    source_options: dict[str, str]
    #: The same, validated and typed (``startingOffsets=s3`` reads as ``earliest`` here; the
    #: job resolves it from the manifests, see :attr:`resume_from_manifests`).
    source: SourceSettings
    sink: SinkSettings
    #: The sink's options as Spark gets them (the data source builds its own SinkSettings).
    sink_options: dict[str, str] = field(default_factory=dict)
    spark_conf: dict[str, str] = field(default_factory=dict)
    trigger_interval: str = DEFAULT_TRIGGER
    checkpoint_dir: str | None = None
    #: With the blockgz-kafka source (the default; ``false`` opts out): sink tasks read their
    #: offset ranges from Kafka themselves (records skip the JVM; Spark's own metrics then
    #: count ranges, not records; blockgz's count records from the manifests).
    tasks_read_kafka: bool = True
    #: ``blockgz.resume``: ``archive`` (the default, and what ``startingOffsets=s3`` asks
    #: for): a fresh checkpoint resumes from what the manifests committed, as a Connect sink
    #: from its consumer group's offsets; ``checkpoint-only``: it starts at ``startingOffsets``.
    resume: str = "archive"
    #: ``blockgz.lease.ttl.ms``: how long the job's lease outlives its last renewal.
    lease_ttl_ms: int = DEFAULT_TTL_MS
    #: ``blockgz.lease.takeover``: take the lease even from a live holder.
    lease_takeover: bool = False
    #: ``blockgz.share.topics``: archive topics another job already archives in this layout.
    share_topics: bool = False
    #: ``blockgz.preflight``: check the bucket, brokers and topics before Spark starts.
    preflight: bool = True
    #: ``blockgz.executor.env.forward``: executors get the driver's AWS_* variables
    #: (:mod:`blockgz.sink.executor_env`); false leaves them to the nodes' own profile or role.
    forward_env: bool = True
    #: ``blockgz.kafka.source``: which source reads Kafka (``auto``, ``blockgz``, ``spark``;
    #: :func:`blockgz.sink.export.query.kafka_source`).
    kafka_source: str = "auto"
    #: ``blockgz.spark.kafka.jars``: where Spark's Kafka connector comes from
    #: (:mod:`blockgz.sink.spark_kafka`); ``none`` adds no jar.
    spark_kafka_jars: str = "none"
    #: ``blockgz.log.format``: the job's log file as ``text`` or ``json`` lines
    #: (:mod:`blockgz.sink.jobconfig.events`).
    log_format: str = "text"
    #: ``blockgz.metrics.port``: the driver's Prometheus endpoint
    #: (:mod:`blockgz.sink.export.metrics`); ``-1``: none, ``0``: a port the OS picks.
    metrics_port: int = -1
    #: ``blockgz.metrics.host``: the address that endpoint listens on.
    metrics_host: str = "127.0.0.1"
    #: ``blockgz.snapshot.interval`` in seconds (:mod:`blockgz.sink.export.snapshots`);
    #: ``None``: no snapshots.
    snapshot_interval_s: float | None = 60.0
    #: ``blockgz.snapshot.groups``: the consumer groups each snapshot keeps (a regex).
    snapshot_groups: str = ".*"

    @classmethod
    def from_mapping(cls, options: Mapping[str, str]) -> ExportSettings:
        """Split and validate; raises :class:`ConfigError` naming the key and allowed values."""
        # A pasted Connect config's security settings (a worker's sasl.jaas.config,
        # consumer.override.*) are the source's kafka.* ones.
        opts = Options(lift_connect_settings(options))
        unknown = check_keys(opts)  # a likely typo is an error, before anything else
        source, sink, spark = split_options(opts)
        sink = pin_catalog(sink)  # the sink's commit runs in a worker with another cwd
        sink_config = SinkSettings.from_options(sink)
        asked_s3 = source.get("startingOffsets", "").lower() == "s3"
        read = JOB_OPTIONS.read
        resume = read(opts, "blockgz.resume")
        if asked_s3 and resume != "archive":
            raise ConfigError(
                "startingOffsets=s3 resumes from the archive; it contradicts "
                "blockgz.resume=checkpoint-only"
            )
        # The same checks Spark would run only once the query starts; s3 means the archive's
        # offsets, and earliest for partitions it has not seen.
        typed_source = parse_options(
            {**source, "startingOffsets": "earliest"} if asked_s3 else source
        )
        if unknown:
            log.warning("ignoring settings blockgz does not read: %s", describe_ignored(unknown))
        return cls(
            name=sink_config.name,
            source_options=source,
            source=typed_source,
            sink=sink_config,
            sink_options=sink,
            spark_conf=spark,
            trigger_interval=read(opts, "blockgz.trigger.interval"),
            checkpoint_dir=read(opts, "blockgz.checkpoint.dir") or None,
            tasks_read_kafka=read(opts, "blockgz.tasks.read.kafka"),
            resume=resume,
            lease_ttl_ms=read(opts, "blockgz.lease.ttl.ms"),
            lease_takeover=read(opts, "blockgz.lease.takeover"),
            share_topics=read(opts, "blockgz.share.topics"),
            preflight=read(opts, "blockgz.preflight"),
            forward_env=read(opts, "blockgz.executor.env.forward"),
            kafka_source=read(opts, "blockgz.kafka.source"),
            spark_kafka_jars=parse_spark_kafka_jars(read(opts, "blockgz.spark.kafka.jars")),
            log_format=read(opts, "blockgz.log.format"),
            metrics_port=read(opts, "blockgz.metrics.port"),
            metrics_host=read(opts, "blockgz.metrics.host"),
            snapshot_interval_s=parse_interval(read(opts, "blockgz.snapshot.interval")),
            snapshot_groups=parse_groups(read(opts, "blockgz.snapshot.groups")).pattern,
        )

    @classmethod
    def from_file(
        cls, path: str | Path, overrides: Mapping[str, str] | None = None
    ) -> ExportSettings:
        """Load a config file, apply ``overrides`` (``-O key=value``), validate."""
        options = load_config_file(path)
        options.update(overrides or {})
        return cls.from_mapping(options)

    @property
    def resume_from_manifests(self) -> bool:
        """Whether a fresh checkpoint resumes from what the archive's manifests committed."""
        return self.resume == "archive"

    @property
    def topics(self) -> list[str]:
        """Topics named explicitly (empty for a regex subscription)."""
        if self.source.strategy == "subscribe":
            return list(self.source.topics)
        return sorted({topic for topic, _ in self.source.assigned})


def split_options(opts: Options) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """The job's options split into (Kafka source, sink, Spark) settings.

    ``topics``/``topics.regex`` become Spark's ``subscribe``/``subscribePattern``,
    ``startingOffsets`` defaults to ``earliest``, ``kafka.isolation.level`` to
    ``read_committed``, and ``includeHeaders`` to ``true`` wherever
    headers are kept (``format.json.envelope``, ``store.kafka.headers``) or dead-lettered.
    """
    source: dict[str, str] = {}
    sink: dict[str, str] = {}
    spark: dict[str, str] = {}
    dead_letter_topic = bool(opts.text("errors.deadletterqueue.topic.name"))
    to_source, to_job = source_options(), job_options()
    for key, value in opts.items():
        if key.startswith("kafka.") or key in to_source:
            source[key] = value
            if dead_letter_topic and key.startswith("kafka."):
                sink[key] = value  # the sink's dead-letter producer talks to the same brokers
        elif key.startswith("spark."):
            spark[key] = value
        elif key not in to_job:
            sink[key] = value
    chosen = [k for k in _TOPIC_KEYS if opts.given(k)]
    if len(chosen) != 1:
        raise ConfigError(
            "name the Kafka topics with exactly one of: topics (a comma list), "
            "topics.regex, or Spark's subscribe/subscribePattern/assign; "
            f"got {chosen or 'none'}"
        )
    if opts.given("topics"):
        source["subscribe"] = ",".join(t.strip() for t in opts["topics"].split(",") if t.strip())
    if opts.given("topics.regex"):
        source["subscribePattern"] = opts["topics.regex"]
    # Kafka Connect sinks start a new consumer group at the earliest offset; Spark's
    # source defaults to latest. An archiver wants everything, so Connect's default wins.
    source.setdefault("startingOffsets", "earliest")
    # Spark's and Connect's consumers read uncommitted; an archive is what a restore sends
    # back, so it holds what the topic's readers see: records of aborted transactions are gaps.
    source.setdefault("kafka.isolation.level", "read_committed")
    if (
        opts.text("errors.tolerance").lower() == "all"
        or SINK_OPTIONS.read(opts, "store.kafka.headers")
        or SINK_OPTIONS.read(opts, "format.json.envelope")  # it keeps key, headers, timestamp
        or reads_headers(opts)  # a transform or predicate that reads or writes headers
    ):
        source.setdefault("includeHeaders", "true")  # headers are archived or dead-lettered
    if not source.get("kafka.bootstrap.servers"):
        raise ConfigError("kafka.bootstrap.servers is required (host:port of the Kafka brokers)")
    return source, sink, spark


_TOPIC_KEYS = ("topics", "topics.regex", "subscribe", "subscribePattern", "assign")
