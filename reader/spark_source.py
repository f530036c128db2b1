"""``spark.read.format("blockgz").load(url)``: an archive as a DataFrame of Kafka's columns.

Conditions on ``topic``, ``partition`` and ``offset`` (``=``, ``<``, ``<=``, ``>``, ``>=``,
``IN``, ``BETWEEN``) are pushed into planning (``pushFilters``): they choose the partitions,
objects and blocks read (:mod:`reader.scan_plan`), and the rows a block holds outside them are
dropped as it is read. Conditions on ``timestamp`` skip the objects whose time range (kept
per file in the export's manifests) and the blocks whose time range (kept per block in the
index) lies outside them. Spark evaluates every condition again
on what comes back, so a pushed condition can only save work, never change a result. Needs
``spark.sql.python.filterPushdown.enabled=true`` (blockgz's sessions set it).

Options: the archive's (S3 settings and key layout, as :func:`reader.open_archive` takes
them), ``topics`` (comma-separated) or ``topics.regex``, ``committed`` (default ``true``: only
what the export's manifests committed, where there are manifests; ``false``: every object
listed), ``blockgz.split.size`` (compressed bytes per task, default 64 MiB) and
``value.schema`` (a DDL field list such as ``"id BIGINT, name STRING"``: values are parsed as
JSON into a struct of it instead of returned as bytes) and ``value.format`` (``binary``, the
default; ``json`` with ``value.schema``; ``avro``: Avro objects' values in their own schema's
type, taken from the first ``.avro`` object, as Spark's ``from_avro`` maps it; with
``schema.registry.url`` too, values kept in Confluent's wire format by a bytearray export are
decoded through the registry into the newest schema of ``value.subject``, default
``<topic>-value``: see :mod:`reader.wire_avro`).

Example (needs Spark, so not a doctest)::

    df = (spark.read.format("blockgz")
          .option("store.url", "http://127.0.0.1:9000")
          .load("s3://archive/")
          .where("topic = 'orders' AND partition = 0 AND offset BETWEEN 1000 AND 1009"))
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSourceReader,
    EqualTo,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)

from blockgz.errors import ConfigError
from blockgz.options import as_options
from reader.archive import open_archive
from reader.scan_plan import DEFAULT_SPLIT_BYTES, ScanFilter, Split, plan_scan
from reader.scan_read import split_batches

if TYPE_CHECKING:
    from reader.wire_avro import WireAvroValues

#: Kafka's columns, as Spark's Kafka source gives them.
KAFKA_COLUMNS = (
    "key BINARY, value {value}, topic STRING, partition INT, offset BIGINT, "
    "timestamp TIMESTAMP, timestampType INT, headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
)
#: Options of this reader (the archive's own come on top).
READ_OPTIONS = (
    "path",
    "topics",
    "topics.regex",
    "blockgz.split.size",
    "value.schema",
    "value.format",
    "value.subject",
)
VALUE_FORMATS = ("binary", "json", "avro")


def archive_schema(options: dict[str, str], wire: WireAvroValues | None = None) -> str:
    """The DataFrame's schema as DDL: ``value`` is a struct when ``value.schema`` is given,
    or, with ``value.format=avro``, the type of the archive's Avro schema (``wire``'s reader
    schema for wire-format values; made from ``options`` if not given)."""
    opts = as_options(options)
    value_format = opts.choice("value.format", VALUE_FORMATS, "binary")
    value = opts.text("value.schema").strip()
    if value:
        return KAFKA_COLUMNS.format(value=f"STRUCT<{value}>")
    if value_format == "json":
        raise ConfigError(
            "value.format=json needs value.schema, the fields to parse each value into "
            '(e.g. "id BIGINT, name STRING")'
        )
    if value_format == "avro":
        wire = wire or wire_avro_values(options)
        if wire is not None:
            from reader.avro_types import avro_to_ddl

            return KAFKA_COLUMNS.format(value=avro_to_ddl(wire.reader_schema))
        return KAFKA_COLUMNS.format(value=_archive_avro_type(options))
    return KAFKA_COLUMNS.format(value="BINARY")


def wire_avro_values(options: dict[str, str]) -> WireAvroValues | None:
    """With ``value.format=avro`` and a registry (``schema.registry.url``, or the connector's
    ``value.converter.schema.registry.url``): values in Confluent's wire format, decoded into
    the newest schema of ``value.subject`` (default ``<topic>-value``)."""
    opts = as_options(options)
    if opts.choice("value.format", VALUE_FORMATS, "binary") != "avro":
        return None
    if not (opts.text("schema.registry.url") or opts.text("value.converter.schema.registry.url")):
        return None
    from blockgz.registry import RegistrySettings
    from reader.wire_avro import WireAvroValues, wire_subject

    settings = RegistrySettings.from_options(options, "value.converter")
    topics = [t.strip() for t in opts.text("topics").split(",") if t.strip()]
    if not topics and not opts.text("value.subject"):
        topics = _archive_topics(options)
    return WireAvroValues.for_subject(settings, wire_subject(options, topics))


def _archive_topics(options: dict[str, str]) -> list[str]:
    """The topics the read covers (all of the archive's, or those ``topics.regex`` matches)."""
    import re

    pattern = options.get("topics.regex")
    archive_options = {k: v for k, v in options.items() if k not in READ_OPTIONS}
    with open_archive(options.get("path") or "", archive_options) as archive:
        found = archive.topics()
    return [t for t in found if not pattern or re.fullmatch(pattern, t)]


def _archive_avro_type(options: dict[str, str]) -> str:
    """The Spark type of the values of the first Avro object of the topics read."""
    from reader.avro_types import avro_to_ddl

    path = options.get("path") or ""
    archive_options = {k: v for k, v in options.items() if k not in READ_OPTIONS}
    wanted = [t.strip() for t in options.get("topics", "").split(",") if t.strip()]
    with open_archive(path, archive_options) as archive:
        for topic in wanted or archive.topics():
            for partition in archive.partitions(topic):
                for ref in archive.objects(topic, partition):
                    if ref.is_avro:
                        return avro_to_ddl(archive.avro_schema(ref), where=f"{topic} value")
    raise ConfigError(
        f"value.format=avro: no .avro object found under {path} to take the schema from; "
        "give it as value.schema"
    )


class SplitPartition(InputPartition):
    """One Spark task: the blocks of one :class:`~reader.scan_plan.Split`."""

    def __init__(self, split: Split):
        super().__init__(split)
        self.split = split


class ArchiveReader(DataSourceReader):
    """Plans on the driver (filters, then splits), reads splits on the executors."""

    def __init__(self, options: dict[str, str], schema: Any, wire: WireAvroValues | None = None):
        self.options = dict(options)
        if not self.options.get("path"):
            raise ConfigError(
                'spark.read.format("blockgz") needs the archive: .load("s3://bucket/prefix") '
                "or a directory path"
            )
        opts = as_options(self.options)
        self.split_bytes = opts.integer("blockgz.split.size", DEFAULT_SPLIT_BYTES, low=1)
        topics = opts.text("topics")
        self.topics = [t.strip() for t in topics.split(",") if t.strip()] if topics else None
        self.topics_regex = opts.text("topics.regex") or None
        self.committed = opts.flag("committed", True)
        self.value_type = _value_arrow_type(schema)
        self.wire = wire or wire_avro_values(self.options)
        self.scan = ScanFilter()

    def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
        """Narrow the scan by every condition it understands; hand all of them back, so
        that Spark checks each row again (pruning can only skip work)."""
        for condition in filters:
            self.scan = narrowed(self.scan, condition)
            yield condition

    def _archive(self):
        archive_options = {k: v for k, v in self.options.items() if k not in READ_OPTIONS}
        archive_options["committed"] = "true" if self.committed else "false"
        return open_archive(self.options["path"], archive_options)

    def partitions(self) -> list[SplitPartition]:
        with self._archive() as archive:
            splits = plan_scan(
                archive,
                self.scan,
                topics=self.topics,
                topics_regex=self.topics_regex,
                split_bytes=self.split_bytes,
            )
        return [SplitPartition(s) for s in splits] or [SplitPartition(Split(()))]

    def read(self, partition: SplitPartition) -> Iterator[Any]:
        with self._archive() as archive:
            yield from split_batches(
                archive,
                partition.split,
                self.scan.offsets,
                value_type=self.value_type,
                wire=self.wire,
            )


class ArchiveReadSource:
    """What ``format("blockgz")`` adds for reading (mixed into the sink's data source)."""

    options: dict[str, str]

    def schema(self) -> str:
        # PySpark pickles the source after schema() and calls reader() on that copy, so the
        # decoder travels with it: the registry's newest schema is asked for once per load and
        # the DataFrame's type and the decoding cannot disagree.
        self._wire_values = wire_avro_values(self.options)
        return archive_schema(self.options, self._wire_values)

    def reader(self, schema: Any) -> ArchiveReader:
        return ArchiveReader(self.options, schema, getattr(self, "_wire_values", None))


def narrowed(scan: ScanFilter, condition: Any) -> ScanFilter:
    """The scan narrowed by one pushed condition it understands (else unchanged)."""
    attribute = getattr(condition, "attribute", None)
    if attribute is None or len(attribute) != 1:
        return scan
    column, value = attribute[0], getattr(condition, "value", None)
    if column == "topic":
        if isinstance(condition, EqualTo) and isinstance(value, str):
            return scan.with_topics([value])
        if isinstance(condition, In) and all(isinstance(v, str) for v in value):
            return scan.with_topics(value)
        return scan
    if column == "timestamp":
        return _narrowed_in_time(scan, condition, value)
    if column not in ("partition", "offset"):
        return scan
    if isinstance(condition, In):
        if all(isinstance(v, int) for v in value):
            return scan.with_range(column, points=value)
        return scan
    if not isinstance(value, int) or isinstance(value, bool):
        return scan
    if isinstance(condition, EqualTo):
        return scan.with_range(column, points=[value])
    if isinstance(condition, GreaterThan):
        return scan.with_range(column, low=value + 1)
    if isinstance(condition, GreaterThanOrEqual):
        return scan.with_range(column, low=value)
    if isinstance(condition, LessThan):
        return scan.with_range(column, high=value - 1)
    if isinstance(condition, LessThanOrEqual):
        return scan.with_range(column, high=value)
    return scan


#: A timestamp without a zone could be in any of them: a window widened by a day either side
#: still contains every record it could mean.
_ANY_ZONE_MS = 24 * 3600 * 1000


def _epoch_ms_bounds(value: Any) -> tuple[int, int] | None:
    """Epoch ms ``(low, high)`` surely containing the instant of a filter's timestamp value.

    >>> import datetime as dt
    >>> _epoch_ms_bounds(dt.datetime(1970, 1, 1, 0, 0, 1, 500, tzinfo=dt.UTC))
    (1000, 1001)
    """
    import datetime as dt

    if not isinstance(value, dt.datetime):
        return None
    one = dt.timedelta(microseconds=1)
    if value.tzinfo is None:
        micros = (value - dt.datetime(1970, 1, 1)) // one
        return micros // 1000 - _ANY_ZONE_MS, -(-micros // 1000) + _ANY_ZONE_MS
    micros = (value - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // one
    return micros // 1000, -(-micros // 1000)


def _narrowed_in_time(scan: ScanFilter, condition: Any, value: Any) -> ScanFilter:
    """A condition on ``timestamp`` as a window of epoch ms. Kafka stamps records in whole
    milliseconds, so ``t < v`` means ``t <= ceil(v) - 1`` and ``t > v`` means ``t >= floor(v)
    + 1``; a window only ever prunes objects that surely hold no matching record."""
    values = value if isinstance(condition, In) else (value,)
    bounds = [_epoch_ms_bounds(v) for v in values]
    if not bounds or any(b is None for b in bounds):
        return scan
    floor = min(b[0] for b in bounds)  # type: ignore[index]
    ceil = max(b[1] for b in bounds)  # type: ignore[index]
    if isinstance(condition, (EqualTo, In)):
        return scan.with_range("timestamp", low=floor, high=ceil)
    if isinstance(condition, GreaterThan):
        return scan.with_range("timestamp", low=floor + 1)
    if isinstance(condition, GreaterThanOrEqual):
        return scan.with_range("timestamp", low=ceil)
    if isinstance(condition, LessThan):
        return scan.with_range("timestamp", high=ceil - 1)
    if isinstance(condition, LessThanOrEqual):
        return scan.with_range("timestamp", high=floor)
    return scan


def _value_arrow_type(schema: Any) -> Any:
    """The Arrow type of ``value`` unless it is bytes (parsed JSON, or Avro's type)."""
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import BinaryType

    field = schema["value"] if "value" in schema.fieldNames() else None
    if field is None or isinstance(field.dataType, BinaryType):
        return None
    return to_arrow_type(field.dataType, timezone="UTC")
