"""The JVM's CPU per record on the Spark Kafka source's way into Python, by projected columns
and with Spark's per-row Arrow byte check on or off (issue 44, case S's gap).

A batch read of ``make bench-export``'s topic (1M records, 4 partitions, ~250-byte JSON values)
through ``mapInArrow`` into a Python function that only counts rows: the same Arrow writer the
export's Python data source sink is fed by, without the sink's own work. Variants run
interleaved (rotated each round) after an uncounted warm-up round; the JVM's and its Python
workers' CPU are sampled by :class:`benchmarks.process_usage.TreeSampler`. ::

    PYTHONPATH=. .venv/bin/python -m benchmarks.spark_arrow_columns --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Iterator

from benchmarks import export_support as eb
from benchmarks import process_usage as pu

#: The sink's columns by default, then without ``topic`` (one-topic job), then without
#: ``timestampType`` too (``store.kafka.timestamps=false``), then the default columns with
#: Spark's byte check off (it is skipped at exactly ``Int.MaxValue``).
_SINK_COLUMNS = ("value", "topic", "partition", "offset", "timestamp", "timestampType")
_SPARK_LIMIT = 64 << 20  # spark.sql.execution.arrow.maxBytesPerBatch's default
VARIANTS: dict[str, tuple[tuple[str, ...], int]] = {
    "6 columns": (_SINK_COLUMNS, _SPARK_LIMIT),
    "5, no topic": (tuple(c for c in _SINK_COLUMNS if c != "topic"), _SPARK_LIMIT),
    "4, no topic or type": (("value", "partition", "offset", "timestamp"), _SPARK_LIMIT),
    "6, no byte check": (_SINK_COLUMNS, 2_147_483_647),
}


def _count_rows(batches: Iterator) -> Iterator:
    import pyarrow as pa

    yield pa.RecordBatch.from_pydict({"n": [sum(b.num_rows for b in batches)]})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=eb.TOTAL_RECORDS)
    args = parser.parse_args()

    from blockgz.local_servers.apache_kafka import ApacheKafka
    from blockgz.sink.session import spark_session
    from blockgz.sink.spark_kafka import connector_jars, with_jars

    per_jvm: dict[str, list[float]] = {name: [] for name in VARIANTS}
    with ApacheKafka() as kafka:
        data = eb.produce_dataset(kafka, "arrow_columns", args.records // eb.PARTITIONS + 1)
        conf = {"spark.sql.execution.arrow.maxRecordsPerBatch": str(eb.ARROW_BATCH_ROWS)}
        spark = spark_session(
            "local[2,3]",
            app_name="blockgz-arrow-columns",
            conf=with_jars(conf, connector_jars(eb.SPARK_KAFKA_JARS)),
        )
        if pu.jvm_child() is None:
            raise RuntimeError("no Spark JVM among this process's children")
        servers = {"kafka": kafka._process.pid}  # the broker's CPU apart from the JVM's
        names = list(VARIANTS)
        try:
            for r in range(args.rounds + 1):
                for name in names[r % len(names) :] + names[: r % len(names)]:
                    columns, max_bytes = VARIANTS[name]
                    spark.conf.set("spark.sql.execution.arrow.maxBytesPerBatch", str(max_bytes))
                    frame = (
                        spark.read.format("kafka")
                        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
                        .option("subscribe", data.topic)
                        .option("startingOffsets", "earliest")
                        .option("endingOffsets", "latest")
                        .option("kafka.max.poll.records", "20000")  # as the export reads
                        .load()
                        .select(*columns)
                    )
                    sampler = pu.TreeSampler(servers).start()
                    rows = frame.mapInArrow(_count_rows, "n long").groupBy().sum("n").first()[0]
                    usage = sampler.stop()
                    assert rows == data.records, f"{name}: {rows:,} of {data.records:,} rows"
                    jvm_us = usage.cpu_s["jvm"] / rows * 1e6
                    if r > 0:
                        per_jvm[name].append(jvm_us)
                    print(
                        f"{'warm-up' if r == 0 else f'round {r}':8s} {name:20s} "
                        f"JVM {jvm_us:5.2f} µs/record  workers "
                        f"{usage.cpu_s['workers'] / rows * 1e6:4.2f}  wall {usage.wall_s:5.2f} s  "
                        f"load {os.getloadavg()[0]:.2f}",
                        flush=True,
                    )
        finally:
            spark.stop()
    print("\n| columns into Python | JVM µs/record, median (rounds) |\n|---|---|")
    for name, values in per_jvm.items():
        rounds = ", ".join(f"{v:.2f}" for v in values)
        print(f"| {name} | {statistics.median(values):.2f} ({rounds}) |")


if __name__ == "__main__":
    main()
