"""Interleaved export comparison: the cases of ``test_export_bench.py`` in one process, in
rotating order, several rounds, with wall time *and* CPU time of every process of the case.

On a shared machine wall-clock ratios move with the neighbours' load; CPU seconds per record
(driver, JVM, Python workers, broker, S3 server: ``process_usage.TreeSampler``) move much less,
and interleaving the cases gives each the same share of the disturbance. ::

    PYTHONPATH=. .venv/bin/python -m benchmarks.export_ab --records 1000000 --rounds 3 \\
        --cases json,tasks,rows,spark

Cases (the keys of ``--cases``): ``json``/``text`` the hand-written pipeline (H/H'),
``spark`` blockgz export with Spark's Kafka source (S), ``rows`` with blockgz-kafka (A),
``tasks`` with ``blockgz.tasks.read.kafka=true`` (A'). Prints one line per run and a table of
medians; every output is counted (each run must write every record).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import export_support as eb
from benchmarks import process_usage as pu
from benchmarks import test_export_bench as bench

CASES = ("json", "text", "spark", "rows", "tasks")


def _run_case(case, spark, kafka, s3, topic, base: Path, index: int):
    """Run one case once; the number of records it wrote."""
    if case in ("json", "text"):
        out = base / f"out-{case}-{index}"
        bench.run_hand_written(spark, kafka, topic, case, out, base / f"ck-{case}-{index}")
        pattern = f"part-*.{'json' if case == 'json' else 'txt'}.gz"
        count = eb.check_local_output(out, pattern).records
        shutil.rmtree(out, ignore_errors=True)
        return count
    bucket = bench.new_bucket(s3, f"ab-{case}-{index}")
    job = bench.job_config(kafka, s3, bucket, topic, case)
    checkpoint = base / f"ck-{case}-{index}"
    if case == "spark":
        result = bench.run_blockgz(spark, job, checkpoint)
    else:
        with bench.blockgz_kafka_source():
            result = bench.run_blockgz(spark, job, checkpoint)
    return result.records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", default="json,tasks,rows")
    parser.add_argument("--batch", type=int, default=0, help="maxOffsetsPerTrigger (default: /4)")
    args = parser.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; allowed: {', '.join(CASES)}")
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
    base = Path(tempfile.mkdtemp(prefix="export-ab-"))
    with ApacheKafka() as kafka, SeaweedS3() as s3:
        servers = {"s3": s3._proc.pid, "kafka": kafka._process.pid}
        data = eb.produce_dataset(kafka, "ab_export", per_partition)
        warm = eb.produce_dataset(kafka, "ab_warm", eb.WARMUP_PER_PARTITION)
        conf = {"spark.sql.execution.arrow.maxRecordsPerBatch": str(eb.ARROW_BATCH_ROWS)}
        spark = spark_session(
            "local[2,3]",
            app_name="blockgz-export-ab",
            conf=with_jars(conf, connector_jars(eb.SPARK_KAFKA_JARS)),
        )
        try:
            for case in cases:  # warm-up: first-use costs out of the rounds
                _run_case(case, spark, kafka, s3, warm.topic, base, 0)
            runs: dict[str, list[tuple[float, dict[str, float]]]] = {c: [] for c in cases}
            for r in range(args.rounds):
                order = cases[r % len(cases) :] + cases[: r % len(cases)]
                for case in order:
                    sampler = pu.TreeSampler(servers).start()
                    started = time.perf_counter()
                    count = _run_case(case, spark, kafka, s3, data.topic, base, r + 1)
                    wall = time.perf_counter() - started
                    usage = sampler.stop()
                    assert count == data.records, f"{case}: {count:,} of {data.records:,}"
                    runs[case].append((wall, dict(usage.cpu_s)))
                    cpu = sum(usage.cpu_s.values())
                    print(
                        f"round {r + 1} {case:6s} wall {wall:6.2f} s  cpu {cpu:6.2f} s  "
                        + " ".join(f"{g} {s:.2f}" for g, s in usage.cpu_s.items() if s)
                        + f"  other cores {usage.other_cores or 0:.2f}"
                        + f"  load {os.getloadavg()[0]:.2f}",
                        flush=True,
                    )
        finally:
            spark.stop()
            shutil.rmtree(base, ignore_errors=True)
    n = data.records / 1e6
    first = cases[0]
    ref = statistics.median(w for w, _ in runs[first])
    print(f"\n{data.records:,} records; medians of {args.rounds} rounds; CPU s per 1M records")
    print("| case | wall s | vs " + first + " | CPU s/1M | driver | jvm | workers | kafka | s3 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for case in cases:
        wall = statistics.median(w for w, _ in runs[case])
        groups = {g: statistics.median(c.get(g, 0.0) for _, c in runs[case]) / n for g in pu.GROUPS}
        total = statistics.median(sum(c.values()) for _, c in runs[case]) / n
        print(
            f"| {case} | {wall:.2f} | {ref / wall:.2f}× | {total:.2f} | "
            + " | ".join(f"{groups[g]:.2f}" for g in ("driver", "jvm", "workers", "kafka", "s3"))
            + " |"
        )


if __name__ == "__main__":
    main()
