"""Kafka clients for the ``blockgz-kafka`` source: consumers made from its settings, errors named
after the brokers, and the requests asked again while a broker restarts or a leader moves.

* :func:`new_consumer`: an assign-only consumer that never commits (ranges, planning);
* :func:`first_record_consumer` and :func:`first_record_settings`: a consumer for reading the
  first record of partitions (their timestamps: the hold clock, the lag-in-seconds figure);
* :func:`kafka_errors` and :func:`asking_again`: confluent-kafka's exceptions as
  :class:`~blockgz.errors.SourceError`, transient answers asked again until a deadline.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

from blockgz.errors import SourceError
from blockgz.sink.kafka.options import SourceSettings

log = logging.getLogger("blockgz.kafka_source")


@contextlib.contextmanager
def kafka_errors(config: SourceSettings, what: str) -> Iterator[None]:
    """Turn confluent-kafka's exceptions into :class:`SourceError` naming the brokers."""
    from confluent_kafka import KafkaException

    try:
        yield
    except KafkaException as exc:
        raise SourceError(f"{what} from Kafka at {config.bootstrap_servers}: {exc}") from exc


#: librdkafka's answers while a broker restarts or a leader moves: worth asking again.
#: ``_UNKNOWN_PARTITION`` is its local answer for a partition its metadata lost while the
#: broker was away (seen in a restart test); the deadline still ends a partition that is gone.
#: ``FENCED_LEADER_EPOCH``: a broker killed and restarted with its data bumps the leader epoch,
#: and a ListOffsets sent with the epoch of the metadata before gets this until librdkafka has
#: refreshed it (seen in ``test_real_broker.py``'s restart; Kafka's client retries it too), as
#: ``UNKNOWN_LEADER_EPOCH`` and ``OFFSET_NOT_AVAILABLE`` (a leader elected, its offsets not yet).
_TRANSIENT = (
    "_TRANSPORT",
    "_ALL_BROKERS_DOWN",
    "_UNKNOWN_PARTITION",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_FOR_PARTITION",
    "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
    "OFFSET_NOT_AVAILABLE",
)


def asking_again(config: SourceSettings, what: str, ask: Any) -> Any:
    """``ask()``, asked again while Kafka answers with a transient error (a broker restarting:
    librdkafka fails a metadata or offsets request at once when no broker is up), with backoff
    up to ``kafkaConsumer.pollTimeoutMs``; then, or on any other error, a :class:`SourceError`.
    (confluent-kafka retries produce requests, not these admin-style calls.)

    >>> from blockgz.sink.kafka.options import parse_options
    >>> calls = []
    >>> asking_again(parse_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t"}),
    ...              "cannot list offsets", lambda: calls.append(1) or 42), calls
    (42, [1])
    """
    from confluent_kafka import KafkaError, KafkaException

    transient = {getattr(KafkaError, name) for name in _TRANSIENT}
    deadline = time.monotonic() + config.timeout_s
    delay = 0.1
    while True:
        try:
            return ask()
        except KafkaException as exc:
            error = exc.args[0]
            again = error.retriable() or error.code() in transient
            if not again or time.monotonic() + delay > deadline:
                raise SourceError(
                    f"{what} from Kafka at {config.bootstrap_servers}: {exc}"
                ) from exc
            log.warning(
                "%s from Kafka at %s (%s): asking again",
                what,
                config.bootstrap_servers,
                error.str(),
            )
            time.sleep(delay)  # backoff between attempts; the deadline bounds the wait
            delay = min(delay * 2, 2.0)


def new_consumer(config: SourceSettings) -> Any:
    """A confluent-kafka Consumer for ``config`` (assign-only; never commits)."""
    from confluent_kafka import Consumer

    with kafka_errors(config, "cannot create a consumer"):
        return Consumer(config.consumer_config())


#: A first-record reader's settings where the job set none: it reads one record per partition
#: (:func:`blockgz.sink.kafka.oldest.first_record_times`), so a short fetch wait (a chunk's
#: partitions are read by 2-4 fetches: 0.4-0.5 s for 10,000 partitions against 1.3 s at
#: librdkafka's 500 ms) and small fetches (not 1 MiB of a partition's backlog for one
#: timestamp).
FIRST_RECORD_READING = {"fetch.wait.max.ms": 10, "fetch.message.max.bytes": 64 * 1024}


#: librdkafka's other name for a :data:`FIRST_RECORD_READING` setting (a job may use either).
_ALIASES = {"fetch.message.max.bytes": "max.partition.fetch.bytes"}


def first_record_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """librdkafka ``settings`` with :data:`FIRST_RECORD_READING` where they set none (under
    either name).

    >>> first_record_settings({"max.partition.fetch.bytes": 1024})
    {'max.partition.fetch.bytes': 1024, 'fetch.wait.max.ms': 10}
    """
    out = dict(settings)
    for key, value in FIRST_RECORD_READING.items():
        if key not in out and _ALIASES.get(key) not in out:
            out[key] = value
    return out


def first_record_consumer(config: SourceSettings) -> Any:
    """A consumer for reading partitions' first records (their timestamps) on the driver: the
    source's settings, with :data:`FIRST_RECORD_READING` where the job set none."""
    from confluent_kafka import Consumer

    with kafka_errors(config, "cannot create a consumer"):
        return Consumer(first_record_settings(config.consumer_config()))
