"""``spark.read.format("blockgz").load(url)``: an archive as a DataFrame of Kafka's columns.

Conditions on ``topic``, ``partition`` and ``offset`` (``=``, ``<``, ``<=``, ``>``, ``>=``,
``IN``, ``BETWEEN``) are pushed into planning (``pushFilters``): they choose the partitions,
objects and blocks read (:mod:`blockgz.reader.spark.scan_plan`), and the rows a block holds outside
them
are dropped as it is read. Conditions on ``timestamp`` skip the objects whose time range (kept
per file in the export's manifests) and the blocks whose time range (kept per block in the
index) lies outside them. Spark evaluates every condition again
on what comes back, so a pushed condition can only save work, never change a result. Needs
``spark.sql.python.filterPushdown.enabled=true`` (blockgz's sessions set it).

Options: the archive's (S3 settings and key layout, as :func:`blockgz.reader.open_archive` takes
them), ``topics`` (comma-separated) or ``topics.regex``, ``committed`` (default ``true``: only
what the export's manifests committed, where there are manifests; ``false``: every object
listed), ``blockgz.split.size`` (compressed bytes per task, ``64MiB`` by default) and
``value.schema`` (a DDL field list such as ``"id BIGINT, name STRING"``: values are parsed as
JSON into a struct of it instead of returned as bytes) and ``value.format`` (``binary``, the
default; ``json`` with ``value.schema``; ``avro``: Avro objects' values in the type of the
newest writer schema of the ``.avro`` objects read (see :func:`newest_avro_schema`), as Spark's
``from_avro`` maps it, values written with older compatible schemas read into it by Avro's
schema resolution (fields added since get their defaults); with
``schema.registry.url`` too, values kept in Confluent's wire format by a bytearray export are
decoded through the registry into the newest schema of ``value.subject``, default
``<topic>-value``: see :mod:`blockgz.formats.avro.wire_decode`; ``.avro`` objects are then read
into that
schema too).

Example (needs Spark, so not a doctest)::

    df = (spark.read.format("blockgz")
          .option("store.url", "http://127.0.0.1:9000")
          .load("s3://archive/")
          .where("topic = 'orders' AND partition = 0 AND offset BETWEEN 1000 AND 1009"))
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
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
from blockgz.reader.reading.archive import open_archive
from blockgz.reader.reading.read_options import ARCHIVE_OPTIONS, check_reader_options
from blockgz.reader.spark.scan_plan import ScanFilter, Split, plan_scan
from blockgz.reader.spark.scan_read import split_batches
from blockgz.reader.spark.spark_options import SPARK_READ_OPTIONS
from blockgz.runtime.gc_control import settle as settle_heap

if TYPE_CHECKING:
    from blockgz.formats.avro.wire_decode import WireAvroValues

#: Kafka's columns, as Spark's Kafka source gives them.
KAFKA_COLUMNS = (
    "key BINARY, value {value}, topic STRING, partition INT, offset BIGINT, "
    "timestamp TIMESTAMP, timestampType INT, headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
)


def _read(options: Any, name: str) -> Any:
    return SPARK_READ_OPTIONS.read(options, name)


#: Options of this reader that are not the archive's (:func:`blockgz.reader.open_archive` takes the
#: rest).
READ_OPTIONS = tuple(name for name in SPARK_READ_OPTIONS if not name.endswith("."))


def archive_schema(
    options: Mapping[str, str],
    wire: WireAvroValues | None = None,
    avro_schema: str | None = None,
) -> str:
    """The DataFrame's schema as DDL: ``value`` is a struct when ``value.schema`` is given,
    or, with ``value.format=avro``, the type of the Avro reader schema (``wire``'s for
    wire-format values, else ``avro_schema``: see :func:`avro_reader_schema`; each made from
    ``options`` if not given)."""
    opts = as_options(options)
    value_format = _read(opts, "value.format")
    value = _read(opts, "value.schema")
    if value:
        return KAFKA_COLUMNS.format(value=f"STRUCT<{value}>")
    if value_format == "json":
        raise ConfigError(
            "value.format=json needs value.schema, the fields to parse each value into "
            '(e.g. "id BIGINT, name STRING")'
        )
    if value_format == "avro":
        from blockgz.formats.avro.arrow_types import avro_to_ddl

        wire = wire or wire_avro_values(options)
        if wire is not None:
            return KAFKA_COLUMNS.format(value=avro_to_ddl(wire.reader_schema))
        schema = avro_schema or newest_avro_schema(options)
        return KAFKA_COLUMNS.format(value=avro_to_ddl(schema))
    return KAFKA_COLUMNS.format(value="BINARY")


def avro_reader_schema(options: Mapping[str, str], wire: WireAvroValues | None) -> str | None:
    """The Avro schema (JSON text) every Avro value is read into, or ``None`` when values are
    not read as Avro (no ``value.format=avro``, or a ``value.schema`` of its own): the
    registry's newest of the subject with a registry (``wire``), else the newest writer schema
    of the archive's ``.avro`` objects."""
    opts = as_options(options)
    if _read(opts, "value.format") != "avro":
        return None
    if _read(opts, "value.schema"):
        return None
    return wire.reader_schema if wire is not None else newest_avro_schema(options)


def wire_avro_values(options: Mapping[str, str]) -> WireAvroValues | None:
    """With ``value.format=avro`` and a registry (``schema.registry.url``, or the connector's
    ``value.converter.schema.registry.url``): values in Confluent's wire format, decoded into
    the newest schema of ``value.subject`` (default ``<topic>-value``)."""
    opts = as_options(options)
    if _read(opts, "value.format") != "avro":
        return None
    if not (opts.text("schema.registry.url") or opts.text("value.converter.schema.registry.url")):
        return None
    from blockgz.formats.avro.wire_decode import WireAvroValues, wire_subject
    from blockgz.registry import RegistrySettings

    settings = RegistrySettings.from_options(options, "value.converter")
    topics = [t.strip() for t in _read(opts, "topics").split(",") if t.strip()]
    if not topics and not _read(opts, "value.subject"):
        topics = _archive_topics(options)
    return WireAvroValues.for_subject(settings, wire_subject(options, topics))


def _archive_topics(options: Mapping[str, str]) -> list[str]:
    """The topics the read covers (all of the archive's, or those ``topics.regex`` matches)."""
    import re

    pattern = options.get("topics.regex")
    archive_options = {k: v for k, v in options.items() if k not in READ_OPTIONS}
    with open_archive(options.get("path") or "", archive_options) as archive:
        found = archive.topics()
    return [t for t in found if not pattern or re.fullmatch(pattern, t)]


def newest_avro_schema(options: Mapping[str, str]) -> str:
    """The newest writer schema (JSON text) of the ``.avro`` objects of the topics read: the
    reader schema of ``value.format=avro`` without a registry.

    How "newest" is chosen: in each partition, the schema of its ``.avro`` object with the
    highest start offset (with ``committed=true``, the default, the last committed one): a
    partition's records are written in offset order, so its schema only moves forward. Across
    partitions (a quiet partition may still hold an older version), the one that can read all
    the others by Avro's schema resolution (:func:`blockgz.formats.avro.arrow_types.can_read`); of
    several
    such, the one whose last object holds the latest record timestamp (the time range the
    export's catalog keeps, else its index's last block's), then one that keeps every field
    of the others (an older version can read a newer one, by dropping the fields added), then
    the last of the sorted topics and partitions. Values written with older versions are read
    into it by that resolution (:func:`blockgz.formats.avro.arrow_types.resolver`), as a consumer
    holding
    it would read them.
    """
    import re

    from blockgz.formats.avro.arrow_types import can_read, keeps_fields

    path = options.get("path") or ""
    archive_options = {k: v for k, v in options.items() if k not in READ_OPTIONS}
    archive_options["committed"] = "true" if ARCHIVE_OPTIONS.read(options, "committed") else "false"
    wanted = [t.strip() for t in options.get("topics", "").split(",") if t.strip()]
    pattern = options.get("topics.regex")
    found: list[tuple[int, int, str]] = []  # (latest timestamp or -1, order, schema)
    with open_archive(path, archive_options) as archive:
        topics = wanted or [t for t in archive.topics() if not pattern or re.fullmatch(pattern, t)]
        for topic in topics:
            for partition in archive.partitions(topic):
                refs = [r for r in archive.objects(topic, partition) if r.is_avro]
                if not refs:
                    continue
                last = max(refs, key=lambda r: r.start_offset)
                stamp = last.max_timestamp
                if stamp is None and last.has_index and archive.index(last).chunks:
                    stamp = archive.index(last).chunks[-1].max_timestamp
                found.append(
                    (-1 if stamp is None else stamp, len(found), archive.avro_schema(last))
                )
    if not found:
        raise ConfigError(
            f"value.format=avro: no .avro object found under {path} to take the schema from; "
            "give it as value.schema"
        )
    newest: dict[str, tuple[int, int]] = {}
    for stamp, order, schema in found:
        newest[schema] = max(newest.get(schema, (stamp, order)), (stamp, order))
    if len(newest) == 1:
        return next(iter(newest))

    def rank(schema: str) -> tuple[bool, int, bool, int]:
        stamp, order = newest[schema]
        reads_all = all(can_read(schema, other) for other in newest)
        return reads_all, stamp, all(keeps_fields(schema, other) for other in newest), order

    # Of the schemas that read every other, the latest stamped; with no stamps, one that
    # drops no field another has (an older version reads a newer one by dropping its fields).
    return max(newest, key=rank)


class SplitPartition(InputPartition):
    """One Spark task: the blocks of one :class:`~blockgz.reader.spark.scan_plan.Split`."""

    def __init__(self, split: Split):
        super().__init__(split)
        self.split = split


class ArchiveReader(DataSourceReader):
    """Plans on the driver (filters, then splits), reads splits on the executors."""

    def __init__(
        self,
        options: Mapping[str, str],
        schema: Any,
        wire: WireAvroValues | None = None,
        avro_schema: str | None = None,
    ):
        self.options = dict(options)
        if not self.options.get("path"):
            raise ConfigError(
                'spark.read.format("blockgz") needs the archive: .load("s3://bucket/prefix") '
                "or a directory path"
            )
        opts = as_options(self.options)
        self.split_bytes = SPARK_READ_OPTIONS.read(opts, "blockgz.split.size")
        topics = _read(opts, "topics")
        self.topics = [t.strip() for t in topics.split(",") if t.strip()] if topics else None
        self.topics_regex = _read(opts, "topics.regex") or None
        self.committed = ARCHIVE_OPTIONS.read(opts, "committed")
        self.value_type = _value_arrow_type(schema)
        self.wire = wire or wire_avro_values(self.options)
        #: Avro values (of .avro objects) are resolved into this schema (None: as written).
        self.avro_schema = avro_schema or (
            avro_reader_schema(self.options, self.wire) if self.value_type is not None else None
        )
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

    def read(self, partition: InputPartition) -> Iterator[Any]:
        assert isinstance(partition, SplitPartition)  # what partitions() made
        # collections skip the worker's long-lived objects (blockgz.runtime.gc_control)
        settle_heap()
        with self._archive() as archive:
            yield from split_batches(
                archive,
                partition.split,
                self.scan.offsets,
                value_type=self.value_type,
                wire=self.wire,
                reader_schema=self.avro_schema,
            )


class ArchiveReadSource:
    """What ``format("blockgz")`` adds for reading (mixed into the sink's data source)."""

    options: MutableMapping[str, str]  # set by DataSource, which this mixes into

    def schema(self) -> str:
        # Spark lower-cases a data source's option names.
        check_reader_options(
            self.options,
            'spark.read.format("blockgz")',
            more=(SPARK_READ_OPTIONS,),
            ignore_case=True,
        )
        # PySpark pickles the source after schema() and calls reader() on that copy, so the
        # decoder travels with it: the registry's newest schema is asked for once per load and
        # the DataFrame's type and the decoding cannot disagree.
        self._wire_values = wire_avro_values(self.options)
        self._avro_schema = avro_reader_schema(self.options, self._wire_values)
        return archive_schema(self.options, self._wire_values, self._avro_schema)

    def reader(self, schema: Any) -> ArchiveReader:
        return ArchiveReader(
            self.options,
            schema,
            getattr(self, "_wire_values", None),
            getattr(self, "_avro_schema", None),
        )


def narrowed(scan: ScanFilter, condition: Any) -> ScanFilter:
    """The scan narrowed by one pushed condition it understands (else unchanged)."""
    attribute = getattr(condition, "attribute", None)
    if attribute is None or len(attribute) != 1:
        return scan
    column, value = attribute[0], getattr(condition, "value", None)
    if column == "topic":
        if isinstance(condition, EqualTo) and isinstance(value, str):
            return scan.with_topics([value])
        if isinstance(condition, In) and all(isinstance(v, str) for v in condition.value):
            return scan.with_topics(condition.value)
        return scan
    if column == "timestamp":
        return _narrowed_in_time(scan, condition, value)
    if column not in ("partition", "offset"):
        return scan
    if isinstance(condition, In):
        if all(isinstance(v, int) for v in condition.value):
            return scan.with_range(column, points=condition.value)
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
