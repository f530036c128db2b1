"""``blockgz.iceberg.*``: which Iceberg catalog and table the export's Parquet files join.

Off unless ``blockgz.iceberg.table`` is set. The catalog is pyiceberg's SQL catalog on an
embedded SQLite file by default (``sqlite:///iceberg/catalog.db``, under the working directory,
beside ``checkpoints/``), the same SQL catalog on PostgreSQL (``postgresql://…``), or a REST
catalog (``http(s)://…``). New tables keep their metadata in the warehouse, by default beside
the job's manifests (``<archive>/_blockgz/iceberg``); the data files stay where the export
wrote them. Checked here, at the boundary: a bad value is one :class:`ConfigError` naming the
allowed ones, and the files must be Parquet (Iceberg's ``add_files`` reads Parquet only).

>>> IcebergSettings.from_options({"path": "/tmp/a"}) is None
True
>>> s = IcebergSettings.from_options({"path": "/tmp/a", "blockgz.iceberg.table": "orders"})
>>> s.identifier, s.catalog_type, s.warehouse
(('blockgz', 'orders'), 'sql', 'file:///tmp/a/_blockgz/iceberg')
>>> IcebergSettings.from_options({"path": "/tmp/a", "blockgz.iceberg.table": "t",
...     "blockgz.iceberg.catalog.uri": "mysql://h/db"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
blockgz.errors.ConfigError: blockgz.iceberg.catalog.uri: 'mysql://h/db' is not allowed; ...
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from blockgz.archive.layout import Layout
from blockgz.errors import ConfigError
from blockgz.option_defs import OptionSet, declarer
from blockgz.options import as_options
from blockgz.store import StoreTarget

TABLE = "blockgz.iceberg.table"
NAMESPACE = "blockgz.iceberg.namespace"
CATALOG_URI = "blockgz.iceberg.catalog.uri"
CATALOG_NAME = "blockgz.iceberg.catalog.name"
WAREHOUSE = "blockgz.iceberg.warehouse"
PARTITION_SPEC = "blockgz.iceberg.partition.spec"
PROPERTY_PREFIX = "blockgz.iceberg.property."

#: ``blockgz.iceberg.partition.spec``: from the partitioner, or none.
SPEC_CHOICES = ("auto", "none")
DEFAULT_CATALOG_URI = "sqlite:///iceberg/catalog.db"
#: The catalog URIs taken, by scheme: pyiceberg's SQL catalog (SQLAlchemy URLs) or REST.
SQL_SCHEMES = ("sqlite", "postgresql", "postgresql+psycopg2", "postgresql+psycopg")
REST_SCHEMES = ("http", "https")
_URI_ALLOWED = (
    "sqlite:///<file> (embedded), postgresql://user:password@host/db "
    "(needs pyiceberg[sql-postgres]), or http(s)://… (a REST catalog)"
)

_opt = declarer("sink", "blockgz")

ICEBERG_OPTIONS = OptionSet(
    _opt(
        TABLE,
        "text",
        "",
        "add each committed batch's Parquet files to this Iceberg table, in one Iceberg commit "
        "per batch (see [An Iceberg table over the archive](#an-iceberg-table-over-the-archive)"
        "); empty: no table. Needs `format.class=parquet`",
        also=("job",),
    ),
    _opt(NAMESPACE, "text", "blockgz", "the Iceberg table's namespace", also=("job",)),
    _opt(
        CATALOG_URI,
        "text",
        "",
        "the Iceberg catalog: `sqlite:///<file>` (pyiceberg's SQL catalog on an embedded "
        "SQLite file; relative to the working directory), `postgresql://…` (the same on "
        "PostgreSQL) or `http(s)://…` (a REST catalog)",
        shown=f"`{DEFAULT_CATALOG_URI}`",
        also=("job",),
    ),
    _opt(
        CATALOG_NAME,
        "text",
        "blockgz",
        "the catalog's name (a SQL catalog's rows carry it)",
        also=("job",),
    ),
    _opt(
        WAREHOUSE,
        "text",
        "",
        "where a new table's metadata goes (the data files stay where the export wrote them)",
        shown="`<archive>/<blockgz.manifest.dir>/iceberg`",
        also=("job",),
    ),
    _opt(
        PARTITION_SPEC,
        "choice",
        "auto",
        "a new table's partition spec: `auto` follows `partitioner.class` (hourly → `hour`, "
        "daily → `day` of the record time, field → `identity` of each field, default → none), "
        "`none` leaves it unpartitioned",
        allowed=SPEC_CHOICES,
        also=("job",),
    ),
    _opt(
        PROPERTY_PREFIX,
        "text",
        "",
        "a pyiceberg catalog or FileIO property (`…property.token`, `…property.s3.endpoint`), "
        "over the ones blockgz derives from the S3 settings",
        prefix=True,
        also=("job",),
    ),
)


@dataclass(frozen=True)
class IcebergSettings:
    """The Iceberg catalog and table an export commits to. Build with :meth:`from_options`."""

    namespace: str
    table: str
    catalog_name: str
    catalog_uri: str
    warehouse: str
    partition_spec: str = "auto"
    #: The catalog's properties (FileIO's S3 settings included), as pyiceberg takes them.
    properties: Mapping[str, str] = field(default_factory=dict, repr=False)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> IcebergSettings | None:
        """The settings, or ``None`` when no table is asked for; :class:`ConfigError` when
        a value is not allowed."""
        opts = as_options(options)
        read = ICEBERG_OPTIONS.read
        table = read(opts, TABLE)
        if not table:
            return None
        if "." in table or "/" in table:
            raise ConfigError(
                f"{TABLE}: {table!r} is not allowed; allowed: a table name without dots "
                f"(the namespace is {NAMESPACE})"
            )
        namespace = read(opts, NAMESPACE)
        if not namespace or any(not part for part in namespace.split(".")):
            raise ConfigError(
                f"{NAMESPACE}: {namespace!r} is not allowed; allowed: a name, or dotted names"
            )
        target = StoreTarget.from_options(opts)
        layout = Layout.from_options(opts)
        uri = _catalog_uri(read(opts, CATALOG_URI) or DEFAULT_CATALOG_URI)
        warehouse = read(opts, WAREHOUSE) or _default_warehouse(target, layout)
        return cls(
            namespace=namespace,
            table=table,
            catalog_name=read(opts, CATALOG_NAME),
            catalog_uri=uri,
            warehouse=warehouse,
            partition_spec=read(opts, PARTITION_SPEC),
            properties={**_file_io_properties(target), **opts.prefixed(PROPERTY_PREFIX)},
        )

    @property
    def identifier(self) -> tuple[str, ...]:
        return (*self.namespace.split("."), self.table)

    @property
    def catalog_type(self) -> str:
        """``sql`` (SQLite or PostgreSQL) or ``rest``."""
        return "rest" if urlparse(self.catalog_uri).scheme in REST_SCHEMES else "sql"

    def catalog_properties(self) -> dict[str, str]:
        """What :func:`pyiceberg.catalog.load_catalog` takes for this catalog."""
        props = {"type": self.catalog_type, "uri": self.catalog_uri, "warehouse": self.warehouse}
        if self.catalog_type == "sql" and self.catalog_uri.startswith("sqlite"):
            # The embedded catalog is created on first use, its folder with it.
            path = self.catalog_uri.removeprefix("sqlite:///")
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            props["init_catalog_tables"] = "true"
        return {**props, **self.properties}


def pin_catalog(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` with the embedded catalog's file made absolute (the default's too), as this
    process's working directory reads it: Spark runs the sink's commit in a Python worker whose
    working directory is not the export's, and it must open the same file.

    >>> import os
    >>> pinned = pin_catalog({"path": "/tmp/a", "blockgz.iceberg.table": "t"})
    >>> uri = pinned["blockgz.iceberg.catalog.uri"]
    >>> uri == "sqlite:///" + os.path.abspath("iceberg/catalog.db")
    True
    >>> pin_catalog({"path": "/tmp/a"})
    {'path': '/tmp/a'}
    """
    settings = IcebergSettings.from_options(options)
    if settings is None:
        return dict(options)
    return {**options, CATALOG_URI: settings.catalog_uri}


def check_parquet(settings: IcebergSettings | None, object_extension: str) -> None:
    """Refuse a table over objects that are not Parquet (``add_files`` reads Parquet only).

    >>> s = IcebergSettings.from_options({"path": "/tmp/a", "blockgz.iceberg.table": "t"})
    >>> check_parquet(s, ".snappy.parquet")
    >>> check_parquet(s, ".json.gz")
    Traceback (most recent call last):
    ...
    blockgz.errors.ConfigError: blockgz.iceberg.table needs Parquet objects (format.class=parquet); this export writes .json.gz objects
    """  # noqa: E501
    if settings is not None and not object_extension.endswith(".parquet"):
        raise ConfigError(
            f"{TABLE} needs Parquet objects (format.class=parquet); this export writes "
            f"{object_extension} objects"
        )


def _catalog_uri(uri: str) -> str:
    scheme = urlparse(uri).scheme.lower()
    if scheme not in SQL_SCHEMES + REST_SCHEMES:
        raise ConfigError(f"{CATALOG_URI}: {uri!r} is not allowed; allowed: {_URI_ALLOWED}")
    if scheme == "sqlite":
        path = uri.removeprefix("sqlite:///")
        if not path or uri == path:
            raise ConfigError(f"{CATALOG_URI}: {uri!r} is not allowed; allowed: {_URI_ALLOWED}")
        return "sqlite:///" + os.path.abspath(path)  # the same file whatever the cwd later
    return uri


def _default_warehouse(target: StoreTarget, layout: Layout) -> str:
    """``<archive>/<manifest dir>/iceberg``: hidden from engines reading the topics' folders."""
    root = target.url.rstrip("/")
    if urlparse(root).scheme not in ("s3", "file"):
        root = "file://" + os.path.abspath(root)
    return f"{root}/{layout.manifest_dir}/iceberg"


def _file_io_properties(target: StoreTarget) -> dict[str, str]:
    """pyiceberg's FileIO settings for the archive's S3 (endpoint, region, keys, addressing);
    none beyond what the environment gives for a local archive."""
    s3 = target.s3
    if s3 is None:
        return {}
    props = {"s3.force-virtual-addressing": "false" if s3.path_style else "true"}
    for name, value in (
        ("s3.endpoint", s3.endpoint_url),
        ("s3.region", s3.region),
        ("s3.access-key-id", s3.access_key_id),
        ("s3.secret-access-key", s3.secret_access_key),
    ):
        if value:
            props[name] = value
    return props


def file_url(target: StoreTarget, key: str) -> str:
    """The URL Iceberg records for the object ``key`` of the archive at ``target``.

    >>> file_url(StoreTarget.from_url("s3://b/p"), "p/topics/t/x.parquet")
    's3://b/p/topics/t/x.parquet'
    >>> file_url(StoreTarget.from_url("/data"), "topics/t/x.parquet")
    'file:///data/topics/t/x.parquet'
    """
    parsed = urlparse(target.url)
    if parsed.scheme == "s3":
        return f"s3://{parsed.netloc}/{key}"
    root = parsed.path if parsed.scheme == "file" else target.url
    return "file://" + os.path.join(os.path.abspath(root), key)
