"""The partitioner options, read and checked once: :class:`PartitionerSettings`.

``partitioner.class`` names one of Confluent's partitioners (or a ``module:Class``); the
settings object keeps what it needs, typed, and :meth:`PartitionerSettings.build` makes a fresh
partitioner in each write task. :func:`build_partitioner` does both at once.

    >>> from sink.records import KafkaRecord
    >>> build_partitioner({"partitioner.class": "daily", "locale": "en", "timezone": "UTC",
    ...     "timestamp.extractor": "Record"}).encode_partition(
    ...     KafkaRecord("t", 0, 0, 1_795_342_500_000, None, b"{}"))
    'year=2026/month=11/day=22'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from blockgz.archive.layout import Layout
from blockgz.errors import ConfigError
from blockgz.options import Options, as_options
from sink.partitioning.partitioners import (
    DailyPartitioner,
    DefaultPartitioner,
    FieldPartitioner,
    HourlyPartitioner,
    Partitioner,
    TimeBasedPartitioner,
    _field_list,
)
from sink.partitioning.timestamps import _EXTRACTOR_ALIASES as _EXTRACTOR_NAMES
from sink.partitioning.timestamps import CONFLUENT_PARTITIONERS, build_extractor
from sink.plugins import import_named, instantiate

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


_KINDS = {
    "default": "DefaultPartitioner",
    "field": "FieldPartitioner",
    "time": "TimeBasedPartitioner",
    "daily": "DailyPartitioner",
    "hourly": "HourlyPartitioner",
}
_PARTITIONER_ALIASES = {"timebased": "time"}
for _kind, _cls in _KINDS.items():
    for _spelling in (_kind, _cls, CONFLUENT_PARTITIONERS + _cls):
        _PARTITIONER_ALIASES[_spelling.lower()] = _kind

PARTITIONER_ALLOWED = (
    "default, field, time (or timebased), daily, hourly, their class names "
    f"{CONFLUENT_PARTITIONERS}{{Default,Field,TimeBased,Daily,Hourly}}Partitioner, or "
    "module:Class naming "
    "a sink.partitioning.partitioners.Partitioner subclass"
)


def partitioner_kind(name: str) -> str:
    """``default``, ``field``, ``time``, ``daily``, ``hourly`` or ``custom`` for a class name.

    >>> partitioner_kind(CONFLUENT_PARTITIONERS + "DailyPartitioner")
    'daily'
    """
    name = name or "default"
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


@dataclass(frozen=True)
class PartitionerSettings:
    """The partitioner options (Confluent's names and defaults unless noted), read once.

    ``partitioner.class`` (``default``), ``partition.field.name``, ``path.format``,
    ``partition.duration.ms``, ``locale``, ``timezone``, ``timestamp.extractor``
    (``Wallclock``), ``timestamp.field`` (``timestamp``), ``directory.delim`` (``/``),
    ``file.delim`` (``+``) and blockgz's own ``partition.path.lowercase`` (``false``). Options
    another partitioner would need are ignored, as in Confluent (Daily and Hourly ignore
    ``path.format`` and the duration). A user's class (``module:Class`` partitioner or
    extractor) gets every sink option through its ``configure(options)``; that map is kept
    for it alone.

    >>> from sink.records import KafkaRecord
    >>> PartitionerSettings.from_options(Options({"partitioner.class": "hourly",
    ...     "locale": "en", "timezone": "UTC"})).build().encode_partition(
    ...     KafkaRecord("t", 0, 0, 1_795_342_500_000, None, b"{}"))  # Wallclock: any hour
    'year=...'
    """

    kind: str = "default"
    directory_delim: str = "/"
    file_delim: str = "+"
    lowercase: bool = False
    fields: tuple[str, ...] = ()
    path_format: str = ""
    duration_ms: int = 0
    locale: str = ""
    timezone: str = ""
    extractor: str = "Wallclock"
    timestamp_field: str = "timestamp"
    custom_class: str = ""
    plugin_options: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_options(cls, options: Options, layout: Layout | None = None) -> PartitionerSettings:
        """Check every partitioner option and read it; the partitioner is built once to check.

        The delimiters come from ``layout`` when the caller has read it already.
        """
        layout = layout or Layout.from_options(options)
        name = options.text("partitioner.class", "default")
        kind = partitioner_kind(name)
        extractor = options.text("timestamp.extractor", "Wallclock")
        time_based = kind in ("time", "daily", "hourly")
        if time_based:
            required = ["locale", "timezone"]
            if kind == "time":
                required = ["path.format", "partition.duration.ms", *required]
            missing = [key for key in required if not options.given(key)]
            if missing:
                raise ConfigError(
                    f"partitioner.class={kind} needs {', '.join(missing)}; e.g. "
                    + ", ".join(_EXAMPLES[key] for key in missing)
                )
        plugin = kind == "custom" or (time_based and extractor.lower() not in _EXTRACTOR_NAMES)
        settings = cls(
            kind=kind,
            directory_delim=layout.directory_delim,
            file_delim=layout.file_delim,
            lowercase=options.flag("partition.path.lowercase", False),
            fields=tuple(_field_list(options.text("partition.field.name")))
            if kind == "field"
            else (),
            path_format=options.text("path.format") if kind == "time" else "",
            duration_ms=options.integer("partition.duration.ms", 0, low=1, hint=_DURATION_HINT)
            if kind == "time"
            else 0,
            locale=options.text("locale"),
            timezone=options.text("timezone"),
            extractor=extractor,
            timestamp_field=options.text("timestamp.field", "timestamp"),
            custom_class=name if kind == "custom" else "",
            plugin_options=dict(options) if plugin else {},
        )
        settings.build()
        return settings

    def build(self) -> Partitioner:
        """A fresh partitioner (each write task builds its own)."""
        common: dict[str, Any] = {
            "directory_delim": self.directory_delim,
            "lowercase": self.lowercase,
        }
        if self.kind == "default":
            return DefaultPartitioner(self.directory_delim, self.lowercase)
        if self.kind == "field":
            return FieldPartitioner(self.fields, file_delim=self.file_delim, **common)
        if self.kind == "custom":
            return self._custom()
        extractor = build_extractor(self.extractor, self.timestamp_field, self.plugin_options)
        if self.kind == "daily":
            return DailyPartitioner(self.locale, self.timezone, extractor, **common)
        if self.kind == "hourly":
            return HourlyPartitioner(self.locale, self.timezone, extractor, **common)
        return TimeBasedPartitioner(
            self.path_format, self.duration_ms, self.locale, self.timezone, extractor, **common
        )

    def _custom(self) -> Partitioner:
        spec = self.custom_class
        cls = import_named(spec, "partitioner.class", PARTITIONER_ALLOWED)
        if not (isinstance(cls, type) and issubclass(cls, Partitioner)):
            raise ConfigError(
                f"partitioner.class: {spec!r} is not a subclass of "
                f"sink.partitioning.partitioners.Partitioner; allowed: {PARTITIONER_ALLOWED}"
            )
        partitioner = instantiate(cls, spec, "partitioner.class")
        partitioner.directory_delim = self.directory_delim
        partitioner.configure(self.plugin_options)
        return partitioner

    @property
    def time_based(self) -> bool:
        return self.kind in ("time", "daily", "hourly")


def build_partitioner(options: Mapping[str, Any]) -> Partitioner:
    """Check the partitioner options and build the partitioner they describe.

    >>> from sink.records import KafkaRecord
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


_DURATION_HINT = "a whole number of milliseconds > 0, e.g. 3600000 for hourly buckets"
_EXAMPLES = {
    "path.format": "path.format='year'=YYYY/'month'=MM/'day'=dd/'hour'=HH",
    "partition.duration.ms": "partition.duration.ms=3600000",
    "locale": "locale=en (a CLDR locale such as en_US, de_DE)",
    "timezone": "timezone=UTC (or an IANA name such as Europe/Berlin)",
}
