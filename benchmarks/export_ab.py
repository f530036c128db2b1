"""The export benchmark (``make bench-export``): every case in one process, interleaved
(rotated each round), an uncounted warm-up round first, medians of the counted rounds, wall
time *and* CPU time of every process of the case, and the targets with PASS/FAIL.

On a shared machine wall-clock ratios move with the neighbours' load; CPU seconds per record
(driver, JVM, Python workers, loop processes, broker, S3 server: ``process_usage.TreeSampler``)
move much less, and interleaving the cases gives each the same share of the disturbance. The
warm-up round runs every case once on the whole topic (``--warmup full``, the default) so the
JVM's JIT, the Python workers and the first connections are paid outside the counted rounds
(a hand-written pipeline's first round took 12 s against 7-8 s after it). ::

    PYTHONPATH=. .venv/bin/python -m benchmarks.export_ab --rounds 3 \\
        --cases json,text,spark,blockgz,rows,loop

Cases (the keys of ``--cases``): ``json``/``text`` the hand-written pipeline (H/H'),
``spark`` blockgz export with Spark's Kafka source (S), ``blockgz`` with blockgz-kafka as
exported by default (A: the sink's tasks read Kafka), ``rows`` the same with
``blockgz.tasks.read.kafka=false`` (A0), ``loop`` the plain confluent-kafka loop (C, 2
processes). Targets: A and S ≥ 1.0× H (json) and ≥ 0.6× C. Every output is counted (each run
must write every record). ``--records`` defaults to 1M × ``BLOCKGZ_BENCH_SCALE``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import export_loop as loop
from benchmarks import export_rounds as er
from benchmarks import export_support as eb
from benchmarks import process_usage as pu
from benchmarks import test_export_bench as bench
from testkit.s3 import s3_options

CASES = ("json", "text", "spark", "sparkpattern", "sparkarrow", "blockgz", "rows", "loop")
#: S': Spark's Arrow batches with no byte limit, so Spark does not measure the batch after
#: every row (it skips that at exactly ``Int.MaxValue``); docs/export.md says when to use it.
NO_BATCH_BYTES = {"spark.sql.execution.arrow.maxBytesPerBatch": "2147483647"}
#: Older names of the cases: ``tasks`` was A' when the sink's tasks reading Kafka was opt-in.
ALIASES = {"tasks": "blockgz"}
DEFAULT_CASES = ",".join(CASES)
RESULTS_PATH = eb.RESULTS_PATH.with_name("export-interleaved.md")


def _run_loop(kafka, s3, data: eb.Dataset, bucket: str) -> tuple[int, float]:
    """The consumer loop once into ``bucket``: records written, and the loop processes' exact
    CPU seconds."""
    per_object = max(1, eb.MAX_OFFSETS_PER_TRIGGER // eb.PARTITIONS)
    options = s3_options(s3.endpoint_url)
    jobs = [
        loop.LoopJob(kafka.bootstrap_servers, data.topic, parts, dict(data.watermarks),
                     f"s3://{bucket}", options, per_object, eb.LOOP_CONSUMER_TUNING)
        for parts in ((0, 1), (2, 3))
    ]  # fmt: skip
    done = loop.run_loop_processes(jobs)
    return sum(d["records"] for d in done), sum(d["cpu_s"] for d in done)


def _run_case(case, spark, kafka, s3, data: eb.Dataset, base: Path, index: int, bucket: str):
    """Run one case once (into ``bucket`` when it writes to S3): what counts the records it
    wrote (called once the clock has stopped: reading H's files back is not H's time), and
    its exact CPU seconds when the case measures them itself (the loop's processes), else
    ``None``."""
    if case == "loop":
        records, cpu_s = _run_loop(kafka, s3, data, bucket)
        return (lambda: records), cpu_s
    topic = data.topic
    if case in ("json", "text"):
        out = base / f"out-{case}-{index}"
        bench.run_hand_written(spark, kafka, topic, case, out, base / f"ck-{case}-{index}")

        def count_files() -> int:
            pattern = f"part-*.{'json' if case == 'json' else 'txt'}.gz"
            count = eb.check_local_output(out, pattern).records
            shutil.rmtree(out, ignore_errors=True)
            return count

        return count_files, None
    plan = {"blockgz": "tasks", "rows": "rows", "sparkpattern": "spark"}.get(case, "spark")
    # S'': one topic by pattern, so the rows keep `topic` (query.rows_read), as with several.
    pattern = case == "sparkpattern"
    job = bench.job_config(kafka, s3, bucket, topic, plan, pattern=pattern)
    checkpoint = base / f"ck-{case}-{index}"
    if case == "sparkarrow":  # the shared session's SQL conf, for this run only
        before = {k: spark.conf.get(k) for k in NO_BATCH_BYTES}
        for key, value in NO_BATCH_BYTES.items():
            spark.conf.set(key, value)
        try:
            result = bench.run_blockgz(spark, job, checkpoint)
        finally:
            for key, value in before.items():
                spark.conf.set(key, value)
    else:  # the job names its source (bench.job_config)
        result = bench.run_blockgz(spark, job, checkpoint)
    return (lambda: result.records), None


IDLE_S = 5.0


def idle_rates(servers: dict[str, int]) -> dict[str, float]:
    """CPU seconds per second of each process group while no case runs (``IDLE_S``): the
    broker's, the S3 server's and the session's background, which every case pays for as long
    as it runs (a slower case pays more of it)."""
    sampler = pu.TreeSampler(servers).start()
    time.sleep(IDLE_S)  # the measuring window, not a wait for anything
    usage = sampler.stop()
    return {g: s / usage.wall_s for g, s in usage.cpu_s.items() if g != "loop"}


def _cases(text: str, parser: argparse.ArgumentParser) -> list[str]:
    cases = [ALIASES.get(c, c) for c in text.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; allowed: {', '.join(CASES)}")
    return list(dict.fromkeys(cases))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=eb.TOTAL_RECORDS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", default=DEFAULT_CASES)
    parser.add_argument(
        "--warmup",
        choices=("full", "small", "none"),
        default="full",
        help="the uncounted first round: on the whole topic (default), on a small one, none",
    )
    parser.add_argument("--batch", type=int, default=0, help="maxOffsetsPerTrigger (default: /4)")
    args = parser.parse_args()
    cases = _cases(args.cases, parser)
    per_partition = args.records // eb.PARTITIONS + 1
    eb.MAX_OFFSETS_PER_TRIGGER = args.batch or max(1000, args.records // 4)

    from blockgz.local_servers.apache_kafka import ApacheKafka
    from blockgz.local_servers.seaweed import SeaweedS3
    from blockgz.sink.session import spark_session
    from blockgz.sink.spark_kafka import connector_jars, with_jars

    # Byte-compiled once: under PYTHONDONTWRITEBYTECODE every new Python worker would compile
    # blockgz's modules again, a cost no installed copy (wheels ship byte code) pays.
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", "blockgz", "sink", "reader"],
        cwd=Path(__file__).resolve().parent.parent,
        check=False,
        stdout=subprocess.DEVNULL,
    )
    started_all = time.perf_counter()
    base = Path(tempfile.mkdtemp(prefix="export-ab-"))
    runs: list[er.Run] = []
    with ApacheKafka() as kafka, SeaweedS3() as s3:
        servers = {"s3": s3._proc.pid, "kafka": kafka._process.pid}
        data = eb.produce_dataset(kafka, "ab_export", per_partition)
        print(f"produced {data.records:,} records in {data.produce_s:.1f} s", flush=True)
        warm = data
        if args.warmup == "small":
            warm = eb.produce_dataset(kafka, "ab_warm", eb.WARMUP_PER_PARTITION)
        conf = {"spark.sql.execution.arrow.maxRecordsPerBatch": str(eb.ARROW_BATCH_ROWS)}
        spark = spark_session(
            "local[2,3]",
            app_name="blockgz-export-ab",
            conf=with_jars(conf, connector_jars(eb.SPARK_KAFKA_JARS)),
        )
        jvm = pu.jvm_child()  # its JIT compiler's CPU is reported apart
        idle: dict[str, float] = {}
        try:
            for r in range(0 if args.warmup != "none" else 1, args.rounds + 1):
                if r == 1:
                    idle = idle_rates(servers)
                order = cases[r % len(cases) :] + cases[: r % len(cases)]
                for case in order:
                    # Made before the clock starts, as pytest-benchmark's untimed setup does.
                    bucket = (
                        "" if case in ("json", "text") else bench.new_bucket(s3, f"ab-{case}-{r}")
                    )
                    jit_before = pu.jit_cpu_s(jvm) if jvm else 0.0
                    sampler = pu.TreeSampler(servers).start()
                    started = time.perf_counter()
                    topic = warm if r == 0 else data
                    counted, exact_cpu = _run_case(case, spark, kafka, s3, topic, base, r, bucket)
                    wall = time.perf_counter() - started
                    usage = sampler.stop()
                    count = counted()  # after the clock (until 2026-12-06 H's count was timed)
                    jit = pu.jit_cpu_s(jvm) - jit_before if jvm else 0.0
                    if exact_cpu is not None:
                        usage.set_cpu("loop", exact_cpu)  # each loop process's own rusage
                        # The session's JVM and Python workers idle beside the loop, which
                        # does not use them: their background CPU is not the loop's.
                        usage.cpu_s["jvm"] = usage.cpu_s["workers"] = 0.0
                        jit = 0.0
                    assert count == topic.records, f"{case}: {count:,} of {topic.records:,}"
                    cpu = dict(usage.cpu_s)
                    label = "warm-up" if r == 0 else f"round {r}"
                    print(
                        f"{label:7s} {case:7s} wall {wall:6.2f} s  cpu {sum(cpu.values()):6.2f} s"
                        f"  µs/record {sum(cpu.values()) / count * 1e6:5.1f}  "
                        + " ".join(f"{g} {s:.2f}" for g, s in cpu.items() if s)
                        + f"  (jit {jit:.2f})"
                        + f"  other cores {usage.other_cores or 0:.2f}"
                        + f"  load {os.getloadavg()[0]:.2f}",
                        flush=True,
                    )
                    if r > 0:
                        runs.append(er.Run(case, r, wall, cpu, count, jit))
        finally:
            spark.stop()
            shutil.rmtree(base, ignore_errors=True)
    in_order = sorted(runs, key=lambda run: cases.index(run.case))  # the table in --cases order
    text = er.render(er.summarize(in_order), args.rounds, args.warmup, in_order)
    text += (
        f"\nIdle CPU before the counted rounds ({IDLE_S:g} s, CPU-s per s of wall): "
        + ", ".join(f"{g} {rate:.3f}" for g, rate in idle.items())
        + " (counted in every case for as long as it runs).\n"
    )
    text += f"\nWall time of the whole benchmark: {time.perf_counter() - started_all:.0f} s.\n"
    print("\n" + text)
    if args.records >= 1_000_000 and set(cases) == set(CASES) and args.warmup == "full":
        RESULTS_PATH.write_text("# blockgz export, interleaved (`make bench-export`)\n\n" + text)
        print(f"written to {RESULTS_PATH}")


if __name__ == "__main__":
    main()
