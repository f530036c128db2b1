"""The Iceberg table over an archive in S3 (SeaweedFS): each batch's Parquet objects added in one
Iceberg commit with its offsets, read back by pyiceberg from S3, a replay recognised, and a
SIGKILL between the S3 manifest commit and the Iceberg commit completed by the restart; the
table read by Spark 4.1 with Iceberg's runtime jar (pyspark 4.1.4 in a cached environment of its
own, :mod:`testkit.spark_line`), from its metadata file and from S3 through the SQLite catalog.

The Parquet objects are written with pyarrow in the export's layout and columns
(:mod:`testkit.iceberg`) and committed by the sink's own driver code; the objects the
Parquet format writes have the same shape.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from blockgz.local_servers import fake_aws_env
from blockgz.sink.write.commit import TaskCommitMessage, write_manifest
from blockgz.store import open_store
from testkit.faults import fault_options
from testkit.iceberg import parquet_format, write_parquet
from testkit.s3 import s3_options

pytest.importorskip("pyiceberg", reason="pyiceberg is in the [iceberg] extra")

from blockgz.sink.iceberg.table import ArchiveTable
from blockgz.sink.write.config import SinkSettings

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = (0, 1, 2)


@pytest.fixture(autouse=True)
def _parquet_format():
    with parquet_format():
        yield


#: Values with a schema (the real Parquet format refuses schemaless ones).
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"


def sink_options(s3_server, bucket, tmp_path, **more) -> dict[str, str]:
    return {
        "path": f"s3://{bucket}/exports",
        "name": "lake",
        "format.class": "parquet",
        "value.converter": STRING_CONVERTER,  # the real Parquet format wants a schema
        "blockgz.epoch": "e1",
        "blockgz.iceberg.table": "orders",
        "blockgz.iceberg.namespace": "kafka",
        "blockgz.iceberg.catalog.uri": f"sqlite:///{tmp_path}/iceberg/catalog.db",
        **s3_options(s3_server.endpoint_url),
        **more,
    }


def write_batch(config: SinkSettings, store, prefix, start: int, count: int):
    """One object per partition, offsets start..start+count-1: (files, end offsets)."""
    files = [write_parquet(store, prefix, "orders", p, start, count) for p in PARTITIONS]
    return files, {"orders": {p: start + count for p in PARTITIONS}}


def scanned(table: ArchiveTable) -> list[tuple[int, int]]:
    arrow = table.load().scan().to_arrow()
    ids, offsets = arrow["id"].to_pylist(), arrow["__kafka_offset"].to_pylist()
    return sorted((i // 1_000_000, o) for i, o in zip(ids, offsets, strict=True))


def test_batches_in_s3_become_iceberg_commits_read_back_from_s3(s3_server, bucket, tmp_path):
    options = sink_options(s3_server, bucket, tmp_path)
    config = SinkSettings.from_options(options)
    store, prefix = config.make_store()
    log = config.manifest_log()
    table = ArchiveTable.from_options(options, config)
    took = []
    for batch in range(3):
        files, ends = write_batch(config, store, prefix, batch * 20, 20)
        key = write_manifest(log, batch, [TaskCommitMessage(files=files, next_offsets=ends)])
        started = time.monotonic()
        assert table.commit(key) == [key]
        took.append(time.monotonic() - started)
    assert table.commit(key) == [], "a replay of the last batch adds nothing"
    batches = table.committed_batches()
    assert [json.loads(b["blockgz.offsets"])["orders"]["2"] for b in batches] == [20, 40, 60]
    iceberg = table.load()
    assert iceberg.metadata_location.startswith(f"s3://{bucket}/exports/_blockgz/iceberg/")
    paths = iceberg.inspect.files()["file_path"].to_pylist()
    assert len(paths) == 9 and all(p.startswith(f"s3://{bucket}/exports/topics/") for p in paths)
    expected = sorted((p, o) for p in PARTITIONS for o in range(60))
    assert scanned(table) == expected
    print(
        f"\nIceberg step per batch on SeaweedFS (3 files): {took[0]:.2f} s creating the table, "
        f"then {took[1]:.2f} s and {took[2]:.2f} s"
    )


@pytest.mark.slow
@pytest.mark.crash
def test_sigkill_between_the_manifest_and_the_iceberg_commit_then_restart(
    s3_server, bucket, tmp_path
):
    """The driver commits batch 0 (manifest, then Iceberg), writes batch 1's manifest and is
    SIGKILLed before batch 1's Iceberg commit. The restart adds batch 1 on start, Spark's
    replay of batch 1 is recognised, batch 2 follows: every file in the table once."""
    options = sink_options(s3_server, bucket, tmp_path)
    config = SinkSettings.from_options(options)
    store, prefix = config.make_store()
    batches = [(b, *write_batch(config, store, prefix, b * 10, 10)) for b in range(3)]
    marker = tmp_path / "paused"
    first = run_driver(tmp_path, {**options, **fault_options(f"pause-in-commit:1:{marker}")},
                       batches[:2])  # fmt: skip
    try:
        wait_for(first, marker)
    finally:
        kill(first)
    log = config.manifest_log()
    assert log.read_batch(1) is not None, "batch 1's manifest (the S3 commit) was written"
    table = ArchiveTable.from_options(options, config)
    assert [b["blockgz.batch"] for b in table.committed_batches()] == ["0"]

    again = run_driver(tmp_path, options, batches[1:])  # Spark replays batch 1, then batch 2
    out, _ = again.communicate(timeout=120)
    assert again.returncode == 0, out
    assert "1 committed batches added on start" in out
    assert [b["blockgz.batch"] for b in table.committed_batches()] == ["0", "1", "2"]
    paths = table.load().inspect.files()["file_path"].to_pylist()
    assert len(paths) == len(set(paths)) == 9, "each file once"
    assert scanned(table) == sorted((p, o) for p in PARTITIONS for o in range(30))


def run_driver(tmp_path: Path, options: dict[str, str], batches) -> subprocess.Popen:
    from testkit.iceberg_driver import plan_doc

    plan = tmp_path / f"plan-{time.monotonic_ns()}.json"
    plan.write_text(plan_doc(options, batches))
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    code = (
        "import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout); "
        "from testkit.iceberg_driver import main; main(sys.argv[1])"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, str(plan)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **fake_aws_env(), "PYTHONPATH": path},
        start_new_session=True,
    )


def wait_for(proc: subprocess.Popen, marker: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not marker.exists():
        if proc.poll() is not None:
            pytest.fail(f"the driver exited ({proc.returncode}) first:\n{proc.stdout.read()}")
        assert time.monotonic() < deadline, f"no {marker.name} within {timeout_s} s"
        time.sleep(0.1)  # polling a file with a deadline, not synchronising on time


def kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


# -- Spark ----------------------------------------------------------------------------------------
#: The newest Iceberg Spark runtime Maven Central serves (Iceberg 1.12.0 is built for Spark 4.1;
#: no runtime for Spark 4.2 or 4.3 is published, and pyspark here is 4.3).
ICEBERG_SPARK_RUNTIME = ("org.apache.iceberg", "iceberg-spark-runtime-4.1_2.13", "1.12.0")
#: The Spark line that runtime is built for, as a reader on its own cluster would run it.
READER_PYSPARK = "4.1.4"


@pytest.fixture(scope="session")
def reader_spark_python() -> Path:
    """The Python of a cached environment holding pyspark 4.1.4 alone (built on first use, a
    pip install from PyPI), or the test skipped when PyPI cannot be reached."""
    from testkit.spark_line import PyPIUnreachableError, pyspark_python

    try:
        return pyspark_python(READER_PYSPARK)
    except PyPIUnreachableError as exc:
        pytest.skip(f"PyPI not reachable: {exc}")


def maven_jars(*coordinates: tuple[str, str, str]) -> list[Path]:
    """The artifacts' jars (with their dependencies), or the test skipped when Maven Central
    cannot be reached."""
    from blockgz.errors import JarResolutionError
    from blockgz.jars import Artifact, resolve

    try:
        return [jar for c in coordinates for jar in resolve(Artifact(*c))]
    except JarResolutionError as exc:
        pytest.skip(f"Maven Central not reachable: {exc}")


def runtime_jars() -> list[Path]:
    """Iceberg's Spark runtime jar."""
    return maven_jars(ICEBERG_SPARK_RUNTIME)


def spark_read(python: Path | str, location: str, jars: list[Path], *settings: str) -> dict:
    """What ``testkit.iceberg_spark`` prints when ``python``'s pyspark reads the table at
    ``location`` (or by its name in a catalog) with ``jars`` on the driver's classpath."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_HOME", "PYSPARK_"))}
    done = subprocess.run(
        [str(python), "-m", "testkit.iceberg_spark", location, ",".join(map(str, jars)),
         *settings],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
        env={**env, **fake_aws_env(), "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": str(python)},
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(lines[-1])


@pytest.fixture
def local_table(tmp_path):
    """A local archive of two hourly batches (offsets 3590..3594 and 3600..3604 in partitions
    0 and 1, either side of an hour) and its table."""
    hourly = {
        "partitioner.class": "hourly",
        "locale": "en-US",
        "timezone": "UTC",
        "timestamp.extractor": "Record",
    }
    options = {
        "path": str(tmp_path / "archive"),
        "name": "lake",
        "format.class": "parquet",
        "value.converter": STRING_CONVERTER,  # the real Parquet format wants a schema
        "blockgz.epoch": "e1",
        "blockgz.iceberg.table": "orders",
        "blockgz.iceberg.catalog.uri": f"sqlite:///{tmp_path}/catalog.db",
        **hourly,
    }
    config = SinkSettings.from_options(options)
    store, prefix = config.make_store()
    log = config.manifest_log()
    table = ArchiveTable.from_options(options, config)
    for batch, start in enumerate((3590, 3600)):
        files = [
            write_parquet(store, prefix, "orders", p, start, 5, encoded=f"hour={batch}")
            for p in (0, 1)
        ]
        ends = {"orders": {p: start + 5 for p in (0, 1)}}
        table.commit(
            write_manifest(log, batch, [TaskCommitMessage(files=files, next_offsets=ends)])
        )
    return table


EXPECTED_OFFSETS = sorted([*range(3590, 3595), *range(3600, 3605)] * 2)


def test_spark_reads_the_files_the_table_plans(local_table, spark):
    """Spark's own Parquet reader over the data files a pyiceberg scan plans (here the hour
    11 partition only): the table's files are plain Parquet objects of the archive."""
    scan = local_table.load().scan(row_filter="__kafka_timestamp >= '2026-11-22T11:00:00+00:00'")
    paths = [task.file.file_path for task in scan.plan_files()]
    assert len(paths) == 2, "the hour filter prunes the other partition's files"
    offsets = sorted(r[0] for r in spark.read.parquet(*paths).select("__kafka_offset").collect())
    assert offsets == sorted([*range(3600, 3605)] * 2)


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="no Iceberg Spark runtime on Maven Central works with Spark 4.3: the newest, "
    "iceberg-spark-runtime-4.1_2.13:1.12.0 (and 4.0_2.13:1.11.0), fail on Spark 4.3.0 with "
    "IncompatibleClassChangeError (CatalogManager and View became interfaces)",
)
def test_spark_reads_the_table_with_icebergs_runtime(local_table):
    """Spark (this session's pyspark, 4.3) with Iceberg's runtime jar loads the table from its
    metadata file and reads every record. Passes once a runtime for pyspark's Spark line is
    served (update the coordinate, and the strict xfail says so); until then the read is
    tested on Spark 4.1, below."""
    result = spark_read(sys.executable, local_table.load().metadata_location, runtime_jars())
    assert result.get("offsets") == EXPECTED_OFFSETS, result


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the first run installs pyspark 4.1.4 from PyPI (see the fixture)
def test_spark_4_1_reads_the_table_with_icebergs_runtime(local_table, reader_spark_python):
    """A reader on another Spark line than the exporter's: pyspark 4.1.4 (its own cached
    environment) with ``iceberg-spark-runtime-4.1_2.13:1.12.0`` loads the table blockgz
    wrote from its metadata file and reads every record of both batches."""
    location = local_table.load().metadata_location
    result = spark_read(reader_spark_python, location, runtime_jars())
    assert result.get("spark") == READER_PYSPARK, result
    assert result.get("offsets") == EXPECTED_OFFSETS, result


#: Iceberg's S3 FileIO (the AWS SDK inside) and the SQLite JDBC driver: Spark reads the table on S3
#: through the same SQLite catalog blockgz commits to (Iceberg's JDBC catalog).
S3_CATALOG_JARS = (
    ("org.apache.iceberg", "iceberg-aws-bundle", "1.12.0"),
    ("org.xerial", "sqlite-jdbc", "3.49.1.0"),
)


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the first run installs pyspark 4.1.4 from PyPI (see the fixture)
def test_spark_4_1_reads_the_table_on_s3_through_its_catalog(
    s3_server, bucket, tmp_path, reader_spark_python
):
    """The table of two batches in S3 (SeaweedFS), read by pyspark 4.1.4 as ``blockgz.kafka.orders``
    through Iceberg's JDBC catalog on the SQLite file blockgz commits to, its files through
    Iceberg's S3 FileIO: every record."""
    from blockgz.local_servers.moto_s3 import ACCESS_KEY, REGION, SECRET_KEY

    options = sink_options(s3_server, bucket, tmp_path)
    config = SinkSettings.from_options(options)
    store, prefix = config.make_store()
    table = ArchiveTable.from_options(options, config)
    for batch in range(2):
        files, ends = write_batch(config, store, prefix, batch * 5, 5)
        message = TaskCommitMessage(files=files, next_offsets=ends)
        assert table.commit(write_manifest(config.manifest_log(), batch, [message]))
    catalog = "spark.sql.catalog.blockgz"  # blockgz.iceberg.catalog.name: the rows' catalog_name
    settings = [
        f"{catalog}=org.apache.iceberg.spark.SparkCatalog",
        f"{catalog}.type=jdbc",
        f"{catalog}.uri=jdbc:sqlite:{tmp_path}/iceberg/catalog.db",
        f"{catalog}.warehouse=s3://{bucket}/exports/_blockgz/iceberg",  # the table's
        f"{catalog}.io-impl=org.apache.iceberg.aws.s3.S3FileIO",
        f"{catalog}.s3.endpoint={s3_server.endpoint_url}",
        f"{catalog}.s3.path-style-access=true",
        f"{catalog}.s3.access-key-id={ACCESS_KEY}",
        f"{catalog}.s3.secret-access-key={SECRET_KEY}",
        f"{catalog}.client.region={REGION}",
    ]
    jars = runtime_jars() + maven_jars(*S3_CATALOG_JARS)
    result = spark_read(reader_spark_python, "blockgz.kafka.orders", jars, *settings)
    assert result.get("spark") == READER_PYSPARK, result
    assert result.get("offsets") == sorted(o for _ in PARTITIONS for o in range(10)), result
    assert scanned(table) == sorted((p, o) for p in PARTITIONS for o in range(10)), (
        "the catalog still serves blockgz after Spark's JDBC catalog opened it"
    )


# -- end to end, on the Parquet format ------------------------------------------------------------
@pytest.mark.slow
def test_the_parquet_export_keeps_the_iceberg_table(
    spark, kafka, s3_server, registry, bucket, tmp_path, monkeypatch
):
    """``blockgz export`` of Avro records as Parquet with an hourly partitioner on the value's
    ``ts`` (five hours apart): the table holds every exported record, partitioned by
    ``hour(ts)``, its files are the archive's objects, and each batch's commit says its end
    offsets; a second run with nothing new adds nothing. Runs once the Parquet format is
    registered (issue 29 part 1); skipped before."""
    pytest.importorskip(
        "blockgz.formats.parquet.parquet_format", reason="the Parquet format is not here yet"
    )
    from blockgz.sink.export.job import run_export
    from blockgz.sink.jobconfig.config import ExportSettings
    from testkit.avro_data import produce_avro_numbered
    from testkit.kafka_data import read_exported

    monkeypatch.chdir(tmp_path)  # the embedded catalog goes under the working directory
    topic = "iceberg_export"
    kafka.create_topic(topic, partitions=2)
    produce_avro_numbered(kafka.bootstrap_servers, registry.url, topic, 2, 9)
    job = ExportSettings.from_mapping(
        {
            "name": "iceberg-export",
            "topics": topic,
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": bucket,
            **s3_options(s3_server.endpoint_url),
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": registry.url,
            "format.class": "parquet",
            "partitioner.class": "hourly",
            "timestamp.extractor": "RecordField",
            "timestamp.field": "ts",
            "locale": "en-US",
            "timezone": "UTC",
            "flush.size": "3",
            "maxOffsetsPerTrigger": "6",
            "blockgz.iceberg.table": "events",
        }
    )
    checkpoint = tmp_path / "ckpt"
    run_export(job, checkpoint=checkpoint, once=True, spark=spark, install_signal_handlers=False)
    assert (tmp_path / "iceberg" / "catalog.db").exists()
    table = ArchiveTable.from_options(job.sink_options, job.sink)
    iceberg = table.load()
    assert [(f.name, str(f.transform)) for f in iceberg.spec().fields] == [("ts_hour", "hour")]
    arrow = iceberg.scan().to_arrow()
    got = sorted(zip(arrow["p"].to_pylist(), arrow["i"].to_pylist(), strict=True))
    assert got == [(p, i) for p in range(2) for i in range(9)]
    assert arrow["__kafka_offset"].to_pylist() == arrow["i"].to_pylist()
    store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
    exported = read_exported(store, prefix)
    paths = {p.removeprefix(f"s3://{bucket}/") for p in table_files(iceberg)}
    assert paths == set(exported.objects), "the table's files are the archive's objects"
    batches = table.committed_batches()
    assert len(batches) == len(table.manifests.keys()) >= 3  # one commit per batch
    assert json.loads(batches[-1]["blockgz.offsets"]) == {topic: {"0": 9, "1": 9}}
    snapshots = len(iceberg.snapshots())
    run_export(job, checkpoint=checkpoint, once=True, spark=spark, install_signal_handlers=False)
    assert len(table.load().snapshots()) == snapshots, "nothing new, nothing added"


def table_files(iceberg) -> list[str]:
    return iceberg.inspect.files()["file_path"].to_pylist()


@pytest.mark.slow
@pytest.mark.crash
def test_sigkill_of_the_export_between_the_two_commits_then_restart(
    kafka, s3_server, registry, bucket, tmp_path
):
    """A real ``blockgz export`` writing Parquet, SIGKILLed (its whole process group) inside
    batch 1's commit: its manifest written, its Iceberg commit not. The restarted export adds
    batch 1 on start and goes on: every record in the table, each file once, one commit per
    batch. Runs once the Parquet format is on this branch (issue 29 part 1)."""
    pytest.importorskip(
        "blockgz.formats.parquet.parquet_format", reason="the Parquet format is not here yet"
    )
    from testkit.avro_data import produce_avro_numbered
    from tests.integration.test_export_crash import ExportProcess

    topic = "iceberg_crash"
    kafka.create_topic(topic, partitions=2)
    produce_avro_numbered(kafka.bootstrap_servers, registry.url, topic, 2, 12)
    options = {
        "name": "iceberg-crash",
        "topics": topic,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": bucket,
        **s3_options(s3_server.endpoint_url),
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": registry.url,
        "format.class": "parquet",
        "flush.size": "3",
        "maxOffsetsPerTrigger": "8",
        "blockgz.iceberg.table": "events",
        "blockgz.iceberg.catalog.uri": f"sqlite:///{tmp_path}/iceberg/catalog.db",
    }
    marker = tmp_path / "paused"

    def config(name: str, **more: str) -> Path:
        path = tmp_path / name
        path.write_text("".join(f"{k}={v}\n" for k, v in {**options, **more}.items()))
        return path

    crashing = config("job.properties", **fault_options(f"pause-in-commit:1:{marker}"))
    run = ExportProcess(crashing, tmp_path / "ckpt", tmp_path / "export.log")
    run.wait_for(marker, timeout_s=420)  # two batches of Spark Python workers, on a busy box
    run.kill()
    sink = SinkSettings.from_options(options)
    table = ArchiveTable.from_options(options, sink)
    assert sink.manifest_log().keys()[-1].endswith("-00000000000000000001.json")
    assert [b["blockgz.batch"] for b in table.committed_batches()] == ["0"]

    restart = ExportProcess(config("job2.properties"), tmp_path / "ckpt", tmp_path / "export.log")
    restart.finish(timeout_s=420)
    log = (tmp_path / "export.log").read_text(errors="replace")
    assert "1 committed batches added on start" in log, log[-3000:]
    batches = [b["blockgz.batch"] for b in table.committed_batches()]
    assert batches == [str(n) for n in range(len(batches))] and len(batches) >= 3
    iceberg = table.load()
    files = table_files(iceberg)
    assert len(files) == len(set(files)), "each file once"
    arrow = iceberg.scan().to_arrow()
    got = sorted(zip(arrow["p"].to_pylist(), arrow["i"].to_pylist(), strict=True))
    assert got == [(p, i) for p in range(2) for i in range(12)]
