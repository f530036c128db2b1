"""Handing archived records to a librdkafka producer: the restore's innermost loop.

:func:`produce_block` gives one block of records to the producer, each to its partition with
its resume marker, key, value, headers and timestamp, waiting while the producer's queue is
full; :class:`Failures` is the delivery callback that hears only of failures, so a good record
costs no Python call. The send loop around them is :mod:`blockgz.reader.restore.send`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

from blockgz.errors import ReplayError
from blockgz.reader.restore.markers import MARKER

_BYTES_OR_NONE = frozenset({bytes, type(None)})


class Failures:
    """The producer's delivery callback: it only hears of failures
    (``delivery.report.only.error``), so a good record costs no Python call."""

    def __init__(self) -> None:
        self.failures: list[str] = []

    def __call__(self, error: Any, message: Any) -> None:
        if error is not None:
            self.failures.append(
                f"{message.topic()}[{message.partition()}]: {error} "
                f"({dict(message.headers() or []).get(MARKER, b'').decode()})"
            )


def produce_block(
    producer: Any,
    topic: str,
    records: list,
    partitions: Iterable[int],
    marker: bytes | None,
    values: list[bytes | None] | None = None,
    keys: list[bytes | None] | None = None,
    callbacks: list[Any] | None = None,
) -> None:
    """Hand ``records`` to the producer, each to its partition, with its resume marker, its
    value and key (``values``/``keys`` re-encoded, or the record's own); while the producer's
    queue is full, wait for it to drain."""
    if values is None:
        values = [r.value for r in records]
    if keys is None:
        keys = [r.key for r in records]
    for column in (values, keys):  # checked up front, in C: never sent as something else
        if not set(map(type, column)) <= _BYTES_OR_NONE:
            bad = next(n for n, v in enumerate(column) if type(v) not in _BYTES_OR_NONE)
            raise ReplayError(
                f"{topic}: offset {records[bad].offset} holds a decoded key or value, not bytes"
            )
    produce = producer.produce
    report = itertools.repeat(None) if callbacks is None else callbacks
    rows = zip(records, partitions, values, keys, report, strict=False)
    for record, partition, value, key, callback in rows:
        headers = record.headers
        if marker is not None:
            headers = [*(headers or ()), (MARKER, marker + b"%d" % record.offset)]
        try:
            # Positional (topic, value, key, partition, callback, on_delivery, timestamp,
            # headers): no keyword dict per record.
            produce(topic, value, key, partition, callback, None, record.timestamp or 0, headers)
        except BufferError:
            _produce_when_queued(
                producer,
                (topic, value, key, partition, callback, None, record.timestamp or 0, headers),
            )
        except Exception as exc:  # KafkaException: a record librdkafka refuses (its size)
            raise ReplayError(_refused(topic, partition, record.offset, value, key, exc)) from exc


def _refused(topic: str, partition: int, offset: int, value, key, exc: Exception) -> str:
    """One line for a record the producer refused to take."""
    error = exc.args[0] if exc.args else exc  # a KafkaError says why in its str()
    reason = getattr(error, "str", None)
    text = reason() if callable(reason) else str(error)
    size = len(value or b"") + len(key or b"")
    return (
        f"{topic}[{partition}]: the record of offset {offset} ({size} bytes) was refused by the "
        f"producer: {text}; a rerun resumes where delivery stopped"
    )


def _produce_when_queued(producer: Any, args: tuple) -> None:
    """``producer.produce(*args)`` once its queue has room."""
    while True:
        # Only failures are reported (``delivery.report.only.error``), so no event would end
        # a longer wait early: wait briefly, then offer it again.
        producer.poll(0.005)
        try:
            producer.produce(*args)
            return
        except BufferError:
            continue
