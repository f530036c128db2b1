"""The export's streaming query, built and started: ``readStream`` from Kafka (Spark's source or
blockgz-kafka, with held files and the topic-id checks) → ``writeStream.format("blockgz")`` with
the sink's options (the epoch, the lease, credentials, ranges read by the tasks themselves).
:mod:`blockgz.sink.export.job` runs it, follows it and stops it.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path

from blockgz.commits.writer_lease import Lease
from blockgz.errors import ConfigError
from blockgz.sink.executor_env import credentials_option
from blockgz.sink.export.topic_checks import commit_check_options
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.sink.jobconfig.events import event
from blockgz.sink.kafka.options import SOURCE_NAME
from blockgz.sink.write.options import (
    INPUT_PREFIX,
    INPUT_READER,
    INPUT_TOPIC,
    LEASE_TOKEN,
    LEASE_TTL,
)

log = logging.getLogger("blockgz.export")

#: The sink's input reader when its tasks read their Kafka ranges themselves.
RANGE_READER = "blockgz.sink.kafka.ranges:read_range_rows"
#: The two sources' ``readStream.format`` names.
SPARK_SOURCE, BLOCKGZ_SOURCE = "kafka", SOURCE_NAME
#: The ``blockgz.kafka.source`` value that picks each source (:func:`kafka_source`).
CHOICE_OF = {SPARK_SOURCE: "spark", BLOCKGZ_SOURCE: "blockgz"}


def rows_read(job: ExportSettings) -> tuple[tuple[str, ...] | None, str | None]:
    """The Kafka columns the query hands the sink (``None``: all), and the topic the sink
    puts back when they leave ``topic`` out: a job of one named topic, whose every row is that
    topic's, so Spark does not copy its name into every row.

    >>> job = ExportSettings.from_mapping({"name": "j", "topics": "orders", "path": "/tmp/x",
    ...                                    "kafka.bootstrap.servers": "localhost:9092"})
    >>> rows_read(job)
    (('value', 'partition', 'offset', 'timestamp', 'timestampType'), 'orders')
    """
    columns = job.sink.columns_read()
    topics = job.topics
    if columns is None or len(topics) != 1:
        return columns, None
    return tuple(c for c in columns if c != "topic"), topics[0]


def start_query(
    spark,
    job: ExportSettings,
    source_options: Mapping[str, str],
    *,
    checkpoint: Path,
    epoch: str,
    once: bool,
    lease: Lease | None = None,
    where: str = "",
    topic_ids: Mapping[str, str] | None = None,
):
    """Build ``readStream → writeStream.format("blockgz")`` and start it; log, in one line,
    which source reads Kafka and from ``where``
    (:func:`~blockgz.sink.export.start.starting_offsets`). With ``topic_ids`` (those
    :func:`~blockgz.sink.export.topic_checks.check_topics` found), the sink checks before
    each manifest that every topic is still that life and records the ids."""
    from blockgz.sink.export.checkpoint import checkpoint_source
    from blockgz.sink.session import has_spark_kafka, warm_planner

    source = kafka_source(job.kafka_source, connector=has_spark_kafka(spark))
    warm_planner(spark)  # beside the source's start, not in the first batch's planning
    checkpoint_source(checkpoint, source, choice_of=CHOICE_OF)
    log.info(
        "reading Kafka with the %s source%s",
        "Spark Kafka" if source == SPARK_SOURCE else "blockgz",
        f", {where}" if where else "",
        extra=event("start", source=source, resume=where or "the checkpoint", name=job.name),
    )
    tasks_read_kafka = source == BLOCKGZ_SOURCE and job.tasks_read_kafka
    if source == SPARK_SOURCE:  # the Java client's setting names
        from blockgz.sink.spark_kafka import source_options as java_source_options

        source_options = {**source_options, **spark_holding(job, source_options, once=once)}
        source_options = java_source_options(source_options)
    if source == BLOCKGZ_SOURCE and topic_ids:  # it checks them before planning each batch
        from blockgz.sink.kafka.options import TOPIC_IDS

        source_options = {**source_options, TOPIC_IDS: json.dumps(dict(topic_ids))}
    if source == BLOCKGZ_SOURCE:  # it holds partial files back by the sink's rotation
        from blockgz.sink.kafka.holding import HOLD_RULES, rules_of

        source_options = {**source_options, HOLD_RULES: rules_of(job.sink).to_json()}
    reader = spark.readStream.format(source).options(**source_options)
    sink_options = sink_query_options(job, epoch)
    if job.forward_env:  # the driver's AWS credentials, for the tasks (never in Spark's conf)
        sink_options.update(credentials_option(os.environ, job.spark_conf))
    if lease is not None:  # the driver's commit renews it before each manifest
        sink_options.update({LEASE_TOKEN: lease.token, LEASE_TTL: str(job.lease_ttl_ms)})
    if topic_ids is not None:  # a topic's two lives never mix (blockgz.sink.kafka.lives)
        sink_options.update(commit_check_options(job.source.client_config(), topic_ids))
    if tasks_read_kafka:
        # Spark plans and replays offset ranges; each sink task reads its range itself.
        reader = reader.option("blockgz.emit", "ranges")
        sink_options.update(range_reading_options(source_options))
    frame = reader.load()
    columns, one_topic = (None, None) if tasks_read_kafka else rows_read(job)
    if one_topic is not None:  # the tasks put it back (blockgz.sink.write.task.with_topic)
        sink_options[INPUT_TOPIC] = one_topic
    if columns is not None:
        frame = frame.select(*columns)
    writer = (
        frame.writeStream.format("blockgz")
        .options(**sink_options)
        .option("checkpointLocation", str(checkpoint))
        .queryName(_query_name(job.name))
    )
    if once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=job.trigger_interval)
    return writer.start()


def kafka_source(choice: str, *, connector: bool) -> str:
    """The ``readStream.format`` that reads Kafka for ``blockgz.kafka.source`` ``choice``
    (``auto``, ``blockgz``, ``spark``), given whether Spark's Kafka ``connector`` is on the
    classpath.

    >>> kafka_source("auto", connector=True), kafka_source("blockgz", connector=True)
    ('kafka', 'blockgz-kafka')
    >>> kafka_source("spark", connector=False)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    blockgz.errors.ConfigError: blockgz.kafka.source=spark, but Spark's Kafka connector is not...
    """
    if choice == CHOICE_OF[BLOCKGZ_SOURCE] or (choice == "auto" and not connector):
        return BLOCKGZ_SOURCE
    if choice == "auto" or connector:
        return SPARK_SOURCE
    raise ConfigError(
        "blockgz.kafka.source=spark, but Spark's Kafka connector is not on the classpath: set "
        "blockgz.spark.kafka.jars (auto, a version such as 4.2.0, or jar files), add it with "
        "spark-submit --packages, or use blockgz.kafka.source=auto or blockgz"
    )


def spark_holding(
    job: ExportSettings, source_options: Mapping[str, str], *, once: bool
) -> dict[str, str]:
    """With held partial files (``blockgz.hold.partial.files``) in a running export reading
    Spark's Kafka source: its ``minOffsetsPerTrigger``/``maxTriggerDelay`` from the sink's
    rotation, those the job did not set
    (:func:`~blockgz.sink.kafka.holding.spark_trigger_options`). Spark waits by the total over
    all partitions, so a batch's files still end partial; logged once."""
    from blockgz.sink.export.start import kafka_partitions
    from blockgz.sink.kafka.holding import holding, rules_of, spark_trigger_options

    rules = rules_of(job.sink)
    if once or not holding(job.source.hold_mode, rules, once=False):
        return {}  # a --once run's batches must not wait (Spark may delay them too)
    if job.source.strategy == "assign":
        count = len(job.source.assigned)
    else:
        count = len(kafka_partitions(job))
    found = spark_trigger_options(rules, count, source_options, _trigger_ms(job))
    log.info(
        "Spark's Kafka source cannot hold a partition's partial file; a batch waits for %s "
        "(over %d partitions) instead, so each batch still closes its files",
        " or ".join(f"{k}={v}" for k, v in found.items()) or "the job's own trigger limits",
        count,
    )
    return found


def _trigger_ms(job: ExportSettings) -> int:
    """``blockgz.trigger.interval`` in ms (0 where it is not a plain duration)."""
    from blockgz.times import parse_duration

    try:
        return int(parse_duration(job.trigger_interval) * 1000)
    except ConfigError:
        return 0


def sink_query_options(job: ExportSettings, epoch: str) -> dict[str, str]:
    """The sink's options as the query passes them: the job's, plus this checkpoint's epoch."""
    return {**job.sink_options, "blockgz.epoch": epoch}


def range_reading_options(source_options: Mapping[str, str]) -> dict[str, str]:
    """The sink options that make its tasks read their offset ranges from Kafka: the input
    reader, and the source options it needs under ``blockgz.source.*``.

    >>> range_reading_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t",
    ...                        "startingOffsets": "earliest", "maxOffsetsPerTrigger": "9"})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'blockgz.input.reader': 'blockgz.sink.kafka.ranges:read_range_rows',
     'blockgz.source.kafka.bootstrap.servers': 'b:9092', 'blockgz.source.subscribe': 't'}
    """
    planning = {"startingoffsets", "maxoffsetspertrigger", "blockgz.emit"}
    options = {INPUT_READER: RANGE_READER}
    for key, value in source_options.items():
        if key.lower() not in planning:
            options[INPUT_PREFIX + key] = value
    return options


def _query_name(name: str) -> str:
    return "blockgz_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
