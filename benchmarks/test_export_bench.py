"""The export end to end: 1M ~200-byte JSON records in 4 Kafka partitions to block-GZIP on S3.

H. the pipeline a PySpark user writes by hand: ``readStream.format("kafka")`` →
   ``selectExpr("CAST(value AS STRING) AS value")`` → ``writeStream.format("json")``, gzip,
   ``Trigger.AvailableNow`` (local disk: no S3 jars here); H'. the same to ``format("text")``
   (the value string as the line, the closest to blockgz's output);
S. ``run_export`` with Spark's Kafka source (``blockgz.spark.kafka.jars``) → ``blockgz`` sink →
   SeaweedFS; A. the same with the blockgz-kafka source; A'. A with sink tasks reading Kafka;
C. a plain confluent-kafka loop in 2 processes doing the sink's work (validate the JSON,
   block-GZIP, multipart upload, index sidecar): the ceiling of the Python stack.

Apache Kafka 4.1 (one KRaft node) and SeaweedFS (S3) serve every case, each in its own process;
one SparkSession, with Spark's Kafka connector on ``spark.jars``, serves H, S and A. Run
``make bench-export``; at full scale the report goes to ``benchmarks/results/export.md``.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from benchmarks import export_loop as loop
from benchmarks import export_report as rep
from benchmarks import export_support as eb
from benchmarks import process_usage as pu
from benchmarks import support
from benchmarks.report import publish_report
from testkit.s3 import s3_options

pytestmark = pytest.mark.timeout(3600)

TOPIC = "bench_export"
WARMUP_TOPIC = "bench_export_warmup"
JOB_NAME = "bench-export"


# -- fixtures -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def report(request) -> Iterator[dict[str, Any]]:
    """Collects the results; at the end prints the report (and writes it at full scale)."""
    rep.RESULTS.clear()
    yield rep.RESULTS
    results = rep.RESULTS
    cases = [k for k in eb.ALL_KEYS if k in results]
    if not cases:
        return
    text = rep.render(results)
    written = support.MEANINGFUL and len(cases) == len(eb.ALL_KEYS)
    publish_report(request.config, "blockgz export", text, eb.RESULTS_PATH, written)


@pytest.fixture(scope="module")
def kafka():
    """Apache Kafka 4.1 (one KRaft node, its own JVM) for the whole module."""
    from blockgz.local_servers.apache_kafka import ApacheKafka

    reason = ApacheKafka.unavailable_reason()
    if reason:
        pytest.skip(reason)
    with ApacheKafka() as broker:
        yield broker


@pytest.fixture(scope="module")
def s3():
    """SeaweedFS (``weed mini``), its own process: its CPU and memory stay out of this one."""
    from blockgz.local_servers.seaweed import SeaweedS3

    reason = SeaweedS3.unavailable_reason()
    if reason:
        pytest.skip(reason)
    with SeaweedS3() as server:
        yield server


@pytest.fixture(scope="module")
def servers(kafka, s3) -> dict[str, int]:
    """The servers' pids, reported apart from the benchmarked processes."""
    return {"s3": s3._proc.pid, "kafka": kafka._process.pid}


@pytest.fixture(scope="module")
def dataset(kafka, report) -> eb.Dataset:
    data = eb.produce_dataset(kafka, TOPIC, eb.PER_PARTITION)
    report["dataset"] = data
    return data


@pytest.fixture(scope="module")
def spark(report):
    """One ``local[2,3]`` session for the Spark cases, with Spark's Kafka connector on
    ``spark.jars`` as ``blockgz.spark.kafka.jars`` puts it (its start time is reported)."""
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17+")
    from blockgz.sink.session import has_spark_kafka, spark_session
    from blockgz.sink.spark_kafka import connector_jars, with_jars

    started = time.perf_counter()
    conf = {"spark.sql.execution.arrow.maxRecordsPerBatch": str(eb.ARROW_BATCH_ROWS)}
    session = spark_session(
        "local[2,3]",
        app_name="blockgz-bench-export",
        conf=with_jars(conf, connector_jars(eb.SPARK_KAFKA_JARS)),
    )
    report.setdefault("fixed", {})["session_s"] = time.perf_counter() - started
    assert has_spark_kafka(session), "Spark's Kafka connector is not on the classpath"
    yield session
    session.stop()


@pytest.fixture(scope="module")
def warm_spark(spark, kafka, s3, tmp_path_factory, report):
    """Run each Spark path once on a small topic, so no case pays the first-use costs."""
    eb.produce_dataset(kafka, WARMUP_TOPIC, eb.WARMUP_PER_PARTITION)
    fixed = report.setdefault("fixed", {})
    base = tmp_path_factory.mktemp("warmup")
    job = job_config(kafka, s3, new_bucket(s3, "bench-warmup"), WARMUP_TOPIC)
    tasks = job_config(kafka, s3, new_bucket(s3, "bench-warmup-tasks"), WARMUP_TOPIC, "tasks")
    fixed["warmup_blockgz_s"] = _timed(lambda: run_blockgz(spark, job, base / "ckpt-a"))[1]
    fixed["warmup_blockgz_tasks_s"] = _timed(lambda: run_blockgz(spark, tasks, base / "ckpt-t"))[1]
    spark_job = job_config(kafka, s3, new_bucket(s3, "bench-warmup-spark"), WARMUP_TOPIC, "spark")
    fixed["warmup_blockgz_spark_s"] = _timed(
        lambda: run_blockgz(spark, spark_job, base / "ckpt-s")
    )[1]
    for fmt in ("json", "text"):
        fixed[f"warmup_{fmt}_s"] = _timed(
            lambda fmt=fmt: run_hand_written(
                spark, kafka, WARMUP_TOPIC, fmt, base / f"out-{fmt}", base / f"ck-{fmt}"
            )
        )[1]
    shutil.rmtree(base, ignore_errors=True)
    return spark


@pytest.fixture
def quiet_machine(report) -> None:
    """Wait (up to 5 minutes) for other busy java/python processes to finish."""
    busy = pu.wait_until_idle(300)
    if busy:
        report.setdefault("notes", []).append(
            "other processes were busy when a case started: " + "; ".join(busy)
        )


# -- the cases ------------------------------------------------------------------------------------
def new_bucket(s3, name: str) -> str:
    """Create bucket ``name``, its storage ready: SeaweedFS allocates a new bucket's volumes
    on its first non-empty object (0.2 s, measured), which an archive's bucket has long paid
    and H, writing to local disk, never pays; one object written and deleted pays it here,
    before any timing."""
    client = s3.client()
    client.create_bucket(Bucket=name)
    client.put_object(Bucket=name, Key="bench-warm", Body=b"x")
    client.delete_object(Bucket=name, Key="bench-warm")
    return name


def job_config(
    kafka, s3, bucket: str, topic: str, plan: str = "rows", extra=None, *, pattern: bool = False
):
    """The export job of cases S and A: JSON values, block-GZIP, default partitioner, no
    flush.size (so one object per partition per micro-batch). ``plan``: ``rows`` (A),
    ``tasks`` (A': the sink tasks read Kafka) or ``spark`` (S: Spark's Kafka source);
    ``extra``: more options (the transforms case's chain); ``pattern``: subscribe by
    ``topics.regex`` (the rows then keep their ``topic`` column)."""
    import re

    from blockgz.sink.jobconfig.config import ExportSettings

    return ExportSettings.from_mapping(
        {
            "blockgz.tasks.read.kafka": "true" if plan == "tasks" else "false",
            # The source by name: the session has Spark's connector for S, and "auto" would
            # pick it for every case.
            "blockgz.kafka.source": "spark" if plan == "spark" else "blockgz",
            "blockgz.spark.kafka.jars": eb.SPARK_KAFKA_JARS if plan == "spark" else "none",
            "name": JOB_NAME,
            **({"topics.regex": re.escape(topic)} if pattern else {"topics": topic}),
            "kafka.bootstrap.servers": kafka.bootstrap_servers,
            "s3.bucket.name": bucket,
            **s3_options(s3.endpoint_url),
            "format.class": "json",
            "s3.compression.type": "blockgzip",
            "maxOffsetsPerTrigger": str(eb.MAX_OFFSETS_PER_TRIGGER),
            **(extra or {}),
        }
    )


def run_blockgz(spark, job, checkpoint: Path):
    from blockgz.sink.export.job import run_export

    return run_export(
        job, checkpoint=checkpoint, once=True, spark=spark, install_signal_handlers=False
    )


def run_hand_written(spark, kafka, topic: str, fmt: str, path: Path, checkpoint: Path) -> None:
    """The pipeline a PySpark user writes: Spark's Kafka source, the value as a string, Spark's
    file sink with gzip, ``availableNow`` (``maxOffsetsPerTrigger`` as the export's)."""
    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", eb.MAX_OFFSETS_PER_TRIGGER)
        .load()
        .selectExpr("CAST(value AS STRING) AS value")
        .writeStream.format(fmt)
        .option("compression", "gzip")
        .option("path", str(path))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    error = query.exception()
    if error is not None:
        raise RuntimeError(f"the {fmt} sink failed: {error}")


def _timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - started


@dataclass
class Round:
    """One full-size run of a case: its value, wall seconds and process-tree usage."""

    index: int
    value: Any = None
    seconds: float = 0.0
    usage: pu.TreeUsage | None = None
    sampler: pu.TreeSampler | None = None


def measure(
    benchmark, servers: dict[str, int], prepare: Callable[[int], Callable[[], Any]]
) -> list[Round]:
    """A warm-up round, then the measured one (pedantic, 1 round × 1 iteration).

    ``prepare(i)`` (untimed) gives round ``i`` its fresh bucket/directory/checkpoint and
    returns what to run. The process tree is sampled during each round separately.
    """
    rounds: list[Round] = []

    def setup():
        rounds.append(Round(len(rounds)))
        return (prepare(rounds[-1].index),), {}

    def run(fn: Callable[[], Any]) -> Any:
        current = rounds[-1]
        sampler = pu.TreeSampler(servers).start()
        current.usage = sampler.usage
        current.value, current.seconds = _timed(fn)
        current.sampler = sampler
        return current.value

    def teardown(_fn: Callable[[], Any]) -> None:
        assert rounds[-1].sampler is not None
        rounds[-1].sampler.stop()

    benchmark.pedantic(run, setup=setup, teardown=teardown, rounds=1, warmup_rounds=1, iterations=1)
    last = rounds[-1]
    if last.sampler is not None and not last.sampler.usage.wall_s:  # disabled: no teardown
        last.sampler.stop()
    return rounds


def case_result(key: str, rounds: list[Round], data: eb.Dataset, output: eb.Output, **extra):
    last = rounds[-1]
    assert last.usage is not None
    first = rounds[0].seconds if len(rounds) > 1 else None
    return rep.CaseResult(
        key, last.seconds, data.records, data.value_bytes, output, last.usage, extra, first
    )


def record(benchmark, result: rep.CaseResult, data: eb.Dataset) -> None:
    assert result.output.records == data.records, (
        f"{result.key}: found {result.output.records:,} records, produced {data.records:,}"
    )
    rep.RESULTS[result.key] = result
    benchmark.extra_info.update(
        {
            "scale": eb.SCALE,
            "records": result.records,
            "seconds": round(result.seconds, 3),
            "records_per_s": round(result.records_per_s),
            "mb_per_s": round(result.mb_per_s, 2),
            "peak_driver_rss": result.usage.peak_driver_rss,
            "peak_workers_rss": result.usage.peak_rss.get("workers"),
            "peak_workers_pss": result.usage.peak_pss.get("workers"),
            "other_cores": round(result.usage.other_cores or 0.0, 2),
            **{k: v for k, v in result.extra.items() if isinstance(v, int | float | str)},
        }
    )


@pytest.mark.benchmark(group="export")
@pytest.mark.parametrize("plan", ["spark", "rows", "tasks"])
def test_export_blockgz(
    benchmark, warm_spark, kafka, s3, servers, dataset, tmp_path, quiet_machine, report, plan
):
    """S: ``run_export`` with Spark's Kafka source and the blockgz sink (JSON, block-GZIP) to
    SeaweedFS S3; A: the same with blockgz-kafka; A': A with ``blockgz.tasks.read.kafka``."""
    jobs = {}

    def prepare(i: int) -> Callable[[], Any]:
        bucket = new_bucket(s3, f"bench-export-blockgz-{plan}-{i}")
        job = jobs[i] = job_config(kafka, s3, bucket, dataset.topic, plan)
        return lambda: run_blockgz(warm_spark, job, tmp_path / f"ckpt-{i}")

    rounds = measure(benchmark, servers, prepare)
    result, job = rounds[-1].value, jobs[rounds[-1].index]
    store, prefix = job.sink.make_store()
    try:
        output = eb.check_s3_output(store, prefix, dataset.topic)
        listed = job.sink.manifest_log(store, prefix).committed_values()
    finally:
        store.close()
    assert sum(f.records for f in listed) == dataset.records
    assert len(listed) == output.objects
    assert result.records == dataset.records
    assert output.per_partition == dataset.watermarks
    keys = {"spark": eb.KEY_BLOCKGZ_SPARK, "rows": eb.KEY_BLOCKGZ, "tasks": eb.KEY_BLOCKGZ_TASKS}
    case = case_result(
        keys[plan],
        rounds,
        dataset,
        output,
        batches=result.batches,
        files=result.files,
    )
    record(benchmark, case, dataset)


@pytest.mark.benchmark(group="export")
@pytest.mark.parametrize("fmt", ["json", "text"])
def test_export_hand_written(
    benchmark, warm_spark, kafka, servers, dataset, tmp_path, quiet_machine, report, fmt
):
    """H: ``readStream.format("kafka")`` → Spark's json file sink (gzip, local disk); H': text."""
    pattern = f"part-*.{'json' if fmt == 'json' else 'txt'}.gz"

    def prepare(i: int) -> Callable[[], Any]:
        shutil.rmtree(tmp_path / f"out-{i - 1}", ignore_errors=True)  # the warm-up's output
        out, checkpoint = tmp_path / f"out-{i}", tmp_path / f"ckpt-{i}"
        return lambda: run_hand_written(warm_spark, kafka, dataset.topic, fmt, out, checkpoint)

    rounds = measure(benchmark, servers, prepare)
    out = tmp_path / f"out-{rounds[-1].index}"
    output = eb.check_local_output(out, pattern)
    shutil.rmtree(out, ignore_errors=True)
    key = eb.KEY_JSON if fmt == "json" else eb.KEY_TEXT
    record(benchmark, case_result(key, rounds, dataset, output), dataset)


@pytest.mark.benchmark(group="export")
@pytest.mark.parametrize("tuning", ["defaults", "tuned"])
def test_export_consumer_loop(
    benchmark, kafka, s3, servers, dataset, quiet_machine, report, tuning
):
    """C: 2 processes × 2 partitions: consume, validate, block-GZIP, upload, index.

    ``tuned`` is the ceiling (see :data:`eb.LOOP_CONSUMER_TUNING`); ``defaults`` is C0."""
    from blockgz.store import open_store

    options = s3_options(s3.endpoint_url)
    clock: dict[int, float] = {}

    def prepare(i: int) -> Callable[[], Any]:
        bucket = new_bucket(s3, f"bench-export-loop-{tuning}-{i}")
        jobs = [
            loop.LoopJob(
                kafka.bootstrap_servers,
                dataset.topic,
                parts,
                dict(dataset.watermarks),
                f"s3://{bucket}",
                options,
                eb.OFFSETS_PER_OBJECT,
                eb.LOOP_CONSUMER_TUNING if tuning == "tuned" else {},
            )
            for parts in ((0, 1), (2, 3))
        ]

        def run() -> list[dict[str, Any]]:
            clock[i] = time.time()
            return loop.run_loop_processes(jobs)

        return run

    rounds = measure(benchmark, servers, prepare)
    last = rounds[-1]
    done, started = last.value, clock[last.index]
    store, prefix = open_store(f"s3://bench-export-loop-{tuning}-{last.index}", options)
    try:
        output = eb.check_s3_output(store, prefix, dataset.topic)
    finally:
        store.close()
    assert sum(d["records"] for d in done) == dataset.records
    assert sum(d["value_bytes"] for d in done) == dataset.value_bytes
    assert output.per_partition == dataset.watermarks
    assert last.usage is not None
    last.usage.set_cpu("loop", sum(d["cpu_s"] for d in done))  # exact: each process's rusage
    case = case_result(
        eb.KEY_LOOP if tuning == "tuned" else eb.KEY_LOOP_DEFAULTS,
        rounds,
        dataset,
        output,
        loop_max_rss=[d["max_rss"] for d in done],
        process_start_s=min(d["started"] for d in done) - started,
        first_message_s=min(d["first_message"] for d in done) - started,
    )
    record(benchmark, case, dataset)


# -- Connect's transforms (issue 42) ---------------------------------------------------------------
K = "org.apache.kafka.connect.transforms."
#: The chain of three: a static field inserted, one field dropped and one renamed, the topic
#: routed (the objects go under ``<topic>-routed``).
THREE_TRANSFORMS = {
    "transforms": "insert,replace,route",
    "transforms.insert.type": K + "InsertField$Value",
    "transforms.insert.static.field": "dc",
    "transforms.insert.static.value": "eu-1",
    "transforms.replace.type": K + "ReplaceField$Value",
    "transforms.replace.exclude": "session",
    "transforms.replace.renames": "user:user_id",
    "transforms.route.type": K + "RegexRouter",
    "transforms.route.regex": "(.*)",
    "transforms.route.replacement": "$1-routed",
}
TRANSFORMS_ROUNDS = 5
TRANSFORMS_RESULTS = Path(__file__).with_name("results") / "export-transforms.md"


@pytest.mark.benchmark(group="export-transforms")
def test_export_transforms(
    benchmark, warm_spark, kafka, s3, servers, dataset, tmp_path, quiet_machine, report
):
    """A (the default export) without and with the chain of three, in one run: a warm-up of
    each, then :data:`TRANSFORMS_ROUNDS` rounds of both, the order alternating; wall time and
    the CPU of every process of the export (the broker and S3 included). The goal (issue
    42): the chain costs at most 15 % of the export's throughput."""
    times: dict[str, list[float]] = {"none": [], "three": []}
    usages: dict[str, list[pu.TreeUsage]] = {"none": [], "three": []}
    jobs: dict[str, Any] = {}

    def export(case: str, i: int) -> float:
        bucket = new_bucket(s3, f"bench-export-transforms-{case}-{i}")
        chain = THREE_TRANSFORMS if case == "three" else None
        job = jobs[case] = job_config(kafka, s3, bucket, dataset.topic, "tasks", chain)
        sampler = pu.TreeSampler(servers).start()
        result, seconds = _timed(
            lambda: run_blockgz(warm_spark, job, tmp_path / f"ckpt-{case}-{i}")
        )
        usages[case].append(sampler.stop())
        assert result.records == dataset.records
        return seconds

    def one_round() -> None:
        i = len(times["three"])
        for case in ("none", "three") if i % 2 == 0 else ("three", "none"):
            times[case].append(export(case, i))

    benchmark.pedantic(one_round, rounds=TRANSFORMS_ROUNDS, warmup_rounds=1, iterations=1)
    for case, topic in (("none", dataset.topic), ("three", dataset.topic + "-routed")):
        store, prefix = jobs[case].sink.make_store()
        try:
            output = eb.check_s3_output(store, prefix, topic)
            if case == "three":
                first = next(
                    i.key
                    for i in store.list(prefix + "topics/")
                    if i.key.endswith(".json.gz") and not i.key.rsplit("/", 1)[1].startswith(".")
                )
                _check_transformed(store.get(first))
        finally:
            store.close()
        assert output.records == dataset.records and output.per_partition == dataset.watermarks
    rounds = {case: t[-TRANSFORMS_ROUNDS:] for case, t in times.items()}
    cpu = {case: [u.cpu_s for u in found[-TRANSFORMS_ROUNDS:]] for case, found in usages.items()}
    others = [u.other_cores or 0.0 for found in usages.values() for u in found[-TRANSFORMS_ROUNDS:]]
    text = _transforms_report(rounds, cpu, others, dataset)
    benchmark.extra_info.update(
        {f"{case}_s": [round(s, 3) for s in t] for case, t in rounds.items()},
        records=dataset.records,
    )
    if support.MEANINGFUL:
        TRANSFORMS_RESULTS.parent.mkdir(exist_ok=True)
        TRANSFORMS_RESULTS.write_text(text)
    print("\n" + text)


def _check_transformed(data: bytes) -> None:
    """The first record of an object of the chain: the field inserted, dropped, renamed."""
    import orjson
    from isal import igzip

    first = orjson.loads(igzip.decompress(data).split(b"\n", 1)[0])
    assert first["dc"] == "eu-1" and "user_id" in first
    assert "session" not in first and "user" not in first


def _transforms_report(
    rounds: dict[str, list[float]],
    cpu: dict[str, list[dict[str, float]]],
    others: list[float],
    data: eb.Dataset,
) -> str:
    """The two cases' medians, CPU per record and the throughput ratio, with the goal."""
    import statistics

    from benchmarks import report as rp

    median = {case: statistics.median(t) for case, t in rounds.items()}
    ratio = median["none"] / median["three"]  # throughput with the chain / without

    def per_record(case: str, groups: tuple[str, ...] | None = None) -> float:
        totals = [sum(v for g, v in c.items() if groups is None or g in groups) for c in cpu[case]]
        return statistics.median(totals) / data.records * 1e6

    cpu_ratio = per_record("none") / per_record("three")
    rows = [
        [
            title,
            f"{median[case]:.2f} ({', '.join(f'{s:.2f}' for s in rounds[case])})",
            f"{data.records / median[case]:,.0f}",
            f"{per_record(case):.1f}",
            f"{per_record(case, ('workers',)):.1f}",
            "1.00×" if case == "none" else f"{ratio:.2f}×",
        ]
        for case, title in (
            ("none", "A. the default export, no transforms"),
            ("three", "A with InsertField$Value, ReplaceField$Value, RegexRouter"),
        )
    ]
    header = [
        "case",
        "wall s, median (rounds)",
        "records/s",
        "CPU µs/record (all)",
        "CPU µs/record (Python workers)",
        "throughput vs none",
    ]
    lines = [
        "# blockgz export: what a chain of three Connect transforms costs (issue 42)",
        "",
        f"- {data.records:,} JSON records (~{data.value_bytes // data.records} B) in "
        f"{eb.PARTITIONS} partitions, Apache Kafka → blockgz export (blockgz-kafka, sink tasks "
        "read Kafka) → SeaweedFS, block-GZIP JSON; one SparkSession `local[2,3]`; a warm-up "
        f"of each case, then {len(rounds['none'])} rounds of both, the order alternating. CPU: "
        "user + system of every process of the export (driver, JVM, Python workers, broker, S3).",
        f"- machine: {rp.machine_line()}; other processes used "
        f"{min(others):.2f}–{max(others):.2f} cores during the rounds.",
        "",
        *rp.table(header, rows),
        "",
        f"Goal: the chain keeps ≥ 0.85× the throughput: {ratio:.2f}× by wall time "
        f"**{rp.verdict(ratio >= 0.85)}**; by CPU per record {cpu_ratio:.2f}×.",
    ]
    if not support.MEANINGFUL:
        lines.insert(1, "\n**Smoke-test scale: not meaningful.**\n")
    return "\n".join(lines) + "\n"
