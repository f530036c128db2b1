"""Confluent-compatible partitioners: the *encoded partition* (directory) of each record.

An object's key is ``<topics.dir>/<topic>/<encoded partition>/<topic>+<partition>+<offset>.<ext>``;
a partitioner computes the ``<encoded partition>`` part exactly as Confluent's built-ins do:

=============================  =================================================================
``partitioner.class``          encoded partition
=============================  =================================================================
``default``                    ``partition=<kafka partition>``
``field``                      ``f1=v1/f2=v2`` from ``partition.field.name`` (schemaless JSON)
``time`` (``timebased``)       ``path.format`` rendered at the start of the record's time bucket
``daily`` / ``hourly``         ``year=YYYY/month=MM/day=dd`` (``/hour=HH``)
``module:Class``               a :class:`Partitioner` subclass of your own
=============================  =================================================================

Confluent's class names (``io.confluent.connect.storage.partitioner.HourlyPartitioner``...) work
too, so a Connect config can be pasted.
:func:`~blockgz.sink.partitioning.settings.build_partitioner` checks every option and raises
:class:`ConfigError` naming the key and the allowed values.

Differences from Confluent, all deliberate:

* FieldPartitioner reads schemaless JSON objects (Confluent needs Connect Structs or Maps).
* Field values are escaped (:mod:`blockgz.sink.partitioning.pathsafe`), so a value like ``../x`` or
  ``a/b`` stays in its ``name=value`` segment; plain values (letters, digits, ``-_. @,``)
  look as in Confluent.
* ``partition.path.lowercase=true`` (default false) lower-cases field names, values and rendered
  time text (escapes keep Hive's upper-case hex), for Athena and Glue, which expect lower-case
  partition directories. Confluent has no such option (its issues #381, #496).
* ``timestamp.extractor`` defaults to ``Wallclock`` as in Confluent, so pasted configs behave
  the same; such a partitioner has ``deterministic = False``, and replays after a failure may
  put records under other paths. Use ``Record`` or ``RecordField`` for exactly-once layouts.

    >>> from blockgz.sink.records import KafkaRecord
    >>> from blockgz.sink.partitioning.settings import build_partitioner
    >>> p = build_partitioner({"partitioner.class": "hourly", "locale": "en",
    ...                        "timezone": "UTC", "timestamp.extractor": "Record"})
    >>> record = KafkaRecord("clicks", 3, 42, 1_795_342_500_000, None, b"{}")  # 2026-11-22T10:15Z
    >>> p.encode_partition(record)
    'year=2026/month=11/day=22/hour=10'
    >>> p.partitioned_path("clicks", p.encode_partition(record))
    'clicks/year=2026/month=11/day=22/hour=10'
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from datetime import tzinfo
from typing import Any

from blockgz.archive.layout import check_directory_delim, default_partition
from blockgz.errors import ConfigError
from blockgz.sink.partitioning.json_fields import field_path, json_kind, lookup_field, value_object
from blockgz.sink.partitioning.pathsafe import escape_path_value
from blockgz.sink.partitioning.timeformat import compile_pattern
from blockgz.sink.partitioning.timestamps import (
    TimestampExtractor,
    builtin_extractor,
)
from blockgz.sink.partitioning.zones import ZoneOffsets, parse_timezone
from blockgz.sink.records import KafkaRecord

HOUR_MS = 3_600_000
DAY_MS = 86_400_000


# -- base classes -------------------------------------------------------------------------------
class Partitioner(ABC):
    """Computes each record's encoded partition. Subclass it for a custom ``partitioner.class``.

    A custom partitioner is built with no arguments, then given all sink options through
    :meth:`configure` (call ``super().configure(options)`` to keep ``directory.delim``). Set
    ``deterministic = False`` if its output depends on anything but the record (e.g. the clock).

    >>> class ByKeyLength(Partitioner):
    ...     def encode_partition(self, record):
    ...         return f"keylen={len(record.key or b'')}"
    >>> p = ByKeyLength()
    >>> p.configure({"directory.delim": "/"})
    >>> p.partitioned_path("t", p.encode_partition(KafkaRecord("t", 0, 0, None, b"abc", b"{}")))
    't/keylen=3'
    """

    #: Same record, same partition, on every run: what exactly-once replays rely on.
    deterministic: bool = True
    #: Whether each Kafka partition's records go to one directory named by the partition alone
    #: (``partition=<p>``): readers then find a partition's objects by listing it, tasks record
    #: no directory intents, and runs of records are written at once. A class says so itself;
    #: a subclass does not inherit it (it may place records elsewhere).
    partition_directories: bool = False
    directory_delim: str = "/"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "partition_directories" not in cls.__dict__:
            cls.partition_directories = False

    def configure(self, options: Mapping[str, str]) -> None:
        """Read settings from the sink options; the base class reads ``directory.delim``."""
        self.directory_delim = options.get("directory.delim") or "/"

    @abstractmethod
    def encode_partition(self, record: KafkaRecord) -> str:
        """The encoded partition of ``record``; raise ``record.fail(...)`` if it has none."""

    def partitioned_path(self, topic: str, encoded: str) -> str:
        """``topic + directory.delim + encoded``, as every Confluent built-in partitioner."""
        return f"{topic}{self.directory_delim}{encoded}"

    def timestamp(self, record: KafkaRecord) -> int | None:
        """The record time in epoch ms used for ``rotate.interval.ms``; None without extractor."""
        return None


# -- built-in partitioners ----------------------------------------------------------------------
class DefaultPartitioner(Partitioner):
    """``partition=<kafka partition>``, keeping Kafka's partitioning.

    >>> DefaultPartitioner().encode_partition(KafkaRecord("t", 7, 0, None, None, b"1"))
    'partition=7'
    """

    partition_directories = True

    def __init__(self, directory_delim: str = "/", lowercase: bool = False):
        self.directory_delim = directory_delim
        self.lowercase = lowercase  # nothing to lower-case, accepted for uniformity

    def encode_partition(self, record: KafkaRecord) -> str:
        return default_partition(record.partition)


class FieldPartitioner(Partitioner):
    """``f1=v1/f2=v2`` from fields of the JSON object value (dotted names reach nested objects).

    Strings, integers, booleans (``true``/``false``) and null (``null``) are allowed, as in
    Confluent. Values are escaped with :func:`~blockgz.sink.partitioning.pathsafe.escape_path_value`
    (plus the directory and file delimiters) so no value can leave its segment. An empty
    string gives ``f=`` as in Confluent, rather than Hive's ``__HIVE_DEFAULT_PARTITION__``:
    the segment still has its ``f=`` prefix, so no empty directory name can arise, and keys
    stay Confluent's.

    >>> p = FieldPartitioner(["user.country", "vip"])
    >>> p.encode_partition(KafkaRecord("t", 0, 0, None, None,
    ...                                b'{"user": {"country": "DE/../x"}, "vip": true}'))
    'user.country=DE%2F..%2Fx/vip=true'
    """

    def __init__(
        self,
        fields: Sequence[str] | str,
        *,
        directory_delim: str = "/",
        file_delim: str = "+",
        lowercase: bool = False,
    ):
        names = _field_list(fields)
        self.fields = names
        self.directory_delim = check_directory_delim(directory_delim)
        self.lowercase = lowercase
        # escape the delimiters too (those made of escape characters cannot be, nor need be)
        self._extra = directory_delim + "".join(
            c for c in file_delim if not c.isalnum() and c != "%"
        )
        self._specs = [
            (
                name,
                field_path(name, "partition.field.name"),
                escape_path_value(name.lower() if lowercase else name, self._extra) + "=",
            )
            for name in names
        ]

    def encode_partition(self, record: KafkaRecord) -> str:
        obj = value_object(record, "FieldPartitioner (partition.field.name)")
        segments = []
        for name, path, prefix in self._specs:
            value = lookup_field(record, obj, path, name, "partition.field.name")
            if value is None:
                text = "null"
            elif isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, (int, str)):
                text = str(value)
            else:
                raise record.fail(
                    f"partition.field.name {name!r} is {json_kind(value)}; allowed types: "
                    "string, integer, boolean, null"
                )
            if self.lowercase:
                text = text.lower()
            try:
                segments.append(prefix + escape_path_value(text, self._extra))
            except ValueError as exc:
                raise record.fail(f"partition.field.name {name!r}: {exc}") from exc
        return self.directory_delim.join(segments)


class TimeBasedPartitioner(Partitioner):
    """``path.format`` rendered at the start of the record's ``partition.duration.ms`` bucket.

    As Confluent's ``getPartition``, buckets are floored in the zone's *local* time, then the
    bucket start is rendered in that zone. ``extractor`` is a :class:`TimestampExtractor` or
    the name of a built-in one (Confluent's default, ``Wallclock``, is not deterministic).

    >>> p = TimeBasedPartitioner("'date'=YYYY-MM-dd/'t'=HHmm", 15 * 60_000, "en",
    ...                          "Asia/Kolkata", "Record")
    >>> p.encode_partition(KafkaRecord("t", 0, 0, 1_795_342_500_000, None, b"{}"))
    'date=2026-11-22/t=1545'
    """

    def __init__(
        self,
        path_format: str,
        duration_ms: int,
        locale: str,
        timezone: str | tzinfo,
        extractor: TimestampExtractor | str = "Wallclock",
        *,
        directory_delim: str = "/",
        lowercase: bool = False,
        timestamp_field: str = "timestamp",
    ):
        check_directory_delim(directory_delim)
        if isinstance(duration_ms, bool) or not isinstance(duration_ms, int) or duration_ms <= 0:
            raise ConfigError(
                f"partition.duration.ms: {duration_ms!r} is not allowed; allowed: a whole "
                "number of milliseconds > 0, e.g. 3600000 for hourly buckets"
            )
        if not path_format.strip() or path_format == directory_delim:
            raise ConfigError(
                f"path.format: must not be empty (got {path_format!r}); allowed: a Joda-Time "
                "pattern such as 'year'=YYYY/'month'=MM/'day'=dd/'hour'=HH"
            )
        if path_format.endswith(directory_delim):  # Confluent strips one trailing delimiter
            path_format = path_format[: -len(directory_delim)]
        self.path_format = path_format
        self.duration_ms = duration_ms
        self.directory_delim = directory_delim
        self.lowercase = lowercase
        self.tz = parse_timezone(timezone) if isinstance(timezone, str) else timezone
        self.extractor = (
            builtin_extractor(extractor, timestamp_field)
            if isinstance(extractor, str)
            else extractor
        )
        self.deterministic = bool(getattr(self.extractor, "deterministic", True))
        self._render = compile_pattern(path_format, locale)
        self._zone = ZoneOffsets(self.tz)
        self._rendered: dict[int, str] = {}
        self._last_record: KafkaRecord | None = None
        self._last_ts = 0

    def timestamp(self, record: KafkaRecord) -> int:
        """The extractor's epoch ms for ``record`` (computed once per record)."""
        if record is self._last_record:
            return self._last_ts
        ts = self.extractor.extract(record)
        if isinstance(ts, bool) or not isinstance(ts, numbers.Integral):
            raise record.fail(
                f"timestamp.extractor {type(self.extractor).__name__} returned {ts!r}; "
                "it must return epoch milliseconds as an int"
            )
        ts = int(ts)
        self._last_record, self._last_ts = record, ts
        return ts

    def encode_partition(self, record: KafkaRecord) -> str:
        ts = self.timestamp(record)
        try:
            start = self._zone.bucket_start(ts, self.duration_ms)
            text = self._rendered.get(start)
            if text is None:
                text = self._render(self._zone.local_datetime(start))
                if self.lowercase:
                    d = self.directory_delim
                    text = d.join(part.lower() for part in text.split(d))
                if len(self._rendered) >= 4096:
                    self._rendered.clear()
                self._rendered[start] = text
        except (OverflowError, ValueError, OSError) as exc:
            raise record.fail(
                f"timestamp {ts} ms is outside the years 1..9999 a path can show ({exc})"
            ) from exc
        return text


def _fixed_format(delim: str, *fields: tuple[str, str]) -> str:
    """A Joda pattern of ``name=<letters>`` fields joined by ``delim`` (quoted, as literal)."""
    parts = []
    for i, (name, letters) in enumerate(fields):
        literal = (delim if i else "") + name + "="
        parts.append("'" + literal.replace("'", "''") + "'" + letters)
    return "".join(parts)


class _FixedTimePartitioner(TimeBasedPartitioner):
    """A time partitioner whose ``path.format`` and bucket are fixed (daily, hourly)."""

    FIELDS: tuple[tuple[str, str], ...] = ()
    DURATION_MS = 0

    def __init__(
        self,
        locale: str,
        timezone: str | tzinfo,
        extractor: TimestampExtractor | str = "Wallclock",
        *,
        directory_delim: str = "/",
        lowercase: bool = False,
        timestamp_field: str = "timestamp",
    ):
        super().__init__(
            _fixed_format(directory_delim, *self.FIELDS),
            self.DURATION_MS,
            locale,
            timezone,
            extractor,
            directory_delim=directory_delim,
            lowercase=lowercase,
            timestamp_field=timestamp_field,
        )


class DailyPartitioner(_FixedTimePartitioner):
    """``year=YYYY/month=MM/day=dd`` in one-day buckets of local time.

    >>> p = DailyPartitioner("en", "America/New_York", "Record")
    >>> p.encode_partition(KafkaRecord("t", 0, 0, 1_795_342_500_000, None, b"{}"))
    'year=2026/month=11/day=22'
    """

    FIELDS = (("year", "YYYY"), ("month", "MM"), ("day", "dd"))
    DURATION_MS = DAY_MS


class HourlyPartitioner(_FixedTimePartitioner):
    """``year=YYYY/month=MM/day=dd/hour=HH`` in one-hour buckets of local time.

    >>> p = HourlyPartitioner("en", "UTC", "Record")
    >>> p.encode_partition(KafkaRecord("t", 0, 0, 1_795_342_500_000, None, b"{}"))
    'year=2026/month=11/day=22/hour=10'
    """

    FIELDS = (("year", "YYYY"), ("month", "MM"), ("day", "dd"), ("hour", "HH"))
    DURATION_MS = HOUR_MS


# -- options ------------------------------------------------------------------------------------
def _field_list(fields: Sequence[str] | str) -> list[str]:
    raw = fields.split(",") if isinstance(fields, str) else list(fields)
    names = [str(n).strip() for n in raw]
    if not names or all(not n for n in names):
        raise ConfigError(
            "partition.field.name: is required by partitioner.class=field; allowed: a comma "
            "list of field names, dotted for nested fields, e.g. country or user.country,type"
        )
    for name in names:
        field_path(name, "partition.field.name")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(
            f"partition.field.name: {', '.join(dupes)} listed more than once; allowed: each "
            "field once"
        )
    return names
