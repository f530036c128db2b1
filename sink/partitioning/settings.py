"""The partitioner options, read and checked once: :class:`PartitionerSettings`.

``partitioner.class`` names one of Confluent's partitioners (or a ``module:Class``). Each has
its own settings class (:class:`DefaultSettings`, :class:`FieldSettings`,
:class:`TimeBasedSettings`, :class:`DailySettings`, :class:`HourlySettings`, and
:class:`CustomSettings` for a user's class), registered by name in :data:`PARTITIONERS`; it
keeps what its partitioner needs, typed, and :meth:`PartitionerSettings.build` makes a fresh
partitioner in each write task. :func:`build_partitioner` does both at once. What a partitioner
can do is its own attribute (``Partitioner.partition_directories``), not a type check.

    >>> from blockgz.sink.records import KafkaRecord
    >>> build_partitioner({"partitioner.class": "daily", "locale": "en", "timezone": "UTC",
    ...     "timestamp.extractor": "Record"}).encode_partition(
    ...     KafkaRecord("t", 0, 0, 1_795_342_500_000, None, b"{}"))
    'year=2026/month=11/day=22'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from blockgz.archive.layout import Layout
from blockgz.errors import ConfigError
from blockgz.named import Registry
from blockgz.option_defs import OptionSet, declarer
from blockgz.options import Options, as_options
from blockgz.sink.partitioning.partitioners import (
    DailyPartitioner,
    DefaultPartitioner,
    FieldPartitioner,
    HourlyPartitioner,
    Partitioner,
    TimeBasedPartitioner,
    _field_list,
    _FixedTimePartitioner,
)
from blockgz.sink.partitioning.timestamps import _EXTRACTOR_ALIASES as _EXTRACTOR_NAMES
from blockgz.sink.partitioning.timestamps import CONFLUENT_PARTITIONERS, build_extractor
from blockgz.sink.plugins import import_named, instantiate

_DURATION_HINT = "a whole number of milliseconds > 0, e.g. 3600000 for hourly buckets"


_part = declarer("sink", "confluent")

_TIME = "time partitioners: "
#: The partitioner's options (the key layout's delimiters are
#: :data:`blockgz.archive.layout.KEY_OPTIONS`).
PARTITIONING_OPTIONS = OptionSet(
    _part(
        "partitioner.class",
        "text",
        "default",
        "`default`, `field`, `time`, `daily`, `hourly`, Confluent's class names, or `module:Class`",
    ),
    _part(
        "partition.field.name",
        "text",
        "",
        "field partitioner: comma list, dotted names; JSON values or decoded Avro records",
    ),
    _part("path.format", "text", "", _TIME + "Joda patterns such as `'year'=YYYY/'month'=MM`"),
    _part(
        "partition.duration.ms",
        "int",
        0,
        _TIME + "the span of one encoded partition",
        low=1,
        hint=_DURATION_HINT,
        shown="",
    ),
    _part("locale", "text", "", _TIME + "the locale of the path's names (`en`)"),
    _part(
        "timezone",
        "text",
        "",
        _TIME + "and scheduled rotation: IANA names, fixed offsets and Java's short ids "
        "(`PST`, `ECT`, ... as Java maps them)",
    ),
    _part(
        "timestamp.extractor",
        "text",
        "Wallclock",
        "`Wallclock`, `Record`, `RecordField`, or `module:Class`",
    ),
    _part("timestamp.field", "text", "timestamp", "`RecordField`: the field holding the time"),
    _part(
        "partition.path.lowercase",
        "flag",
        False,
        "lower-case encoded partitions (Athena)",
        origin="blockgz",
    ),
)
#: Every option key this module reads.
PARTITIONER_OPTIONS = frozenset(PARTITIONING_OPTIONS) | {"directory.delim", "file.delim"}


PARTITIONER_ALLOWED = (
    "default, field, time (or timebased), daily, hourly, their class names "
    f"{CONFLUENT_PARTITIONERS}{{Default,Field,TimeBased,Daily,Hourly}}Partitioner, or "
    "module:Class naming "
    "a blockgz.sink.partitioning.partitioners.Partitioner subclass"
)


def partitioner_kind(name: str) -> str:
    """``default``, ``field``, ``time``, ``daily``, ``hourly`` or ``custom`` for a class name.

    >>> partitioner_kind(CONFLUENT_PARTITIONERS + "DailyPartitioner")
    'daily'
    """
    return settings_class(name).name


def settings_class(name: str) -> type[PartitionerSettings]:
    """The settings class of ``partitioner.class=name``: a registered one, or
    :class:`CustomSettings` for a ``module:Class``."""
    name = name or "default"
    if name in PARTITIONERS:
        return PARTITIONERS.get(name)
    if ":" in name or ("." in name and not name.lower().startswith("io.confluent.")):
        return CustomSettings
    if name.lower().startswith("io.confluent."):
        raise ConfigError(
            f"partitioner.class: {name!r} is not available in blockgz; "
            f"allowed: {PARTITIONER_ALLOWED}"
        )
    raise ConfigError(f"partitioner.class: unknown value {name!r}; allowed: {PARTITIONER_ALLOWED}")


@dataclass(frozen=True)
class PartitionerSettings:
    """The partitioner options (Confluent's names and defaults unless noted), read once; one
    subclass per partitioner, registered in :data:`PARTITIONERS`.

    ``partitioner.class`` (``default``), ``partition.field.name``, ``path.format``,
    ``partition.duration.ms``, ``locale``, ``timezone``, ``timestamp.extractor``
    (``Wallclock``), ``timestamp.field`` (``timestamp``), ``directory.delim`` (``/``),
    ``file.delim`` (``+``) and blockgz's own ``partition.path.lowercase`` (``false``). Options
    another partitioner would need are ignored, as in Confluent (Daily and Hourly ignore
    ``path.format`` and the duration). A user's class (``module:Class`` partitioner or
    extractor) gets every sink option through its ``configure(options)``; that map is kept
    for it alone.

    >>> from blockgz.sink.records import KafkaRecord
    >>> PartitionerSettings.from_options(Options({"partitioner.class": "hourly",
    ...     "locale": "en", "timezone": "UTC"})).build().encode_partition(
    ...     KafkaRecord("t", 0, 0, 1_795_342_500_000, None, b"{}"))  # Wallclock: any hour
    'year=...'
    """

    #: ``partitioner.class``'s short name and the class names it is also known by.
    name: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()
    #: Options it cannot do without.
    required: ClassVar[tuple[str, ...]] = ()
    #: Whether records are placed by their time (an extractor reads it).
    time_based: ClassVar[bool] = False

    directory_delim: str = "/"
    file_delim: str = "+"
    lowercase: bool = False
    locale: str = ""
    timezone: str = ""
    extractor: str = "Wallclock"
    timestamp_field: str = "timestamp"
    plugin_options: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def kind(self) -> str:
        """``default``, ``field``, ``time``, ``daily``, ``hourly`` or ``custom``."""
        return self.name

    @classmethod
    def from_options(cls, options: Options, layout: Layout | None = None) -> PartitionerSettings:
        """Check every partitioner option and read it; the partitioner is built once to check.

        The delimiters come from ``layout`` when the caller has read it already.
        """
        layout = layout or Layout.from_options(options)
        name = PARTITIONING_OPTIONS.read(options, "partitioner.class")
        kind = settings_class(name)
        missing = [key for key in kind.required if not options.given(key)]
        if missing:
            raise ConfigError(
                f"partitioner.class={kind.name} needs {', '.join(missing)}; e.g. "
                + ", ".join(_EXAMPLES[key] for key in missing)
            )
        extractor = PARTITIONING_OPTIONS.read(options, "timestamp.extractor")
        settings = kind(
            directory_delim=layout.directory_delim,
            file_delim=layout.file_delim,
            lowercase=PARTITIONING_OPTIONS.read(options, "partition.path.lowercase"),
            locale=PARTITIONING_OPTIONS.read(options, "locale"),
            timezone=PARTITIONING_OPTIONS.read(options, "timezone"),
            extractor=extractor,
            timestamp_field=PARTITIONING_OPTIONS.read(options, "timestamp.field"),
            plugin_options=dict(options) if kind.takes_plugin_options(extractor) else {},
            **kind.own_settings(options, name),
        )
        settings.build()
        return settings

    @classmethod
    def own_settings(cls, options: Options, name: str) -> dict[str, Any]:
        """The settings of this partitioner alone, read from ``options``."""
        return {}

    @classmethod
    def takes_plugin_options(cls, extractor: str) -> bool:
        """Whether a user's class (the partitioner, or its ``extractor``) gets every option."""
        return cls.time_based and extractor.lower() not in _EXTRACTOR_NAMES

    def build(self) -> Partitioner:
        """A fresh partitioner (each write task builds its own)."""
        raise NotImplementedError

    def _common(self) -> dict[str, Any]:
        return {"directory_delim": self.directory_delim, "lowercase": self.lowercase}

    def _extractor(self):
        return build_extractor(self.extractor, self.timestamp_field, self.plugin_options)


def _aliases(cls: str, *more: str) -> tuple[str, ...]:
    """``more`` short names, then the class name bare and as Confluent spells it."""
    return (*more, cls, CONFLUENT_PARTITIONERS + cls)


@dataclass(frozen=True)
class DefaultSettings(PartitionerSettings):
    """``partitioner.class=default``: ``partition=<kafka partition>``."""

    name = "default"
    aliases = _aliases("DefaultPartitioner")

    def build(self) -> Partitioner:
        return DefaultPartitioner(self.directory_delim, self.lowercase)


@dataclass(frozen=True)
class FieldSettings(PartitionerSettings):
    """``partitioner.class=field``: ``f1=v1/f2=v2`` from ``partition.field.name``."""

    name = "field"
    aliases = _aliases("FieldPartitioner")
    fields: tuple[str, ...] = ()

    @classmethod
    def own_settings(cls, options: Options, name: str) -> dict[str, Any]:
        return {
            "fields": tuple(_field_list(PARTITIONING_OPTIONS.read(options, "partition.field.name")))
        }

    def build(self) -> Partitioner:
        return FieldPartitioner(self.fields, file_delim=self.file_delim, **self._common())


@dataclass(frozen=True)
class TimeBasedSettings(PartitionerSettings):
    """``partitioner.class=time``: ``path.format`` at the start of each time bucket."""

    name = "time"
    aliases = _aliases("TimeBasedPartitioner", "timebased")
    required = ("path.format", "partition.duration.ms", "locale", "timezone")
    time_based = True
    path_format: str = ""
    duration_ms: int = 0

    @classmethod
    def own_settings(cls, options: Options, name: str) -> dict[str, Any]:
        return {
            "path_format": PARTITIONING_OPTIONS.read(options, "path.format"),
            "duration_ms": PARTITIONING_OPTIONS.read(options, "partition.duration.ms"),
        }

    def build(self) -> Partitioner:
        return TimeBasedPartitioner(
            self.path_format,
            self.duration_ms,
            self.locale,
            self.timezone,
            self._extractor(),
            **self._common(),
        )


@dataclass(frozen=True)
class _FixedTimeSettings(PartitionerSettings):
    """Daily and hourly: time partitioners whose path format and bucket are their own."""

    required = ("locale", "timezone")
    time_based = True
    #: The partitioner class it builds.
    partitioner: ClassVar[type[_FixedTimePartitioner]]

    def build(self) -> Partitioner:
        return self.partitioner(self.locale, self.timezone, self._extractor(), **self._common())


@dataclass(frozen=True)
class DailySettings(_FixedTimeSettings):
    """``partitioner.class=daily``: ``year=YYYY/month=MM/day=dd``."""

    name = "daily"
    aliases = _aliases("DailyPartitioner")
    partitioner = DailyPartitioner


@dataclass(frozen=True)
class HourlySettings(_FixedTimeSettings):
    """``partitioner.class=hourly``: ``year=YYYY/month=MM/day=dd/hour=HH``."""

    name = "hourly"
    aliases = _aliases("HourlyPartitioner")
    partitioner = HourlyPartitioner


@dataclass(frozen=True)
class CustomSettings(PartitionerSettings):
    """``partitioner.class=module:Class``: a :class:`Partitioner` subclass of the user's, given
    every sink option through its ``configure``."""

    name = "custom"
    custom_class: str = ""

    @classmethod
    def own_settings(cls, options: Options, name: str) -> dict[str, Any]:
        return {"custom_class": name}

    @classmethod
    def takes_plugin_options(cls, extractor: str) -> bool:
        return True

    def build(self) -> Partitioner:
        spec = self.custom_class
        cls = import_named(spec, "partitioner.class", PARTITIONER_ALLOWED)
        if not (isinstance(cls, type) and issubclass(cls, Partitioner)):
            raise ConfigError(
                f"partitioner.class: {spec!r} is not a subclass of "
                "blockgz.sink.partitioning.partitioners.Partitioner; "
                f"allowed: {PARTITIONER_ALLOWED}"
            )
        partitioner = instantiate(cls, spec, "partitioner.class")
        partitioner.directory_delim = self.directory_delim
        partitioner.configure(self.plugin_options)
        return partitioner


#: ``partitioner.class``: Confluent's partitioners by short and class name (a ``module:Class``
#: is :class:`CustomSettings`).
PARTITIONERS: Registry[type[PartitionerSettings]] = Registry("partitioner.class")
for _settings in (DefaultSettings, FieldSettings, TimeBasedSettings, DailySettings, HourlySettings):
    PARTITIONERS.register(_settings)


def build_partitioner(options: Mapping[str, Any]) -> Partitioner:
    """Check the partitioner options and build the partitioner they describe.

    >>> from blockgz.sink.records import KafkaRecord
    >>> build_partitioner({"partitioner.class": "field", "partition.field.name": "Region",
    ...                    "partition.path.lowercase": "true"}).encode_partition(
    ...     KafkaRecord("t", 0, 0, None, None, b'{"Region": "EU-West"}'))
    'region=eu-west'
    >>> build_partitioner({"partitioner.class": "daily", "locale": "en"})
    Traceback (most recent call last):
    ...
    blockgz.errors.ConfigError: partitioner.class=daily needs timezone; ...
    """
    return PartitionerSettings.from_options(as_options(options)).build()


_EXAMPLES = {
    "path.format": "path.format='year'=YYYY/'month'=MM/'day'=dd/'hour'=HH",
    "partition.duration.ms": "partition.duration.ms=3600000",
    "locale": "locale=en (a CLDR locale such as en_US, de_DE)",
    "timezone": "timezone=UTC (or an IANA name such as Europe/Berlin)",
}
