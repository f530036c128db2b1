"""Where the time-based partitioners get a record's time: ``timestamp.extractor``.

``Wallclock`` (Confluent's default, not exactly-once), ``Record`` (the Kafka timestamp),
``RecordField`` (a time inside the JSON value), or ``module:Class`` with ``extract(record)``.
"""

from __future__ import annotations

import math
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from blockgz.errors import ConfigError
from blockgz.sink.partitioning.isotime import parse_iso_millis
from blockgz.sink.partitioning.json_fields import field_path, json_kind, lookup_field, value_object
from blockgz.sink.plugins import import_named, instantiate
from blockgz.sink.records import KafkaRecord

#: Confluent's package of partitioners; its extractors are nested classes of TimeBasedPartitioner.
CONFLUENT_PARTITIONERS = "io.confluent.connect.storage.partitioner."

_EXTRACTOR_KINDS = ("Wallclock", "Record", "RecordField")
_EXTRACTOR_ALIASES = {}
for _kind in _EXTRACTOR_KINDS:
    _nested = f"{CONFLUENT_PARTITIONERS}TimeBasedPartitioner${_kind}TimestampExtractor"
    for _spelling in (_kind, _nested):
        _EXTRACTOR_ALIASES[_spelling.lower()] = _kind

EXTRACTOR_ALLOWED = (
    "Wallclock, Record, RecordField (any case), their class names "
    f"{CONFLUENT_PARTITIONERS}TimeBasedPartitioner${{Wallclock,Record,RecordField}}"
    "TimestampExtractor, or "
    "module:Class with an extract(record) -> int method"
)


class TimestampExtractor(ABC):
    """Reads a record's time (epoch milliseconds) for the time-based partitioners.

    A custom ``timestamp.extractor=module:Class`` needs only an ``extract(record)`` method; an
    optional ``configure(options)`` gets all sink options, and ``deterministic = False`` marks
    one that does not depend on the record alone.
    """

    deterministic: bool = True

    def configure(self, options: Mapping[str, str]) -> None:  # noqa: B027 - optional hook
        """Read settings from the sink options (nothing by default)."""

    @abstractmethod
    def extract(self, record: KafkaRecord) -> int:
        """Epoch milliseconds of ``record``."""


class WallclockTimestampExtractor(TimestampExtractor):
    """The current time (Confluent's default extractor): *not* deterministic.

    >>> WallclockTimestampExtractor(clock=lambda: 1.5).extract(None)
    1500
    """

    deterministic = False

    def __init__(self, clock: Callable[[], float] = time.time):
        self.clock = clock

    def extract(self, record: KafkaRecord) -> int:
        return int(self.clock() * 1000)


class RecordTimestampExtractor(TimestampExtractor):
    """The Kafka record's own timestamp (create or log-append time).

    >>> RecordTimestampExtractor().extract(KafkaRecord("t", 0, 7, 1_000, None, None))
    1000
    """

    def extract(self, record: KafkaRecord) -> int:
        ts = record.timestamp_ms
        if ts is None or ts < 0:
            raise record.fail(
                f"the record has no Kafka timestamp ({ts}), which timestamp.extractor=Record "
                "needs; allowed instead: timestamp.extractor=RecordField (a time inside the "
                "value) or Wallclock"
            )
        return ts


class RecordFieldTimestampExtractor(TimestampExtractor):
    """A time inside the JSON value: ``timestamp.field`` (dotted for nested fields).

    Accepts epoch milliseconds as a JSON number (a fraction is truncated, as Java's
    ``longValue``) or as text of digits, and ISO-8601 text (offset-less text is UTC). Unlike
    Confluent, a text of digits is epoch milliseconds (Joda would read ``"2026"`` as a year).
    A decoded Avro ``timestamp-millis`` (or ``-micros``) field is read as its instant.

    >>> x = RecordFieldTimestampExtractor("meta.ts")
    >>> x.extract(KafkaRecord("t", 0, 0, None, None, b'{"meta": {"ts": "2026-11-22T10:15Z"}}'))
    1795342500000
    >>> x.extract(KafkaRecord("t", 0, 0, None, None, b'{"meta": {"ts": 1795342500000}}'))
    1795342500000
    """

    _DIGITS = re.compile(r"[+-]?\d+")

    def __init__(self, field: str = "timestamp"):
        self.field = field
        self._path = field_path(field, "timestamp.field")

    def extract(self, record: KafkaRecord) -> int:
        who = "timestamp.extractor=RecordField"
        obj = value_object(record, who)
        value = lookup_field(record, obj, self._path, self.field, "timestamp.field")
        if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
            raise record.fail(
                f"timestamp.field {self.field!r} is {json_kind(value)}; allowed: epoch "
                "milliseconds (a number or a text of digits) or ISO-8601 text"
            )
        if isinstance(value, int):
            return value
        if isinstance(value, datetime):  # an Avro timestamp-millis/-micros, decoded
            if value.tzinfo is None:
                value = value.replace(tzinfo=UTC)
            return (value - _EPOCH) // timedelta(milliseconds=1)
        if isinstance(value, float):
            if not math.isfinite(value):
                raise record.fail(f"timestamp.field {self.field!r} is {value!r}, not a time")
            return int(value)
        text = str(value).strip()
        if self._DIGITS.fullmatch(text):
            return int(text)
        try:
            return parse_iso_millis(text)
        except ValueError as exc:
            raise record.fail(
                f"timestamp.field {self.field!r} is the text {text[:60]!r}, which is neither "
                f"epoch milliseconds nor ISO-8601 ({exc})"
            ) from exc


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def builtin_extractor(name: str, field: str = "timestamp") -> TimestampExtractor:
    kind = _EXTRACTOR_ALIASES.get(name.strip().lower())
    if kind == "Wallclock":
        return WallclockTimestampExtractor()
    if kind == "Record":
        return RecordTimestampExtractor()
    if kind == "RecordField":
        return RecordFieldTimestampExtractor(field)
    raise ConfigError(f"timestamp.extractor: unknown value {name!r}; allowed: {EXTRACTOR_ALLOWED}")


def build_extractor(
    name: str, field: str = "timestamp", plugin_options: Mapping[str, str] | None = None
) -> Any:
    """The ``timestamp.extractor`` called ``name`` (default ``Wallclock``), configured; a user's
    class gets ``plugin_options`` (every sink option) through its ``configure``.

    >>> type(build_extractor("record")).__name__
    'RecordTimestampExtractor'
    """
    name = name or "Wallclock"
    if name.lower() in _EXTRACTOR_ALIASES:
        return builtin_extractor(name, field or "timestamp")
    cls = import_named(name, "timestamp.extractor", EXTRACTOR_ALLOWED)
    if not isinstance(cls, type) or not callable(getattr(cls, "extract", None)):
        raise ConfigError(
            f"timestamp.extractor: {name!r} is not a class with an extract(record) method; "
            f"allowed: {EXTRACTOR_ALLOWED}"
        )
    extractor = instantiate(cls, name, "timestamp.extractor")
    if callable(getattr(extractor, "configure", None)):
        extractor.configure(dict(plugin_options or {}))
    return extractor
