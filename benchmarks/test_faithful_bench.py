"""What a faithful archive costs: keys and headers files, and a dead-letter queue.

One write task (:func:`blockgz.sink.write.task.write_task`, what each Spark task runs) over the same
Arrow batches of one topic-partition — 1M records × ``BLOCKGZ_BENCH_SCALE`` of ~200-byte JSON
values with a 12-byte key and two headers — into a local directory, block-GZIP JSON, in one
run:

* values only, vs values + ``store.kafka.keys`` (JSON) + ``store.kafka.headers`` (Avro):
  goal ≤ 1.3× the time;
* no bad records, vs 1 % bad records with ``errors.tolerance=all`` and the store's
  dead-letter queue (the ratio is reported).

The table goes to ``results/faithful.md`` and the terminal; ``benchmarks/README.md`` keeps
the last full-scale one.
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from pathlib import Path

import pytest

from benchmarks import report as rp
from benchmarks import support
from blockgz.sink.records import kafka_arrow_schema
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task

RECORDS = max(10_000, int(1_000_000 * support.SCALE))
BATCH = 50_000
ROUNDS = 3
RESULTS_PATH = Path(__file__).with_name("results") / "faithful.md"

CASES = {
    "values only": {},
    "values + keys + headers": {
        "store.kafka.keys": "true",
        "keys.format.class": "json",
        "store.kafka.headers": "true",
    },
    "1 % bad records, dead-letter queue": {
        "errors.tolerance": "all",
        "blockgz.deadletterqueue.store": "true",
    },
}
TIMES: dict[str, list[float]] = {}


def _batches(bad_share: float):
    import pyarrow as pa

    schema = kafka_arrow_schema(True)
    out = []
    for start in range(0, RECORDS, BATCH):
        n = min(BATCH, RECORDS - start)
        values = []
        for i in range(start, start + n):
            if bad_share and i % int(1 / bad_share) == 7:
                values.append(b"\xffnot json %d" % i)
            else:
                values.append(
                    json.dumps(
                        {
                            "i": i,
                            "user": f"user-{i % 9973}",
                            "page": f"/p/{i % 311}" * 4,
                            "ts": 1_700_000_000_000 + i,
                            "ok": True,
                            "pad": "x" * 80,
                        }
                    ).encode()
                )
        columns = {
            "key": [b"user-%07d" % i for i in range(start, start + n)],
            "value": values,
            "topic": ["t"] * n,
            "partition": [0] * n,
            "offset": list(range(start, start + n)),
            "timestamp": [1_700_000_000_000_000 + i for i in range(start, start + n)],
            "timestampType": [0] * n,
            "headers": [[{"key": "trace", "value": b"%016x" % i}, {"key": "v", "value": b"1"}]] * n,
        }
        out.append(pa.RecordBatch.from_pydict(columns, schema=schema))
    return out


@pytest.fixture(scope="module")
def batches():
    return {"clean": _batches(0.0), "bad": _batches(0.01)}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.benchmark(group="faithful")
def test_write_task(benchmark, batches, tmp_path, case):
    data = batches["bad" if "bad" in case else "clean"]
    options = {
        "path": str(tmp_path / "out"),
        "s3.compression.type": "blockgzip",
        "flush.size": "200000",
        **CASES[case],
    }
    config = SinkSettings.from_options(options)
    times: list[float] = []

    def run():
        shutil.rmtree(tmp_path / "out", ignore_errors=True)
        started = time.perf_counter()
        message = write_task(config, iter(data))
        times.append(time.perf_counter() - started)
        return message

    message = benchmark.pedantic(run, rounds=ROUNDS, iterations=1, warmup_rounds=1)
    written = sum(f.records for f in message.files if f.role == "value")
    dead = sum(n for parts in message.dead_letters.values() for n in parts.values())
    assert written + dead == RECORDS
    TIMES[case] = times[-ROUNDS:]
    benchmark.extra_info.update(records=RECORDS, dead_letters=dead)


def test_report():
    """The ratios, with the goal; printed and written to ``results/faithful.md``."""
    if len(TIMES) < len(CASES):
        pytest.skip("run the whole file: the report compares its cases")
    median = {case: statistics.median(t) for case, t in TIMES.items()}
    base = median["values only"]
    rows = []
    for case, seconds in median.items():
        ratio = seconds / base
        goal, verdict = "", ""
        if case == "values + keys + headers":
            goal, verdict = "≤ 1.3×", rp.verdict(ratio <= 1.3)
        rows.append(
            [case, f"{seconds:.2f}", f"{RECORDS / seconds:,.0f}", f"{ratio:.2f}×", goal, verdict]
        )
    lines = [
        "# blockgz: what keys, headers and a dead-letter queue cost",
        "",
        f"- {RECORDS:,} records of one topic-partition, ~200-byte JSON values, 12-byte keys, two "
        "headers; one write task (`write_task`, what a Spark task runs) into a local directory, "
        f"block-GZIP JSON, `flush.size=200000`; median of {ROUNDS} rounds after a warm-up.",
        f"- machine: {rp.machine_line()}",
        "",
        *rp.table(["case", "s", "records/s", "vs values only", "goal", "verdict"], rows),
    ]
    if not support.MEANINGFUL:
        lines.insert(1, "\n**Smoke-test scale: not meaningful.**\n")
    text = "\n".join(lines) + "\n"
    RESULTS_PATH.parent.mkdir(exist_ok=True)
    RESULTS_PATH.write_text(text)
    print("\n" + text)
