"""The Iceberg table over the archive (blockgz.sink.iceberg), on a local archive and an embedded
SQLite catalog: one Iceberg commit per batch carrying its offsets, a replay recognised, a
crash between the two commits completed, the partition spec from the partitioner, the
settings checked at the boundary."""

from __future__ import annotations

import json
import logging

import pytest

from blockgz.errors import ConfigError
from blockgz.sink.iceberg.settings import IcebergSettings
from blockgz.sink.write.commit import TaskCommitMessage, write_manifest
from testkit.iceberg import BASE_MS, parquet_format, rows, write_parquet

pytest.importorskip("pyiceberg", reason="pyiceberg is in the [iceberg] extra")
pa = pytest.importorskip("pyarrow")

from blockgz.sink.iceberg.table import (  # noqa: E402  (needs pyiceberg)
    ArchiveTable,
    catch_up,
    commit_to_table,
)
from blockgz.sink.write.config import SinkSettings  # noqa: E402


@pytest.fixture(autouse=True)
def _parquet_format():
    with parquet_format():
        yield


#: Values with a schema (the real Parquet format refuses schemaless ones).
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"


def options(tmp_path, **more) -> dict[str, str]:
    return {
        "path": str(tmp_path / "archive"),
        "name": "job",
        "format.class": "parquet",
        "value.converter": STRING_CONVERTER,  # the real Parquet format wants a schema
        "blockgz.epoch": "e1",
        "blockgz.iceberg.table": "orders",
        "blockgz.iceberg.catalog.uri": f"sqlite:///{tmp_path}/catalog/catalog.db",
        **more,
    }


class Archive:
    """A local archive the tests write Parquet batches and manifests into, as the sink does."""

    def __init__(self, tmp_path, **more):
        self.options = options(tmp_path, **more)
        self.config = SinkSettings.from_options(self.options)
        self.store, self.prefix = self.config.make_store()
        self.log = self.config.manifest_log()
        self.table = ArchiveTable.from_options(self.options, self.config)
        self.expected: list[tuple[int, int]] = []  # (partition, offset) of every record

    def batch(self, batch_id, start: int, count: int, *, partitions=(0, 1), **kw) -> str:
        """Write one object per partition with offsets start..start+count-1, then the
        manifest; return its key (the Iceberg step is the caller's)."""
        files = [
            write_parquet(self.store, self.prefix, "orders", p, start, count, **kw)
            for p in partitions
        ]
        self.expected += [(p, o) for p in partitions for o in range(start, start + count)]
        ends = {"orders": {p: start + count for p in partitions}}
        return write_manifest(
            self.log, batch_id, [TaskCommitMessage(files=files, next_offsets=ends)]
        )

    def scanned(self) -> list[tuple[int, int]]:
        table = self.table.load().scan().to_arrow()
        ids, offsets = table["id"].to_pylist(), table["__kafka_offset"].to_pylist()
        return sorted((i // 1_000_000, o) for i, o in zip(ids, offsets, strict=True))

    def data_files(self) -> list[str]:
        return self.table.load().inspect.files()["file_path"].to_pylist()


def test_each_batch_is_one_commit_whose_summary_carries_its_end_offsets(tmp_path):
    archive = Archive(tmp_path)
    for batch in range(3):
        key = archive.batch(batch, batch * 5, 5)
        assert archive.table.commit(key) == [key]
    batches = archive.table.committed_batches()
    assert [b["blockgz.batch"] for b in batches] == ["0", "1", "2"]
    assert json.loads(batches[2]["blockgz.offsets"]) == {"orders": {"0": 15, "1": 15}}
    assert batches[0]["blockgz.manifest"] == "_blockgz/job/manifests/e1-00000000000000000000.json"
    table = archive.table.load()
    assert len(table.snapshots()) == 3  # one Iceberg commit per batch, no more
    assert archive.scanned() == sorted(archive.expected)


def test_the_same_files_stay_the_archive_one_copy_two_views(tmp_path):
    archive = Archive(tmp_path)
    archive.table.commit(archive.batch(0, 0, 4))
    paths = sorted(archive.data_files())
    root = tmp_path / "archive"
    assert paths == [
        f"file://{root}/topics/orders/partition={p}/orders+{p}+0000000000.snappy.parquet"
        for p in (0, 1)
    ]
    objects = [info.key for info in archive.store.list("topics/")]
    assert len(objects) == 2, "no data file was copied or rewritten"


def test_a_replayed_batch_is_recognised_and_not_added_twice(tmp_path):
    archive = Archive(tmp_path)
    key = archive.batch(0, 0, 5)
    archive.table.commit(key)
    # Spark replays batch 0 after a crash: the sink writes the same objects and manifest again.
    archive.expected.clear()
    again = archive.batch(0, 0, 5)
    assert again == key and archive.table.commit(again) == []
    assert len(archive.table.load().snapshots()) == 1
    assert len(archive.data_files()) == 2
    assert len(archive.scanned()) == 10


def test_a_crash_between_the_s3_commit_and_the_iceberg_commit_is_completed(tmp_path):
    """Batch 1's manifest is written, its Iceberg commit is not (the driver died): the next
    batch's commit adds batch 1 first, in its own commit, then its own; nothing twice."""
    archive = Archive(tmp_path)
    archive.table.commit(archive.batch(0, 0, 5))
    lost = archive.batch(1, 5, 5)  # no Iceberg commit: killed here
    key = archive.batch(2, 10, 5)
    assert archive.table.commit(key) == [lost, key]
    assert [b["blockgz.batch"] for b in archive.table.committed_batches()] == ["0", "1", "2"]
    assert archive.scanned() == sorted(archive.expected)
    assert archive.table.commit(key) == [] and archive.table.complete() == []


def test_the_restart_completes_what_the_crash_left(tmp_path):
    archive = Archive(tmp_path)
    archive.batch(0, 0, 5)  # the first batch's Iceberg commit never happened
    archive.batch(1, 5, 5)
    added = catch_up(archive.options, archive.config)
    assert [k.rsplit("-", 1)[-1] for k in added] == [
        "00000000000000000000.json",
        "00000000000000000001.json",
    ]
    assert catch_up(archive.options, archive.config) == []
    assert archive.scanned() == sorted(archive.expected)


def test_without_a_table_setting_there_is_no_iceberg_step(tmp_path):
    opts = {k: v for k, v in options(tmp_path).items() if k != "blockgz.iceberg.table"}
    assert ArchiveTable.from_options(opts, SinkSettings.from_options(opts)) is None
    assert catch_up(opts, SinkSettings.from_options(opts)) == []
    assert not (tmp_path / "catalog").exists()


def test_a_new_column_joins_the_table_schema_in_the_batchs_commit(tmp_path):
    archive = Archive(tmp_path)
    archive.table.commit(archive.batch(0, 0, 3))
    archive.table.commit(archive.batch(1, 3, 3, extra=True))
    table = archive.table.load()
    assert "note" in [f.name for f in table.schema().fields]
    assert len(table.snapshots()) == 2
    notes = table.scan().to_arrow()["note"].to_pylist()
    assert notes.count(None) == 6 and sorted(n for n in notes if n) == [
        f"n{o}" for o in (3, 3, 4, 4, 5, 5)
    ]


def test_an_empty_batch_moves_the_mark_without_a_snapshot(tmp_path):
    archive = Archive(tmp_path)
    archive.table.commit(archive.batch(0, 0, 3))
    empty = write_manifest(archive.log, 1, [TaskCommitMessage(files=[], next_offsets={})])
    assert archive.table.commit(empty) == [empty]
    table = archive.table.load()
    assert len(table.snapshots()) == 1
    assert table.properties["blockgz.job.manifest"] == empty


def test_an_empty_first_batch_makes_no_table_and_the_next_one_does(tmp_path):
    archive = Archive(tmp_path)
    empty = write_manifest(archive.log, 0, [TaskCommitMessage(files=[], next_offsets={})])
    assert archive.table.commit(empty) == [] and archive.table.load() is None
    key = archive.batch(1, 0, 2)
    assert archive.table.commit(key) == [key]
    assert archive.table.load().properties["blockgz.job.manifest"] == key
    assert archive.table.complete() == [], "the empty manifest is below the mark now"


def test_the_batch_writers_manifests_are_recognised_by_their_summary(tmp_path):
    archive = Archive(tmp_path)
    key = archive.batch("batch-0123456789abcdef", 0, 4)
    assert archive.table.commit(key) == [key]
    assert archive.table.commit(key) == []
    assert archive.table.complete() == []
    assert len(archive.table.load().snapshots()) == 1


HOURLY = {
    "partitioner.class": "io.confluent.connect.storage.partitioner.HourlyPartitioner",
    "locale": "en-US",
    "timezone": "UTC",
    "timestamp.extractor": "Record",
}


def test_an_hourly_archive_is_partitioned_by_the_hour_of_kafkas_timestamp(tmp_path):
    archive = Archive(tmp_path, **HOURLY)
    # Offsets 0..3599 are the first hour (one record a second from BASE_MS), 3600.. the next.
    first = archive.batch(0, 3590, 5, partitions=(0,), encoded="year=2026/month=11/day=22/hour=10")
    second = archive.batch(1, 3600, 5, partitions=(0,), encoded="year=2026/month=11/day=22/hour=11")
    archive.table.commit(first)
    archive.table.commit(second)
    table = archive.table.load()
    assert [(f.name, str(f.transform)) for f in table.spec().fields] == [("timestamp_hour", "hour")]
    hours = sorted(p["timestamp_hour"] for p in table.inspect.partitions()["partition"].to_pylist())
    assert hours == [BASE_MS // 3_600_000, BASE_MS // 3_600_000 + 1]
    hour_11 = table.scan(row_filter="__kafka_timestamp >= '2026-11-22T11:00:00+00:00'")
    assert sorted(hour_11.to_arrow()["__kafka_offset"].to_pylist()) == list(range(3600, 3605))


def test_a_field_partitioned_archive_is_partitioned_by_identity(tmp_path):
    archive = Archive(tmp_path, **{"partitioner.class": "field", "partition.field.name": "name"})
    archive.table.commit(archive.batch(0, 0, 1, partitions=(0,), encoded="name=orders-0-0"))
    assert [(f.name, str(f.transform)) for f in archive.table.load().spec().fields] == [
        ("name", "identity")
    ]


def test_unpartitioned_when_asked_or_for_the_default_partitioner(tmp_path):
    archive = Archive(tmp_path, **HOURLY, **{"blockgz.iceberg.partition.spec": "none"})
    archive.table.commit(archive.batch(0, 0, 2))
    assert archive.table.load().spec().fields == ()
    default = Archive(tmp_path / "d")
    default.table.commit(default.batch(0, 0, 2))
    assert default.table.load().spec().fields == ()


@pytest.mark.parametrize(
    ("more", "words"),
    [
        ({"timestamp.extractor": "Wallclock"}, "timestamp.extractor=Wallclock"),
        ({"timezone": "Asia/Kolkata"}, "not one UTC hour or day"),
    ],
)
def test_a_partitioner_iceberg_cannot_follow_is_refused_with_the_choices(tmp_path, more, words):
    refused = r"allowed: .*blockgz\.iceberg\.partition\.spec=none"
    with pytest.raises(ConfigError, match=refused) as e:
        SinkSettings.from_options(options(tmp_path, **{**HOURLY, **more}))
    assert words in str(e.value)
    assert not (tmp_path / "catalog").exists(), "refused before any catalog is touched"


def test_a_refused_setting_is_one_line_from_the_export_command(tmp_path):
    from click.testing import CliRunner

    from blockgz.cli import main

    config = tmp_path / "job.properties"
    opts = {**options(tmp_path), "format.class": "json", "topics": "t"}
    opts["kafka.bootstrap.servers"] = "127.0.0.1:9"
    config.write_text("".join(f"{k}={v}\n" for k, v in opts.items()))
    result = CliRunner().invoke(main, ["export", str(config), "--once"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, result.output
    assert lines[0].startswith("error: blockgz.iceberg.table needs Parquet objects")


def test_the_settings_are_checked_at_the_boundary(tmp_path):
    with pytest.raises(ConfigError, match=r"needs Parquet objects .* writes \.json objects"):
        SinkSettings.from_options({**options(tmp_path), "format.class": "json"})
    with pytest.raises(ConfigError, match="allowed: sqlite:///<file>"):
        IcebergSettings.from_options({**options(tmp_path), "blockgz.iceberg.catalog.uri": "x:y"})
    with pytest.raises(ConfigError, match="allowed: a table name without dots"):
        IcebergSettings.from_options({**options(tmp_path), "blockgz.iceberg.table": "a.b"})
    with pytest.raises(ConfigError, match="allowed: auto, none"):
        IcebergSettings.from_options({**options(tmp_path), "blockgz.iceberg.partition.spec": "x"})


def test_catalog_choices_and_the_s3_settings_for_pyiceberg():
    s3 = {
        "path": "s3://bucket/exports",
        "store.url": "http://127.0.0.1:9000",
        "s3.region": "us-east-1",
        "aws.access.key.id": "AK",
        "aws.secret.access.key": "SK",
        "blockgz.iceberg.table": "t",
    }
    settings = IcebergSettings.from_options(s3)
    assert settings.warehouse == "s3://bucket/exports/_blockgz/iceberg"
    props = settings.catalog_properties()
    assert props["s3.endpoint"] == "http://127.0.0.1:9000"
    assert props["s3.access-key-id"] == "AK" and props["s3.force-virtual-addressing"] == "false"
    rest = IcebergSettings.from_options(
        {
            **s3,
            "blockgz.iceberg.catalog.uri": "https://catalog.example/api",
            "blockgz.iceberg.property.token": "secret-token",
            "blockgz.iceberg.namespace": "lake.raw",
        }
    )
    assert rest.catalog_type == "rest" and rest.identifier == ("lake", "raw", "t")
    assert rest.catalog_properties()["token"] == "secret-token"
    pg = IcebergSettings.from_options({**s3, "blockgz.iceberg.catalog.uri": "postgresql://h/db"})
    assert pg.catalog_type == "sql" and pg.catalog_uri == "postgresql://h/db"


def test_a_failed_iceberg_commit_is_logged_and_the_next_batch_completes_it(tmp_path, caplog):
    archive = Archive(tmp_path)
    first = archive.batch(0, 0, 2)
    (tmp_path / "catalog").write_text("")  # a file where the catalog's folder goes: an outage
    with caplog.at_level(logging.ERROR, "blockgz.iceberg"):
        assert commit_to_table(archive.table, first) == []
    (tmp_path / "catalog").unlink()
    assert "the next batch or a restart adds its files" in caplog.text
    fresh = ArchiveTable.from_options(archive.options, archive.config)
    second = archive.batch(1, 2, 2)
    assert commit_to_table(fresh, second) == [first, second]
    archive.table = fresh
    assert archive.scanned() == sorted(archive.expected)


def test_the_rows_helper_writes_the_parquet_formats_columns():
    table = rows("t", 0, [5, 6])
    assert table.column_names == ["id", "name", "__kafka_offset", "__kafka_timestamp"]
    assert table.schema.field("__kafka_offset").nullable is False


def counted_loads(monkeypatch, table: ArchiveTable) -> list[tuple]:
    """The catalog's ``load_table`` calls from now on, blockgz's and pyiceberg's refreshes (not
    those the SQL catalog makes inside ``commit_table``: a REST catalog's server does that)."""
    catalog = table.catalog()
    calls: list[tuple] = []
    committing: list[int] = []
    load, commit = catalog.load_table, catalog.commit_table

    def counted(*args, **kw):
        if not committing:
            calls.append(args)
        return load(*args, **kw)

    def in_commit(*args, **kw):
        committing.append(1)
        try:
            return commit(*args, **kw)
        finally:
            committing.pop()

    monkeypatch.setattr(catalog, "load_table", counted)
    monkeypatch.setattr(catalog, "commit_table", in_commit)
    return calls


def test_the_table_is_kept_between_batches_not_loaded_again(tmp_path, monkeypatch):
    archive = Archive(tmp_path)
    archive.table.commit(archive.batch(0, 0, 3))  # creates the table (and loads it)
    loads = counted_loads(monkeypatch, archive.table)
    for batch in (1, 2):
        key = archive.batch(batch, batch * 3, 3)
        assert archive.table.commit(key) == [key]
    assert loads == [], "a batch after the first asks the catalog nothing before its commit"
    assert len(archive.table.load().snapshots()) == 3
    assert archive.scanned() == sorted(archive.expected)


def test_a_conflicting_commit_loads_the_table_again_and_retries(tmp_path, monkeypatch):
    from pyiceberg.exceptions import CommitFailedException

    import blockgz.sink.iceberg.table as table_module

    archive = Archive(tmp_path)
    archive.table.commit(archive.batch(0, 0, 3))
    # Another job commits to the same table: the kept table is behind the catalog now.
    other = Archive(tmp_path / "other", name="other")
    other.options["blockgz.iceberg.catalog.uri"] = archive.options["blockgz.iceberg.catalog.uri"]
    other.table = ArchiveTable.from_options(other.options, other.config)
    other.table.commit(other.batch(0, 100, 2, partitions=(0,)))
    real, failures = table_module._append, []

    def conflicting(*args):  # the catalog refuses the first attempt (after pyiceberg's retries)
        if not failures:
            failures.append(1)
            raise CommitFailedException("the table changed since it was loaded")
        real(*args)

    monkeypatch.setattr(table_module, "_append", conflicting)
    loads = counted_loads(monkeypatch, archive.table)
    key = archive.batch(1, 3, 3)
    assert archive.table.commit(key) == [key]
    assert failures == [1] and len(loads) == 1, "one load after the conflict, then the retry"
    assert [b["blockgz.batch"] for b in archive.table.committed_batches()] == ["0", "1"]
    assert len(archive.table.load().snapshots()) == 3  # ours, the other job's, ours


def test_a_failed_commit_drops_the_kept_table(tmp_path, monkeypatch):
    import blockgz.sink.iceberg.table as table_module

    archive = Archive(tmp_path)
    archive.table.commit(archive.batch(0, 0, 3))

    def outage(*args):
        raise OSError("the catalog is unreachable")

    monkeypatch.setattr(table_module, "_append", outage)
    assert commit_to_table(archive.table, archive.batch(1, 3, 3)) == []
    monkeypatch.undo()
    loads = counted_loads(monkeypatch, archive.table)
    key = archive.batch(2, 6, 3)
    assert len(archive.table.commit(key)) == 2 and len(loads) == 1, "loaded again, once"
