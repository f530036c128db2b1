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
too, so a Connect config can be pasted. :func:`build_partitioner` checks every option up front
and raises :class:`ConfigError` naming the key and the allowed values.

Differences from Confluent, all deliberate:

* FieldPartitioner reads schemaless JSON objects (Confluent needs Connect Structs or Maps).
* Field values are escaped (:mod:`sink.pathsafe`), so a value like ``../x`` or ``a/b`` stays in
  its ``name=value`` segment; plain values (letters, digits, ``-_. @,``) look as in Confluent.
* ``partition.path.lowercase=true`` (default false) lower-cases field names, values and rendered
  time text (escapes keep Hive's upper-case hex), for Athena and Glue, which expect lower-case
  partition directories. Confluent has no such option (its issues #381, #496).
* ``timestamp.extractor`` defaults to ``Wallclock`` as in Confluent, so pasted configs behave
  the same; such a partitioner has ``deterministic = False``, and replays after a failure may
  put records under other paths. Use ``Record`` or ``RecordField`` for exactly-once layouts.

    >>> from sink.records import KafkaRecord
    >>> p = build_partitioner({"partitioner.class": "hourly", "locale": "en",
    ...                        "timezone": "UTC", "timestamp.extractor": "Record"})
    >>> record = KafkaRecord("clicks", 3, 42, 1_795_342_500_000, None, b"{}")  # 2026-11-22T10:15Z
    >>> p.encode_partition(record)
    'year=2026/month=11/day=22/hour=10'
    >>> p.partitioned_path("clicks", p.encode_partition(record))
    'clicks/year=2026/month=11/day=22/hour=10'
"""

from __future__ import annotations

import importlib
import math
import numbers
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from datetime import tzinfo
from typing import Any

from blockgz.errors import ConfigError
from sink.options import bool_option
from sink.pathsafe import escape_path_value
from sink.records import KafkaRecord
from sink.timeformat import ZoneOffsets, compile_pattern, parse_iso_millis, parse_timezone

#: Every option key this module reads.
PARTITIONER_OPTIONS = frozenset(
    {
        "partitioner.class",
        "partition.field.name",
        "path.format",
        "partition.duration.ms",
        "locale",
        "timezone",
        "timestamp.extractor",
        "timestamp.field",
        "directory.delim",
        "file.delim",
        "partition.path.lowercase",
    }
)

_CONFLUENT = "io.confluent.connect.storage.partitioner."
_KINDS = {
    "default": "DefaultPartitioner",
    "field": "FieldPartitioner",
    "time": "TimeBasedPartitioner",
    "daily": "DailyPartitioner",
    "hourly": "HourlyPartitioner",
}
_PARTITIONER_ALIASES = {"timebased": "time"}
for _kind, _cls in _KINDS.items():
    for _spelling in (_kind, _cls, _CONFLUENT + _cls):
        _PARTITIONER_ALIASES[_spelling.lower()] = _kind

PARTITIONER_ALLOWED = (
    "default, field, time (or timebased), daily, hourly, their class names "
    f"{_CONFLUENT}{{Default,Field,TimeBased,Daily,Hourly}}Partitioner, or module:Class naming "
    "a sink.partitioners.Partitioner subclass"
)

_EXTRACTOR_KINDS = ("Wallclock", "Record", "RecordField")
_EXTRACTOR_ALIASES = {}
for _kind in _EXTRACTOR_KINDS:
    for _spelling in (_kind, f"{_CONFLUENT}TimeBasedPartitioner${_kind}TimestampExtractor"):
        _EXTRACTOR_ALIASES[_spelling.lower()] = _kind

EXTRACTOR_ALLOWED = (
    "Wallclock, Record, RecordField (any case), their class names "
    f"{_CONFLUENT}TimeBasedPartitioner${{Wallclock,Record,RecordField}}TimestampExtractor, or "
    "module:Class with an extract(record) -> int method"
)

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
    directory_delim: str = "/"

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

    >>> x = RecordFieldTimestampExtractor("meta.ts")
    >>> x.extract(KafkaRecord("t", 0, 0, None, None, b'{"meta": {"ts": "2026-11-22T10:15Z"}}'))
    1795342500000
    >>> x.extract(KafkaRecord("t", 0, 0, None, None, b'{"meta": {"ts": 1795342500000}}'))
    1795342500000
    """

    _DIGITS = re.compile(r"[+-]?\d+")

    def __init__(self, field: str = "timestamp"):
        self.field = field
        self._path = _field_path(field, "timestamp.field")

    def extract(self, record: KafkaRecord) -> int:
        who = "timestamp.extractor=RecordField"
        obj = _value_object(record, who)
        value = _lookup(record, obj, self._path, self.field, "timestamp.field")
        if isinstance(value, bool) or value is None or isinstance(value, (dict, list)):
            raise record.fail(
                f"timestamp.field {self.field!r} is {_json_kind(value)}; allowed: epoch "
                "milliseconds (a number or a text of digits) or ISO-8601 text"
            )
        if isinstance(value, int):
            return value
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
            ) from None


# -- built-in partitioners ----------------------------------------------------------------------
class DefaultPartitioner(Partitioner):
    """``partition=<kafka partition>``, keeping Kafka's partitioning.

    >>> DefaultPartitioner().encode_partition(KafkaRecord("t", 7, 0, None, None, b"1"))
    'partition=7'
    """

    def __init__(self, directory_delim: str = "/", lowercase: bool = False):
        self.directory_delim = directory_delim
        self.lowercase = lowercase  # nothing to lower-case, accepted for uniformity

    def encode_partition(self, record: KafkaRecord) -> str:
        return f"partition={record.partition}"


class FieldPartitioner(Partitioner):
    """``f1=v1/f2=v2`` from fields of the JSON object value (dotted names reach nested objects).

    Strings, integers, booleans (``true``/``false``) and null (``null``) are allowed, as in
    Confluent. Values are escaped with :func:`~sink.pathsafe.escape_path_value` (plus the
    directory and file delimiters) so no value can leave its segment. An empty string gives
    ``f=`` as in Confluent, rather than Hive's ``__HIVE_DEFAULT_PARTITION__``: the segment still
    has its ``f=`` prefix, so no empty directory name can arise, and keys stay Confluent's.

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
        self.directory_delim = _check_delim(directory_delim)
        self.lowercase = lowercase
        # escape the delimiters too (those made of escape characters cannot be, nor need be)
        self._extra = directory_delim + "".join(
            c for c in file_delim if not c.isalnum() and c != "%"
        )
        self._specs = [
            (
                name,
                _field_path(name, "partition.field.name"),
                escape_path_value(name.lower() if lowercase else name, self._extra) + "=",
            )
            for name in names
        ]

    def encode_partition(self, record: KafkaRecord) -> str:
        obj = _value_object(record, "FieldPartitioner (partition.field.name)")
        segments = []
        for name, path, prefix in self._specs:
            value = _lookup(record, obj, path, name, "partition.field.name")
            if value is None:
                text = "null"
            elif isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, (int, str)):
                text = str(value)
            else:
                raise record.fail(
                    f"partition.field.name {name!r} is {_json_kind(value)}; allowed types: "
                    "string, integer, boolean, null"
                )
            if self.lowercase:
                text = text.lower()
            try:
                segments.append(prefix + escape_path_value(text, self._extra))
            except ValueError as exc:
                raise record.fail(f"partition.field.name {name!r}: {exc}") from None
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
        _check_delim(directory_delim)
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
            _builtin_extractor(extractor, timestamp_field)
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
            ) from None
        return text


def _fixed_format(delim: str, *fields: tuple[str, str]) -> str:
    """A Joda pattern of ``name=<letters>`` fields joined by ``delim`` (quoted, as literal)."""
    parts = []
    for i, (name, letters) in enumerate(fields):
        literal = (delim if i else "") + name + "="
        parts.append("'" + literal.replace("'", "''") + "'" + letters)
    return "".join(parts)


class DailyPartitioner(TimeBasedPartitioner):
    """``year=YYYY/month=MM/day=dd`` in one-day buckets of local time.

    >>> p = DailyPartitioner("en", "America/New_York", "Record")
    >>> p.encode_partition(KafkaRecord("t", 0, 0, 1_795_342_500_000, None, b"{}"))
    'year=2026/month=11/day=22'
    """

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
        fmt = _fixed_format(directory_delim, ("year", "YYYY"), ("month", "MM"), ("day", "dd"))
        super().__init__(
            fmt,
            DAY_MS,
            locale,
            timezone,
            extractor,
            directory_delim=directory_delim,
            lowercase=lowercase,
            timestamp_field=timestamp_field,
        )


class HourlyPartitioner(TimeBasedPartitioner):
    """``year=YYYY/month=MM/day=dd/hour=HH`` in one-hour buckets of local time.

    >>> p = HourlyPartitioner("en", "UTC", "Record")
    >>> p.encode_partition(KafkaRecord("t", 0, 0, 1_795_342_500_000, None, b"{}"))
    'year=2026/month=11/day=22/hour=10'
    """

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
        fmt = _fixed_format(
            directory_delim, ("year", "YYYY"), ("month", "MM"), ("day", "dd"), ("hour", "HH")
        )
        super().__init__(
            fmt,
            HOUR_MS,
            locale,
            timezone,
            extractor,
            directory_delim=directory_delim,
            lowercase=lowercase,
            timestamp_field=timestamp_field,
        )


# -- JSON helpers -------------------------------------------------------------------------------
def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number with a fraction ({value!r})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def _value_object(record: KafkaRecord, who: str) -> dict:
    if record.value is None:
        raise record.fail(f"the value is null (a tombstone); {who} needs a JSON object value")
    obj = record.json()
    if not isinstance(obj, dict):
        raise record.fail(f"{who} needs a JSON object value, but the value is {_json_kind(obj)}")
    return obj


def _present(obj: dict, limit: int = 20) -> str:
    names = [str(k) for k in obj]
    if not names:
        return "(none: the object is empty)"
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")


def _lookup(record: KafkaRecord, obj: dict, path: tuple[str, ...], name: str, option: str) -> Any:
    current: Any = obj
    for depth, part in enumerate(path):
        parent = ".".join(path[:depth])
        if not isinstance(current, dict):
            raise record.fail(
                f"{option} {name!r} cannot be read: {parent!r} is {_json_kind(current)}, "
                "not an object"
            )
        if part not in current:
            where = f" in {parent!r}" if parent else ""
            raise record.fail(
                f"{option} {name!r} is missing from the value; fields present{where}: "
                f"{_present(current)}"
            )
        current = current[part]
    return current


# -- options ------------------------------------------------------------------------------------
def _field_path(name: str, option: str) -> tuple[str, ...]:
    parts = tuple(name.split("."))
    if not name or any(not p for p in parts):
        raise ConfigError(
            f"{option}: {name!r} is not a field name; allowed: a name, or a dotted path to a "
            "nested field such as user.country"
        )
    return parts


def _field_list(fields: Sequence[str] | str) -> list[str]:
    raw = fields.split(",") if isinstance(fields, str) else list(fields)
    names = [str(n).strip() for n in raw]
    if not names or all(not n for n in names):
        raise ConfigError(
            "partition.field.name: is required by partitioner.class=field; allowed: a comma "
            "list of field names, dotted for nested fields, e.g. country or user.country,type"
        )
    for name in names:
        _field_path(name, "partition.field.name")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(
            f"partition.field.name: {', '.join(dupes)} listed more than once; allowed: each "
            "field once"
        )
    return names


def _check_delim(delim: str) -> str:
    """``directory.delim`` must be non-empty punctuation: escapes are made of ``%``, hex digits."""
    if not delim or any(c.isalnum() or c == "%" for c in delim):
        raise ConfigError(
            f"directory.delim: {delim!r} is not allowed; allowed: one or more punctuation "
            "characters other than % (default /)"
        )
    return delim


def _text(options: Mapping[str, str], key: str, default: str = "") -> str:
    value = options.get(key)
    return default if value is None else str(value).strip()


def _duration(options: Mapping[str, str]) -> int:
    text = _text(options, "partition.duration.ms")
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ConfigError(
            f"partition.duration.ms: {text!r} is not allowed; allowed: a whole number of "
            "milliseconds > 0, e.g. 3600000 for hourly buckets"
        )
    return value


def _import(spec: str, option: str, allowed: str) -> Any:
    """The object ``module:Name`` or ``module.Name`` names (ConfigError naming ``option``)."""
    if spec.lower().startswith("io.confluent."):
        raise ConfigError(f"{option}: {spec!r} is not available in blockgz; allowed: {allowed}")
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
    else:
        module_name, _, attr = spec.rpartition(".")
    if not module_name or not attr:
        raise ConfigError(f"{option}: unknown value {spec!r}; allowed: {allowed}")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"{option}: cannot import module {module_name!r} for {spec!r} ({exc}); "
            f"allowed: {allowed}"
        ) from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(
                f"{option}: module {module_name!r} has no {attr!r}; allowed: {allowed}"
            )
        obj = getattr(obj, part)
    return obj


def _instantiate(cls: Any, spec: str, option: str) -> Any:
    try:
        return cls()
    except TypeError as exc:
        raise ConfigError(
            f"{option}: {spec!r} must be constructible with no arguments ({exc})"
        ) from None


def _builtin_extractor(name: str, field: str = "timestamp") -> TimestampExtractor:
    kind = _EXTRACTOR_ALIASES.get(name.strip().lower())
    if kind == "Wallclock":
        return WallclockTimestampExtractor()
    if kind == "Record":
        return RecordTimestampExtractor()
    if kind == "RecordField":
        return RecordFieldTimestampExtractor(field)
    raise ConfigError(f"timestamp.extractor: unknown value {name!r}; allowed: {EXTRACTOR_ALLOWED}")


def build_extractor(options: Mapping[str, str]) -> Any:
    """The ``timestamp.extractor`` the options name (default ``Wallclock``), configured.

    >>> type(build_extractor({"timestamp.extractor": "record"})).__name__
    'RecordTimestampExtractor'
    """
    name = _text(options, "timestamp.extractor") or "Wallclock"
    if name.lower() in _EXTRACTOR_ALIASES:
        field = _text(options, "timestamp.field") or "timestamp"
        return _builtin_extractor(name, field)
    cls = _import(name, "timestamp.extractor", EXTRACTOR_ALLOWED)
    if not isinstance(cls, type) or not callable(getattr(cls, "extract", None)):
        raise ConfigError(
            f"timestamp.extractor: {name!r} is not a class with an extract(record) method; "
            f"allowed: {EXTRACTOR_ALLOWED}"
        )
    extractor = _instantiate(cls, name, "timestamp.extractor")
    if callable(getattr(extractor, "configure", None)):
        extractor.configure(options)
    return extractor


def partitioner_kind(options: Mapping[str, str]) -> str:
    """``default``, ``field``, ``time``, ``daily``, ``hourly`` or ``custom`` for the options.

    >>> partitioner_kind({"partitioner.class": _CONFLUENT + "DailyPartitioner"})
    'daily'
    """
    name = _text(options, "partitioner.class") or "default"
    kind = _PARTITIONER_ALIASES.get(name.lower())
    if kind:
        return kind
    if ":" in name or ("." in name and not name.lower().startswith("io.confluent.")):
        return "custom"
    if name.lower().startswith("io.confluent."):
        raise ConfigError(
            f"partitioner.class: {name!r} is not available in blockgz; "
            f"allowed: {PARTITIONER_ALLOWED}"
        )
    raise ConfigError(f"partitioner.class: unknown value {name!r}; allowed: {PARTITIONER_ALLOWED}")


def build_partitioner(options: Mapping[str, str]) -> Partitioner:
    """Check the partitioner options and build the partitioner they describe.

    Options (Confluent's names and defaults unless noted): ``partitioner.class`` (``default``),
    ``partition.field.name``, ``path.format``, ``partition.duration.ms``, ``locale``,
    ``timezone``, ``timestamp.extractor`` (``Wallclock``), ``timestamp.field``
    (``timestamp``), ``directory.delim`` (``/``), ``file.delim`` (``+``) and blockgz's own
    ``partition.path.lowercase`` (``false``). Options another partitioner would need are
    ignored, as in Confluent (Daily and Hourly ignore ``path.format`` and the duration).

    >>> build_partitioner({"partitioner.class": "field", "partition.field.name": "Region",
    ...                    "partition.path.lowercase": "true"}).encode_partition(
    ...     KafkaRecord("t", 0, 0, None, None, b'{"Region": "EU-West"}'))
    'region=eu-west'
    >>> build_partitioner({"partitioner.class": "daily", "locale": "en"})
    Traceback (most recent call last):
    ...
    blockgz.errors.ConfigError: partitioner.class=daily needs timezone; ...
    """
    opts = {str(k): str(v) for k, v in options.items() if v is not None}
    kind = partitioner_kind(opts)
    delim = _check_delim(opts.get("directory.delim", "/"))
    file_delim = opts.get("file.delim", "+") or "+"
    lowercase = bool_option(opts, "partition.path.lowercase", False)
    if kind == "default":
        return DefaultPartitioner(delim, lowercase)
    if kind == "field":
        return FieldPartitioner(
            _text(opts, "partition.field.name"),
            directory_delim=delim,
            file_delim=file_delim,
            lowercase=lowercase,
        )
    if kind == "custom":
        spec = _text(opts, "partitioner.class")
        cls = _import(spec, "partitioner.class", PARTITIONER_ALLOWED)
        if not (isinstance(cls, type) and issubclass(cls, Partitioner)):
            raise ConfigError(
                f"partitioner.class: {spec!r} is not a subclass of "
                f"sink.partitioners.Partitioner; allowed: {PARTITIONER_ALLOWED}"
            )
        partitioner = _instantiate(cls, spec, "partitioner.class")
        partitioner.directory_delim = delim
        partitioner.configure(opts)
        return partitioner

    required = ["locale", "timezone"]
    if kind == "time":
        required = ["path.format", "partition.duration.ms", *required]
    missing = [key for key in required if not _text(opts, key)]
    if missing:
        raise ConfigError(
            f"partitioner.class={kind} needs {', '.join(missing)}; e.g. "
            + ", ".join(_EXAMPLES[key] for key in missing)
        )
    locale, zone = _text(opts, "locale"), _text(opts, "timezone")
    extractor = build_extractor(opts)
    common: dict[str, Any] = {"directory_delim": delim, "lowercase": lowercase}
    if kind == "daily":
        return DailyPartitioner(locale, zone, extractor, **common)
    if kind == "hourly":
        return HourlyPartitioner(locale, zone, extractor, **common)
    return TimeBasedPartitioner(
        opts["path.format"], _duration(opts), locale, zone, extractor, **common
    )


_EXAMPLES = {
    "path.format": "path.format='year'=YYYY/'month'=MM/'day'=dd/'hour'=HH",
    "partition.duration.ms": "partition.duration.ms=3600000",
    "locale": "locale=en (a CLDR locale such as en_US, de_DE)",
    "timezone": "timezone=UTC (or an IANA name such as Europe/Berlin)",
}
