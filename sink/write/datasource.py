"""The ``blockgz`` Spark data source: write Kafka-shaped DataFrames in Confluent's S3 layout.

Streaming (``writeStream.format("blockgz")``) and batch (``write.format("blockgz")``). Options
are Confluent's S3-sink names (see :mod:`blockgz.sink.write.config`). Each task writes the
topic-partitions it is given (:mod:`blockgz.sink.write.task`) and returns the files it made; the
driver's ``commit`` writes the batch manifest (then, with ``blockgz.iceberg.table``, adds the
batch's Parquet files to the Iceberg table: :mod:`blockgz.sink.iceberg`); ``abort`` deletes
what a failed batch wrote.

Example (needs Spark, so not a doctest)::

    (spark.readStream.format("blockgz-kafka")
        .option("kafka.bootstrap.servers", "127.0.0.1:9092").option("subscribe", "s3_topic")
        .load()
        .writeStream.format("blockgz")
        .option("s3.bucket.name", "quickstart").option("flush.size", "3")
        .option("checkpointLocation", "/tmp/ckpt")
        .start())
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
)

from blockgz.commits.writer_lease import DEFAULT_TTL_MS
from blockgz.errors import BlockGzError, ConfigError
from blockgz.sink.executor_env import CREDENTIALS_OPTION, apply_credentials
from blockgz.sink.iceberg.settings import IcebergSettings
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.options import (
    COMMIT_CHECK,
    COMMIT_CHECK_PREFIX,
    INPUT_READER,
    INPUT_TOPIC,
    LEASE_TOKEN,
    LEASE_TTL,
)

if TYPE_CHECKING:
    from blockgz.sink.iceberg.table import ArchiveTable
    from blockgz.sink.write.commit import TaskCommitMessage

# Spark builds the writer in a Python process of its own when a query plans its first batch
# (and for every batch job): this module imports only what validating the options needs, so
# that process starts fast. What writes (executors) and what commits (the driver) is imported
# where it runs.

log = logging.getLogger("blockgz.sink")

REQUIRED_COLUMNS = ("value", "topic", "partition", "offset")


def _check_schema(schema, config: SinkSettings, *, topic_given: bool = False) -> None:
    """Refuse rows without Kafka's columns; ``topic_given``: the export named the one topic
    (:data:`~blockgz.sink.write.options.INPUT_TOPIC`), so rows need no ``topic``."""
    if config.input_reader:
        return  # the input reader turns whatever the rows are into Kafka records
    names = set(schema.fieldNames()) | ({"topic"} if topic_given else set())
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise ConfigError(
            f"the blockgz sink needs Kafka's columns; missing: {', '.join(missing)} "
            "(expected key, value, topic, partition, offset, timestamp, timestampType, "
            f"and optionally headers), or an {INPUT_READER} that turns these rows into them"
        )


class _Writer:
    def __init__(self, options: Mapping[str, str], schema):
        self.config = SinkSettings.from_options(options)
        # Set by ``blockgz export``: the driver's AWS credentials, set in each task's worker.
        self.credentials = {CREDENTIALS_OPTION: str(options.get(CREDENTIALS_OPTION, "") or "")}
        self.iceberg_settings = IcebergSettings.from_options(options)
        # Set by ``blockgz export`` for a job of one named topic: the rows' topic.
        self.input_topic = str(options.get(INPUT_TOPIC, "") or "")
        _check_schema(schema, self.config, topic_given=bool(self.input_topic))
        # Set by ``blockgz export``: the lease this job holds, checked before each manifest.
        self.lease_token = str(options.get(LEASE_TOKEN, "") or "")
        self.lease_ttl_ms = int(options.get(LEASE_TTL, DEFAULT_TTL_MS) or DEFAULT_TTL_MS)
        # Set by ``blockgz export``: a check before each manifest (a topic's two lives).
        self.commit_check = str(options.get(COMMIT_CHECK, "") or "")
        self.commit_check_options = {
            str(k)[len(COMMIT_CHECK_PREFIX) :]: str(v)
            for k, v in options.items()
            if str(k).lower().startswith(COMMIT_CHECK_PREFIX)
        }

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_listener", None)  # the driver's; tasks load their own
        state.pop("_iceberg", None)  # the driver's alone
        return state

    @property
    def iceberg(self) -> ArchiveTable | None:
        """The Iceberg table each batch's files join (``blockgz.iceberg.table``), or ``None``."""
        if not hasattr(self, "_iceberg"):
            from blockgz.sink.iceberg.table import ArchiveTable

            settings = self.iceberg_settings
            self._iceberg = None if settings is None else ArchiveTable.of(settings, self.config)
        return self._iceberg

    def _driver_listener(self):
        """The listener told about commits, loaded once on the driver."""
        if not hasattr(self, "_listener"):
            from blockgz.sink.write.hooks import load_listener

            self._listener = load_listener(self.config.listener, self.config.listener_options)
        return self._listener

    def write(self, iterator: Iterator[Any]) -> TaskCommitMessage:
        from blockgz.runtime.gc_control import settle as settle_heap
        from blockgz.sink.write.task import with_topic, write_task

        # collections skip the worker's long-lived objects (blockgz.runtime.gc_control)
        settle_heap()
        apply_credentials(getattr(self, "credentials", {}))
        if self.input_topic:
            iterator = with_topic(iterator, self.input_topic)
        return write_task(self.config, iterator)

    def _commit(self, messages: list[TaskCommitMessage | None], batch_id: int | str) -> None:
        from blockgz.commits.catalog import compact_every
        from blockgz.commits.writer_lease import Lease, lease_key
        from blockgz.sink.iceberg.table import commit_to_table
        from blockgz.sink.write.commit import write_manifest

        manifests = self.config.manifest_log()
        if self.lease_token:  # still the one writer? (raises LeaseLostError if not)
            key = lease_key(self.config.layout, manifests.prefix, self.config.name)
            Lease.for_token(
                manifests.store, key, self.lease_token, ttl_ms=self.lease_ttl_ms
            ).renew()
        topic_ids = self._check_commit(manifests, batch_id, messages)
        key = write_manifest(manifests, batch_id, messages, topic_ids=topic_ids)
        files = sum(len(m.files) for m in messages if m is not None)
        log.info("batch %s committed: %d files, manifest %s", batch_id, files, key)
        compact_every(manifests, batch_id, self.config.catalog_every)
        listener = self._driver_listener()
        if listener is not None:
            listener.batch_committed(batch_id, key)
        if self.iceberg is not None:  # after the S3 commit: the table is a view of it
            commit_to_table(self.iceberg, key)

    def _check_commit(
        self, manifests, batch_id: int | str, messages: list[TaskCommitMessage | None]
    ) -> dict[str, str]:
        """Run :data:`COMMIT_CHECK` (it may refuse the batch: raises, and Spark aborts it);
        the topic ids it returns go into the manifest."""
        if not self.commit_check:
            return {}
        from blockgz.sink.plugins import import_named

        check = import_named(self.commit_check, COMMIT_CHECK, "module:function")
        done = [m for m in messages if m is not None]
        topics = {f.topic for m in done for f in m.files} | {
            t for m in done for t in m.next_offsets
        }
        return dict(check(self.commit_check_options, manifests, batch_id, sorted(topics)))

    def _abort(self, messages: list[TaskCommitMessage | None], batch_id: int | str) -> None:
        from blockgz.commits.manifests import delete_written

        store, prefix = self.config.make_store()
        if self.lease_token and not self._holds_lease(store, prefix):
            # Another export took the job over and may have committed objects under the same
            # (deterministic) keys: deleting ours could delete its. Left for it to clean up.
            log.warning(
                "batch %s aborted after this export lost its lease: its objects are left "
                "(another export owns the archive now)",
                batch_id,
            )
            return
        removed = delete_written(store, (f for m in messages if m is not None for f in m.files))
        log.warning("batch %s aborted: removed %d objects written by its tasks", batch_id, removed)

    def _holds_lease(self, store, prefix: str) -> bool:
        from blockgz.commits.writer_lease import Holder, lease_key

        key = lease_key(self.config.layout, prefix, self.config.name)
        try:
            data, _ = store.get_versioned(key)
            return Holder.from_json(data).token == self.lease_token
        except BlockGzError:
            return False  # unreadable or gone: not provably ours, so delete nothing


class BlockGzStreamWriter(_Writer, DataSourceStreamArrowWriter):
    """Streaming writer: one manifest per micro-batch (batch id from the task's local property)."""

    def commit(self, messages, batchId: int) -> None:
        self._commit(messages, batchId)

    def abort(self, messages, batchId: int) -> None:
        self._abort(messages, batchId)


class BlockGzBatchWriter(_Writer, DataSourceArrowWriter):
    """Batch writer: the manifest is named after a hash of the files it lists."""

    def commit(self, messages) -> None:
        keys = sorted(f.key for m in messages if m is not None for f in m.files)
        digest = hashlib.sha1("\n".join(keys).encode()).hexdigest()[:16]
        self._commit(messages, f"batch-{digest}")

    def abort(self, messages) -> None:
        self._abort(messages, "batch")


class BlockGzDataSource(DataSource):
    """``format("blockgz")``: Kafka rows to objects laid out like Confluent's S3 sink."""

    @classmethod
    def name(cls) -> str:
        return "blockgz"

    def writer(self, schema, overwrite: bool) -> BlockGzBatchWriter:
        return BlockGzBatchWriter(self.options, schema)

    def streamWriter(self, schema, overwrite: bool) -> BlockGzStreamWriter:
        return BlockGzStreamWriter(self.options, schema)
