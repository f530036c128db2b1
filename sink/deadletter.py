"""Bad records under ``errors.tolerance=all``: the dead-letter queue, in Kafka or in the store.

With Kafka Connect's ``errors.tolerance=all``, a record that cannot be converted, partitioned
or encoded does not fail the batch: it goes to the dead-letter queue with its original key,
value and headers (plus Connect's ``__connect.errors.*`` context headers when
``errors.deadletterqueue.context.headers.enable=true``), and the good records of the batch are
written as usual. The batch manifest counts what went to the queue per topic-partition, so
every input offset is accounted for: in an object, or in the queue.

Two queues:

* **Kafka** (``errors.deadletterqueue.topic.name``): an idempotent producer on the job's
  brokers. Delivery is confirmed before the task reports success. A replay of a batch whose
  manifest exists sends nothing again; a replay of a batch that never committed (a crash
  between the send and the manifest) sends its records again, so the topic is at-least-once,
  and the context headers (topic, partition, offset) identify a repeat.
* **The object store** (``blockgz.deadletterqueue.store=true``): one JSON-lines object per
  task and topic-partition under ``_blockgz/<name>/deadletters/``, named as a data object of
  the first offset it holds would be (``file.delim``, ``filename.offset.zero.pad.width``:
  :meth:`~blockgz.archive.job_keys.JobKeys.deadletter_key`), so a replayed batch overwrites it
  with the same bytes: exactly once.

>>> import tempfile
>>> from blockgz.archive.layout import Layout
>>> from blockgz.store import LocalStore
>>> from blockgz.sink.records import KafkaRecord
>>> store = LocalStore(tempfile.mkdtemp())
>>> queue = StoreDeadLetters(store, Layout(), "", "job")
>>> queue.send(KafkaRecord("t", 0, 7, 1000, b"k", b"\\xff"), ValueError("not JSON"))
>>> queue.finish()
{'t': {0: 1}}
>>> [info.key for info in store.list("_blockgz/")]
['_blockgz/job/deadletters/t/0/t+0+0000000007.jsonl']
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from blockgz.archive.job_keys import JobKeys
from blockgz.archive.partition_offsets import Offsets
from blockgz.errors import BadRecordError, ConfigError, SourceError
from blockgz.kafka.security import librdkafka_settings, producer_settings
from blockgz.option_defs import OptionSet, declarer
from blockgz.options import Options, as_options
from blockgz.sink.records import KafkaRecord
from blockgz.store.base import ObjectStore

log = logging.getLogger("blockgz.sink")

TOLERANCES = ("none", "all")
STORE_OPTION = "blockgz.deadletterqueue.store"


_dlq = declarer("sink", "confluent")

DEAD_LETTER_OPTIONS = OptionSet(
    _dlq(
        "errors.tolerance",
        "choice",
        "none",
        "`all`: a record that cannot be converted, partitioned or encoded goes to the "
        "dead-letter queue instead of failing the batch; see "
        "[Bad records](#bad-records-and-the-dead-letter-queue)",
        allowed=TOLERANCES,
    ),
    _dlq("errors.deadletterqueue.topic.name", "text", "", "the dead-letter topic"),
    _dlq(
        "errors.deadletterqueue.topic.replication.factor",
        "int",
        3,
        "the dead-letter topic's replication factor when blockgz creates it",
        low=-1,
    ),
    _dlq(
        "errors.deadletterqueue.context.headers.enable",
        "flag",
        False,
        "add Connect's `__connect.errors.*` headers to dead letters",
    ),
    _dlq("errors.log.enable", "flag", False, "log each bad record's error", origin="connect"),
    _dlq(
        "errors.log.include.messages",
        "flag",
        False,
        "the logged errors include the record's topic, partition and offset",
        origin="connect",
    ),
    _dlq(
        "report.null.values.to.dlq",
        "flag",
        True,
        "a null value the sink refuses goes to the dead-letter queue",
    ),
    _dlq(
        STORE_OPTION,
        "flag",
        False,
        "dead letters go to the archive's store instead of a Kafka topic",
        origin="blockgz",
    ),
)
#: Connect's context headers (``errors.deadletterqueue.context.headers.enable``).
HEADER_PREFIX = "__connect.errors."


@dataclass(frozen=True)
class DeadLetterSettings:
    """``errors.tolerance`` and where bad records go (Kafka Connect's option names)."""

    tolerance: str = "none"
    topic: str = ""
    replication_factor: int = 3
    context_headers: bool = False
    log_errors: bool = False
    log_messages: bool = False
    report_nulls: bool = True
    to_store: bool = False
    producer: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> DeadLetterSettings:
        """Read and check the settings.

        >>> DeadLetterSettings.from_options({"errors.tolerance": "all"})
        Traceback (most recent call last):
        ...
        blockgz.errors.ConfigError: errors.tolerance=all needs somewhere to put bad records: \
errors.deadletterqueue.topic.name (a Kafka topic) or blockgz.deadletterqueue.store=true ...
        """
        opts: Options = as_options(options)
        read = DEAD_LETTER_OPTIONS.read
        settings = cls(
            tolerance=read(opts, "errors.tolerance"),
            topic=read(opts, "errors.deadletterqueue.topic.name"),
            replication_factor=read(opts, "errors.deadletterqueue.topic.replication.factor"),
            context_headers=read(opts, "errors.deadletterqueue.context.headers.enable"),
            log_errors=read(opts, "errors.log.enable"),
            log_messages=read(opts, "errors.log.include.messages"),
            report_nulls=read(opts, "report.null.values.to.dlq"),
            to_store=read(opts, STORE_OPTION),
            producer=librdkafka_settings(
                producer_settings(opts.prefixed("kafka."), opts.prefixed("producer.override."))
            ),
        )
        if settings.tolerance == "all" and not (settings.topic or settings.to_store):
            raise ConfigError(
                "errors.tolerance=all needs somewhere to put bad records: "
                f"errors.deadletterqueue.topic.name (a Kafka topic) or {STORE_OPTION}=true "
                "(JSON lines under the job's _blockgz/ prefix); blockgz never drops a record "
                "silently"
            )
        if settings.topic and settings.to_store:
            raise ConfigError(
                f"errors.deadletterqueue.topic.name and {STORE_OPTION}=true: choose one "
                "dead-letter queue"
            )
        if settings.topic and not settings.producer.get("bootstrap.servers"):
            raise ConfigError(
                "errors.deadletterqueue.topic.name needs kafka.bootstrap.servers (the job's "
                "brokers) to send bad records to"
            )
        return settings

    @property
    def enabled(self) -> bool:
        return self.tolerance == "all"


class DeadLetters:
    """A dead-letter queue of one task: :meth:`send` bad records, :meth:`finish` to deliver."""

    def __init__(self) -> None:
        self.counts: Offsets = {}

    def _count(self, record: KafkaRecord) -> None:
        parts = self.counts.setdefault(record.topic, {})
        parts[record.partition] = parts.get(record.partition, 0) + 1

    def send(self, record: KafkaRecord, error: BaseException, stage: str = "TASK_PUT") -> None:
        """Queue one bad record; ``stage`` is Connect's name of where it failed. This base
        queue only counts (a replay of a batch whose records were delivered already)."""
        self._count(record)

    def finish(self) -> Offsets:
        """Deliver everything sent (raising if anything could not be) and return the counts."""
        return self.counts

    def abort(self) -> None:
        """The task failed: undo what can be undone."""


def error_context(
    record: KafkaRecord, error: BaseException, stage: str, connector: str = ""
) -> dict[str, str]:
    """Connect's ``__connect.errors.*`` headers for a record and its error."""
    return {
        f"{HEADER_PREFIX}topic": record.topic,
        f"{HEADER_PREFIX}partition": str(record.partition),
        f"{HEADER_PREFIX}offset": str(record.offset),
        f"{HEADER_PREFIX}connector.name": connector,
        f"{HEADER_PREFIX}stage": stage,
        f"{HEADER_PREFIX}exception.class.name": type(error).__name__,
        f"{HEADER_PREFIX}exception.message": str(error),
    }


class KafkaDeadLetters(DeadLetters):
    """Bad records to a Kafka topic, with their key, value and headers (idempotent producer)."""

    def __init__(self, settings: DeadLetterSettings, connector: str = ""):
        super().__init__()
        from confluent_kafka import Producer

        self.settings = settings
        self.connector = connector
        self.failures: list[str] = []
        config = {
            **settings.producer,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
        }
        config.pop("group.id", None)
        self.producer = Producer(config)

    def send(self, record: KafkaRecord, error: BaseException, stage: str = "TASK_PUT") -> None:
        headers: list[tuple[str, str | bytes | None]] = list(record.headers or [])
        if self.settings.context_headers:
            context = error_context(record, error, stage, self.connector)
            headers += [(k, v.encode()) for k, v in context.items()]
        self.producer.produce(
            self.settings.topic,
            value=record.value,
            key=record.key,
            headers=headers or None,
            timestamp=record.timestamp_ms or 0,
            on_delivery=self._delivered,
        )
        self.producer.poll(0)
        self._count(record)

    def _delivered(self, error, message) -> None:
        if error is not None:
            self.failures.append(str(error))

    def finish(self) -> Offsets:
        left = self.producer.flush(60)
        if left or self.failures:
            reason = self.failures[0] if self.failures else f"{left} still queued after 60 s"
            raise SourceError(
                f"could not deliver {left + len(self.failures)} bad records to the dead-letter "
                f"topic {self.settings.topic!r}: {reason}"
            )
        return self.counts


class StoreDeadLetters(DeadLetters):
    """Bad records as JSON lines in the object store, one object per task and topic-partition."""

    def __init__(
        self, store: ObjectStore, layout: JobKeys, prefix: str, job: str, *, context: bool = True
    ):
        """The objects go under ``layout``'s dead-letter keys of job ``job`` below ``prefix``."""
        super().__init__()
        self.store = store
        self.layout = layout
        self.prefix = prefix
        self.job = job
        self.context = context
        self.pending: dict[tuple[str, int], list[bytes]] = {}
        self.firsts: dict[tuple[str, int], int] = {}
        self.written: list[str] = []

    def send(self, record: KafkaRecord, error: BaseException, stage: str = "TASK_PUT") -> None:
        doc: dict[str, Any] = {
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "timestamp": record.timestamp_ms,
            "key": _b64(record.key),
            "value": _b64(record.value),
            "headers": [[k, _b64(v)] for k, v in record.headers or []],
        }
        if self.context:
            doc["error"] = {"class": type(error).__name__, "message": str(error), "stage": stage}
        tp = (record.topic, record.partition)
        self.firsts.setdefault(tp, record.offset)
        self.pending.setdefault(tp, []).append(json.dumps(doc, sort_keys=True).encode())
        self._count(record)

    def finish(self) -> Offsets:
        for (topic, partition), lines in sorted(self.pending.items()):
            first = self.firsts[(topic, partition)]
            key = self.layout.deadletter_key(self.prefix, self.job, topic, partition, first)
            self.store.put(key, b"\n".join(lines) + b"\n")
            self.written.append(key)
        self.pending.clear()
        return self.counts

    def abort(self) -> None:
        for key in self.written:
            try:
                self.store.delete(key)
            except Exception:  # keep cleaning up; the task's error is what matters
                log.warning("could not delete %s after a failure", key, exc_info=True)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def log_bad_record(settings: DeadLetterSettings, record: KafkaRecord, error: BaseException) -> None:
    """``errors.log.enable``: one line per bad record (with the value when asked)."""
    if not settings.log_errors:
        return
    where = f"{record.topic}-{record.partition}@{record.offset}"
    message = str(error)
    if isinstance(error, BadRecordError) and message.startswith(where + ": "):
        message = message[len(where) + 2 :]
    if settings.log_messages:
        log.error("%s: to the dead-letter queue: %s; value %r", where, message, record.value)
    else:
        log.error("%s: to the dead-letter queue: %s", where, message)
