"""The Iceberg partition spec that matches the export's partitioner.

Iceberg's ``add_files`` gives each file its partition from the file's own column statistics,
so a spec works only where every file's rows fall in one partition value; the partitioners
that guarantee it map to a spec, the others are refused (``blockgz.iceberg.partition.spec=none``
makes an unpartitioned table instead):

* ``hourly`` (and ``TimeBasedPartitioner`` with ``partition.duration.ms=3600000``) →
  ``hour`` of the record time, in a zone whose offsets are whole hours (a local hour is then
  one UTC hour; Iceberg's transforms are UTC);
* ``daily`` (and a duration of ``86400000``) → ``day``, with ``timezone=UTC`` only (a local
  day elsewhere straddles two UTC days);
* the record time is Kafka's timestamp column (``timestamp.extractor=Record``) or the value's
  ``timestamp.field`` (``RecordField``, a timestamp column); ``Wallclock`` names the time of
  writing, which no column holds, so it is refused;
* ``field`` → ``identity`` of each ``partition.field.name``;
* ``default`` → unpartitioned. Each object holds one Kafka partition already, and the Kafka
  partition (a hash of the key) is rarely what analysts filter on; Iceberg keeps every data
  file's column bounds (offsets, timestamps, the partition column when the files have one), so a
  filter on them skips files without a spec.

>>> from blockgz.options import Options
>>> from blockgz.sink.partitioning.settings import PartitionerSettings
>>> def plan(**opts):
...     return partition_plan(PartitionerSettings.from_options(Options(opts)), "auto")
>>> plan(**{"partitioner.class": "hourly", "locale": "en", "timezone": "Europe/Berlin",
...         "timestamp.extractor": "Record"})
(SpecField(source=':timestamp', transform='hour', name='timestamp_hour'),)
>>> plan(**{"partitioner.class": "field", "partition.field.name": "region,kind"})
(SpecField(source='region', transform='identity', name='region'), SpecField(source='kind', transform='identity', name='kind'))
>>> plan()
()
>>> plan(**{"partitioner.class": "daily", "locale": "en", "timezone": "Asia/Kolkata",
...     "timestamp.extractor": "Record"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
blockgz.errors.ConfigError: blockgz.iceberg.partition.spec=auto: ... allowed: ...
"""  # noqa: E501

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from blockgz.errors import ConfigError
from blockgz.options import Options
from blockgz.sink.iceberg.settings import PARTITION_SPEC, IcebergSettings, check_parquet
from blockgz.sink.partitioning.settings import (
    DailySettings,
    DefaultSettings,
    FieldSettings,
    HourlySettings,
    PartitionerSettings,
    TimeBasedSettings,
)
from blockgz.sink.partitioning.zones import parse_timezone

#: ``SpecField.source`` of Kafka's record timestamp: resolved against the files' columns by
#: :func:`kafka_timestamp_column`.
KAFKA_TIMESTAMP = ":timestamp"
#: The column a blockgz Parquet object keeps Kafka's record timestamp in (beside the value's
#: fields and ``__kafka_offset``; the Parquet format's ``TIMESTAMP_COLUMN``).
KAFKA_TIMESTAMP_COLUMNS = ("__kafka_timestamp",)
HOUR_MS = 3_600_000
DAY_MS = 86_400_000
_ALLOWED = (
    "partitioner.class=default (unpartitioned), field (identity), hourly or "
    "TimeBasedPartitioner with partition.duration.ms=3600000 in a whole-hour timezone (hour), "
    "daily or partition.duration.ms=86400000 with timezone=UTC (day), the time-based ones with "
    "timestamp.extractor=Record or RecordField; or blockgz.iceberg.partition.spec=none"
)


@dataclass(frozen=True)
class SpecField:
    """One partition field: its source column (or :data:`KAFKA_TIMESTAMP`), transform, name."""

    source: str
    transform: str
    name: str


def partition_plan(settings: PartitionerSettings, choice: str) -> tuple[SpecField, ...]:
    """The partition fields for ``settings`` (``choice``: ``auto`` or ``none``)."""
    if choice == "none" or isinstance(settings, DefaultSettings):
        return ()
    if isinstance(settings, FieldSettings):
        return tuple(SpecField(f, "identity", f.replace(".", "_")) for f in settings.fields)
    if settings.time_based:
        return (_time_field(settings),)
    raise _refused(f"{settings.name or 'this partitioner'} has no Iceberg equivalent")


def _time_field(settings: PartitionerSettings) -> SpecField:
    fixed: dict[type[PartitionerSettings], int] = {HourlySettings: HOUR_MS, DailySettings: DAY_MS}
    duration = fixed.get(type(settings))
    if isinstance(settings, TimeBasedSettings):
        duration = settings.duration_ms
    extractor = settings.extractor.lower().rsplit("$", 1)[-1].removesuffix("timestampextractor")
    if extractor == "record":
        source = KAFKA_TIMESTAMP
    elif extractor == "recordfield":
        source = settings.timestamp_field
    else:
        raise _refused(f"timestamp.extractor={settings.extractor} is not a column of the files")
    offsets = _utc_offsets(settings.timezone)
    if duration == HOUR_MS and all(o % 3600 == 0 for o in offsets):
        transform = "hour"
    elif duration == DAY_MS and offsets == {0}:
        transform = "day"
    else:
        raise _refused(
            f"partition.duration.ms={duration} in timezone {settings.timezone} is not one UTC "
            "hour or day"
        )
    name = ("timestamp" if source == KAFKA_TIMESTAMP else source.replace(".", "_")) + "_"
    return SpecField(source, transform, name + transform)


def _utc_offsets(zone: str) -> set[int]:
    """The zone's UTC offsets in seconds, in winter and in summer of this year."""
    tz = parse_timezone(zone or "UTC")
    year = datetime.now().year
    return {
        int(datetime(year, month, 1, tzinfo=tz).utcoffset().total_seconds())  # type: ignore[union-attr]
        for month in (1, 7)
    }


def _refused(why: str) -> ConfigError:
    return ConfigError(f"{PARTITION_SPEC}=auto: {why}; allowed: {_ALLOWED}")


def kafka_timestamp_column(names: list[str]) -> str | None:
    """The column of ``names`` holding Kafka's record timestamp, or ``None``.

    >>> kafka_timestamp_column(["id", "__kafka_timestamp"]), kafka_timestamp_column(["id"])
    ('__kafka_timestamp', None)
    """
    return next((c for c in KAFKA_TIMESTAMP_COLUMNS if c in names), None)


def check_table_settings(options: Options, object_extension: str, partitioning) -> None:
    """The sink's boundary check of ``blockgz.iceberg.*``: the values, Parquet objects, and a
    partitioner the table's spec can follow (:func:`partition_plan`)."""
    settings = IcebergSettings.from_options(options)
    check_parquet(settings, object_extension)
    if settings is not None:
        partition_plan(partitioning, settings.partition_spec)
