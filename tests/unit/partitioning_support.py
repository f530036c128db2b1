"""Helpers shared by the partitioning unit tests: records, epoch times and partitioner options."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from blockgz.sink.partitioning.partitioners import Partitioner
from blockgz.sink.partitioning.settings import build_partitioner
from blockgz.sink.records import KafkaRecord

HOURLY = "'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH"


def ms(text: str) -> int:
    """Epoch ms of a naive ISO text read as UTC."""
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000)


T = ms("2026-11-22T10:15")


def rec(value=None, *, ts: int | None = T, partition: int = 0, offset: int = 5, raw=None):
    """A record whose value is ``value`` as JSON (or ``raw`` bytes; neither: a tombstone)."""
    data = raw if raw is not None else (None if value is None else json.dumps(value).encode())
    return KafkaRecord("clicks", partition, offset, ts, b"k", data)


def build(**options: str) -> Partitioner:
    return build_partitioner({k.replace("_", "."): v for k, v in options.items()})


def time_options(**extra: str) -> dict[str, str]:
    return {"locale": "en", "timezone": "UTC", "timestamp.extractor": "Record", **extra}
