"""One Iceberg commit per committed batch, exactly once: the archive's Parquet files as a table.

After the driver writes a batch's manifest (the S3 commit), :meth:`ArchiveTable.commit` adds
the batch's Parquet files to the table with pyiceberg's ``add_files`` (a fast append: the
files are referenced where they are, never copied or rewritten, so the same objects stay the
offset-seekable archive). The one Iceberg commit also records, as Iceberg's Kafka Connect
sink and Spark's streaming sink do, what it holds:

* the snapshot summary carries ``blockgz.job``, ``blockgz.manifest`` (the manifest's key),
  ``blockgz.epoch``, ``blockgz.batch`` and ``blockgz.offsets`` (the batch's end offsets per
  topic-partition, JSON: ``{"topic": {"partition": next offset}}``);
* the table property ``blockgz.<job>.manifest`` is the newest streaming manifest added, set in
  the same commit: a mark that survives snapshot expiry (streaming manifest keys sort by
  epoch, then batch, and manifests are added in that order).

A manifest is in the table when its key is at or below that mark, or a retained snapshot's
summary names it (the batch writer's keys, which do not sort). So a replayed batch (Spark runs
``commit`` again after a crash) is recognised and not added twice; and
:meth:`ArchiveTable.complete` — run on every commit before the batch's own files, and when the
export starts — adds every committed manifest the table lacks, in key order: a crash between
the S3 commit and the Iceberg commit is completed by the next batch or the restart.

The table is loaded from the catalog once and kept between batches: a commit updates the kept
table in place (pyiceberg's), and one export writes a job's manifests (its lease), so the kept
table knows what this job added. Another writer's commit in between (another job on the same
table) makes the next commit conflict: pyiceberg's ``CommitFailedException``, after which the
table is loaded again and the commit retried. Any other failure drops the kept table, so the
next batch starts from a fresh load.

Example (needs pyiceberg, so not a doctest)::

    table = ArchiveTable.from_options(sink_options, sink_config)  # None: no iceberg.table
    table.complete()                                   # on start: catch up with the manifests
    table.commit(manifest_key)                         # after each batch's manifest
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from blockgz.archive.layout import Layout
from blockgz.archive.partition_offsets import offsets_doc
from blockgz.commits.manifests import Manifest, Manifests
from blockgz.errors import ConfigError, IcebergCommitError, MissingDependencyError
from blockgz.sink.iceberg.settings import IcebergSettings, check_parquet, file_url
from blockgz.sink.iceberg.spec import KAFKA_TIMESTAMP, SpecField, kafka_timestamp_column
from blockgz.sink.partitioning.settings import PartitionerSettings
from blockgz.store import StoreTarget

log = logging.getLogger("blockgz.iceberg")

#: Snapshot summary properties of a blockgz commit.
JOB, MANIFEST, EPOCH, BATCH, OFFSETS = (
    "blockgz.job",
    "blockgz.manifest",
    "blockgz.epoch",
    "blockgz.batch",
    "blockgz.offsets",
)
#: Attempts of one Iceberg commit that another writer's commit got in the way of.
COMMIT_ATTEMPTS = 4


def _pyiceberg():
    try:
        import pyiceberg.catalog
    except ImportError as exc:  # pragma: no cover - the [iceberg] extra is not installed
        raise MissingDependencyError(
            "blockgz.iceberg.table needs pyiceberg: pip install 'blockgz[iceberg]'"
        ) from exc
    return pyiceberg.catalog


def mark_property(job: str) -> str:
    """The table property holding the newest streaming manifest of ``job`` added."""
    return f"blockgz.{job}.manifest"


def is_streaming_key(key: str) -> bool:
    """Whether a manifest key is a streaming batch's (they sort in commit order)."""
    parsed = Layout.parse_manifest_key(key)
    return parsed is not None and isinstance(parsed[1], int)


def data_files(manifest: Manifest) -> list[str]:
    """The keys of the manifest's Parquet value objects (companions and others left out)."""
    return [f.key for f in manifest.files if f.role == "value" and f.key.endswith(".parquet")]


@dataclass
class ArchiveTable:
    """The Iceberg table over one export job's Parquet objects."""

    settings: IcebergSettings
    manifests: Manifests
    target: StoreTarget
    partitioning: PartitionerSettings
    #: The table as last loaded or committed (``None``: load it when next needed).
    _table: Any = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def from_options(cls, options: Mapping[str, Any], config) -> ArchiveTable | None:
        """The table the sink's options name, over the archive their ``config`` (a
        :class:`~blockgz.sink.write.config.SinkSettings`) writes, or ``None`` when they name
        none. The caller has the config: the table sits below the sink's writer."""
        settings = IcebergSettings.from_options(options)
        if settings is None:
            return None
        return cls.of(settings, config)

    @classmethod
    def of(cls, settings: IcebergSettings, config) -> ArchiveTable:
        """The table of ``settings`` over the archive a sink ``config`` writes."""
        check_parquet(settings, config.extension)
        return cls(settings, config.manifest_log(), config.target, config.partitioning)

    # -- the catalog and the table ----------------------------------------------------------
    def catalog(self):
        if not hasattr(self, "_catalog"):
            props = self.settings.catalog_properties()
            self._catalog = _pyiceberg().load_catalog(self.settings.catalog_name, **props)
        return self._catalog

    def load(self):
        """The table, or ``None`` when it does not exist yet."""
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return self.catalog().load_table(self.settings.identifier)
        except NoSuchTableError:
            return None

    def _kept(self):
        """The table kept from the last load or commit (loaded now when there is none)."""
        if self._table is None:
            self._table = self.load()
        return self._table

    def _create(self, first_file: str):
        """Create the table from the schema of ``first_file`` (a URL), with the spec of the
        partitioner; another writer creating it first is fine."""
        import pyarrow.parquet as pq
        from pyiceberg.exceptions import TableAlreadyExistsError
        from pyiceberg.io import load_file_io

        from blockgz.sink.iceberg.spec import partition_plan

        catalog = self.catalog()
        io = load_file_io(self.settings.catalog_properties(), first_file)
        with io.new_input(first_file).open() as stream:
            schema = pq.read_schema(stream)
        plan = partition_plan(self.partitioning, self.settings.partition_spec)
        catalog.create_namespace_if_not_exists(self.settings.identifier[:-1])
        try:
            tx = catalog.create_table_transaction(self.settings.identifier, schema=schema)
            if plan:
                with tx.update_spec() as spec:
                    for field in plan:
                        _add_spec_field(spec, tx.table_metadata.schema(), field)
            tx.commit_transaction()
            log.info("Iceberg table %s created", ".".join(self.settings.identifier))
        except TableAlreadyExistsError:
            pass
        return catalog.load_table(self.settings.identifier)

    # -- what the table holds -----------------------------------------------------------------
    def added(self, table) -> tuple[str, set[str]]:
        """The mark (the newest streaming manifest added, ``""`` for none) and the manifest
        keys the retained snapshots name."""
        if table is None:
            return "", set()
        mark = table.properties.get(mark_property(self.manifests.name), "")
        named = {
            s.summary[MANIFEST]
            for s in table.metadata.snapshots
            if s.summary is not None
            and s.summary.get(JOB) == self.manifests.name
            and s.summary.get(MANIFEST)
        }
        return mark, named

    @staticmethod
    def holds(key: str, mark: str, named: set[str]) -> bool:
        return key in named or (is_streaming_key(key) and bool(mark) and key <= mark)

    def committed_batches(self) -> list[dict[str, str]]:
        """The blockgz properties of each retained snapshot of this job, oldest first."""
        table = self.load()
        if table is None:
            return []
        return [
            {k: v for k, v in s.summary.additional_properties.items() if k.startswith("blockgz.")}
            for s in sorted(table.metadata.snapshots, key=lambda s: s.sequence_number or 0)
            if s.summary is not None and s.summary.get(JOB) == self.manifests.name
        ]

    # -- committing -----------------------------------------------------------------------------
    def complete(self, *, through: str | None = None) -> list[str]:
        """Add every committed manifest the table lacks, oldest first (up to ``through``, a
        key, when given); return the keys added. Costs one load of the table and one LIST of
        the manifests after its mark, plus one Iceberg commit per manifest added; the table
        is the one kept from the last commit (loaded on the first call, after a conflict and
        after a failure)."""
        with self._dropped_on_failure():
            table = self._kept()
            mark, named = self.added(table)
            added = []
            for key in self.manifests.keys(after=mark):
                if through is not None and key > through and is_streaming_key(key):
                    break
                if self.holds(key, mark, named):
                    continue
                table = self._commit(table, key, self.manifests.read(key))
                if table is None:
                    continue  # a batch without files, and no table yet: nothing to add
                self._table = table
                mark, named = self.added(table)
                added.append(key)
            return added

    def commit(self, key: str) -> list[str]:
        """After the manifest ``key`` is written: add it, and any committed manifest before
        it the table lacks (a crash's), each in its own commit; return the keys added."""
        added = self.complete(through=key)
        if key not in added and not is_streaming_key(key):
            with self._dropped_on_failure():
                table = self._kept()
                if not self.holds(key, *self.added(table)):
                    table = self._commit(table, key, self.manifests.read(key))
                    if table is not None:
                        self._table = table
                        added.append(key)
        return added

    @contextlib.contextmanager
    def _dropped_on_failure(self) -> Iterator[None]:
        """Forget the kept table when the block fails (its state is not known then)."""
        try:
            yield
        except BaseException:
            self._table = None
            raise

    def _commit(self, table, key: str, manifest: Manifest):
        """One Iceberg commit: the manifest's Parquet files, its summary and the mark."""
        from pyiceberg.exceptions import CommitFailedException

        urls = [file_url(self.target, k) for k in data_files(manifest)]
        props = {
            JOB: self.manifests.name,
            MANIFEST: key,
            EPOCH: manifest.epoch,
            BATCH: manifest.batch,
            OFFSETS: json.dumps(offsets_doc(manifest.offsets), sort_keys=True),
        }
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            if table is None:
                if not urls:
                    return None  # nothing to make a table from yet; the mark waits for files
                table = self._create(urls[0])
            elif self.holds(key, *self.added(table)):
                return table  # another writer added it (or an earlier attempt did)
            try:
                started = time.monotonic()
                _append(table, urls, props, self.manifests.name, key)
                log.info(
                    "Iceberg commit of %s: %d files in %.2f s",
                    key,
                    len(urls),
                    time.monotonic() - started,
                )
                return table  # pyiceberg updated it in place with the commit's metadata
            except CommitFailedException as exc:
                if attempt == COMMIT_ATTEMPTS:
                    raise IcebergCommitError(
                        f"Iceberg commit of {key} failed {attempt} times: {exc}"
                    ) from exc
                table = self.load()  # another writer committed since: its view of the table
        return table


def _append(table, urls: list[str], props: dict[str, str], job: str, key: str) -> None:
    """``add_files`` and the mark in one transaction (one commit). When pyiceberg refuses the
    files' schema, the same commit is tried once more with the table's schema first taking the
    files' new columns (``union_by_name``; reading each file's footer once more)."""
    mark = {mark_property(job): key} if is_streaming_key(key) else {}
    for evolve in (False, True):
        try:
            with table.transaction() as tx:
                if evolve:
                    with tx.update_schema() as update:
                        update.union_by_name(_schema_of(table, urls))
                if urls:
                    # check_duplicate_files scans every data file of the table; the summaries
                    # and the mark already keep each manifest's files from going in twice.
                    tx.add_files(urls, snapshot_properties=props, check_duplicate_files=False)
                if mark:
                    tx.set_properties(mark)
            return
        except ValueError as exc:  # pyiceberg's word for files that do not fit the schema
            if evolve:
                raise IcebergCommitError(f"Iceberg commit of {key} refused: {exc}") from exc


def _schema_of(table, urls: Iterable[str]):
    """The files' schemas as one (a union taken once: pyiceberg's name mapping follows one
    ``union_by_name`` per update)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schemas = []
    for url in urls:
        with table.io.new_input(url).open() as stream:
            schemas.append(pq.read_schema(stream))
    return pa.unify_schemas(schemas)


def _add_spec_field(spec, schema, field: SpecField) -> None:
    """Add ``field`` to a new table's spec, its source resolved in ``schema``."""
    from pyiceberg.transforms import DayTransform, HourTransform, IdentityTransform
    from pyiceberg.types import TimestampType, TimestamptzType

    names = [f.name for f in schema.fields]
    source = kafka_timestamp_column(names) if field.source == KAFKA_TIMESTAMP else field.source
    found = schema.find_field(source, case_sensitive=True) if source else None
    if found is None:
        what = "Kafka's record timestamp" if field.source == KAFKA_TIMESTAMP else field.source
        raise ConfigError(
            f"blockgz.iceberg.partition.spec=auto partitions by {what}, which the Parquet "
            f"objects have no column for (columns: {', '.join(names)}); allowed: a partitioner "
            "whose field is a column, or blockgz.iceberg.partition.spec=none"
        )
    if field.transform != "identity" and not isinstance(
        found.field_type, TimestampType | TimestamptzType
    ):
        raise ConfigError(
            f"blockgz.iceberg.partition.spec=auto: {field.transform}({source}) needs a timestamp "
            f"column; {source} is {found.field_type}; allowed: a timestamp column, or "
            "blockgz.iceberg.partition.spec=none"
        )
    transform = {"hour": HourTransform, "day": DayTransform, "identity": IdentityTransform}
    spec.add_field(source, transform[field.transform](), field.name)


def commit_to_table(table: ArchiveTable, key: str) -> list[str]:
    """The driver's Iceberg step after the manifest ``key``: :meth:`ArchiveTable.commit`.

    A failure is logged, not raised: the batch is committed in the archive already, and the
    next batch (or the export's restart) adds what this one could not. A setting the table
    cannot take (a :class:`ConfigError`) is raised.
    """
    try:
        return table.commit(key)
    except ConfigError:
        raise
    except Exception as exc:  # a catalog or S3 outage of any library's kind: the next batch retries
        log.error(
            "Iceberg commit of %s failed (the archive's commit stands; the next batch or a "
            "restart adds its files): %s",
            key,
            exc,
        )
        return []


def catch_up(options: Mapping[str, Any], config) -> list[str]:
    """On the export's start: add every committed manifest the table lacks (a batch whose
    Iceberg commit a crash or an outage prevented); nothing without ``blockgz.iceberg.table``."""
    table = ArchiveTable.from_options(options, config)
    if table is None:
        return []
    added = table.complete()
    log.info(
        "Iceberg table %s: %d committed batches added on start",
        ".".join(table.settings.identifier),
        len(added),
    )
    return added
