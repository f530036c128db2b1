"""What Connect's transforms cost on the export path (issue 42: a chain of three ≤ 15 %).

One write task (:func:`blockgz.sink.write.task.write_task`, what each Spark task runs) over the
same Arrow batches of one topic-partition — 1M records × ``BLOCKGZ_BENCH_SCALE`` of ~200-byte
JSON values — into a local directory, block-GZIP JSON, in one run:

* no transforms (valid single-line JSON values go through byte for byte, whole batches);
* one ``RegexRouter`` (a chain that only routes by topic takes whole batches, values untouched);
* a chain of three: ``InsertField$Value`` (a static field), ``ReplaceField$Value`` (one field
  excluded, one renamed) and ``RegexRouter``, compiled for the topic
  (:meth:`~blockgz.sink.transforms.chain.Chain.fused`) and run over whole batches;
* both again record by record (``rotate.interval.ms``, as a field or time partitioner, a value
  converter or a rotation by time would): the path a chain that does not compile takes.

The table goes to ``results/transforms.md`` and the terminal; ``benchmarks/README.md`` keeps
the last one.
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
RESULTS_PATH = Path(__file__).with_name("results") / "transforms.md"
K = "org.apache.kafka.connect.transforms."
#: A rotation by record time (one day: it never cuts here) sends every record down the
#: record-by-record path, where a transformed record goes too.
RECORD_PATH = {"rotate.interval.ms": "86400000"}
THREE = {
    "transforms": "insert,replace,route",
    "transforms.insert.type": K + "InsertField$Value",
    "transforms.insert.static.field": "dc",
    "transforms.insert.static.value": "eu-1",
    "transforms.replace.type": K + "ReplaceField$Value",
    "transforms.replace.exclude": "pad",
    "transforms.replace.renames": "user:user_id",
    "transforms.route.type": K + "RegexRouter",
    "transforms.route.regex": "t",
    "transforms.route.replacement": "routed",
}
CASES = {
    "no transforms": {},
    "one RegexRouter": {
        "transforms": "route",
        "transforms.route.type": K + "RegexRouter",
        "transforms.route.regex": "t",
        "transforms.route.replacement": "routed",
    },
    "three transforms": THREE,
    "no transforms, record by record": RECORD_PATH,
    "three transforms, record by record": {**RECORD_PATH, **THREE},
}
#: Each case's baseline: the same path without transforms.
BASELINE = {
    case: "no transforms, record by record" if "record by record" in case else "no transforms"
    for case in CASES
}
TIMES: dict[str, list[float]] = {}


def _batches():
    import pyarrow as pa

    schema = kafka_arrow_schema(False)
    out = []
    for start in range(0, RECORDS, BATCH):
        n = min(BATCH, RECORDS - start)
        values = [
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
            for i in range(start, start + n)
        ]
        columns = {
            "key": [None] * n,
            "value": values,
            "topic": ["t"] * n,
            "partition": [0] * n,
            "offset": list(range(start, start + n)),
            "timestamp": [1_700_000_000_000_000 + i for i in range(start, start + n)],
            "timestampType": [0] * n,
        }
        out.append(pa.RecordBatch.from_pydict(columns, schema=schema))
    return out


@pytest.fixture(scope="module")
def batches():
    return _batches()


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.benchmark(group="transforms")
def test_write_task(benchmark, batches, tmp_path, case):
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
        message = write_task(config, iter(batches))
        times.append(time.perf_counter() - started)
        return message

    message = benchmark.pedantic(run, rounds=ROUNDS, iterations=1, warmup_rounds=1)
    assert sum(f.records for f in message.files if f.role == "value") == RECORDS
    topics = {f.topic for f in message.files}
    assert topics == ({"routed"} if "transforms" in CASES[case] else {"t"})
    TIMES[case] = times[-ROUNDS:]
    benchmark.extra_info.update(records=RECORDS)


def test_report():
    """The ratios, with the goal; printed and written to ``results/transforms.md``."""
    if len(TIMES) < len(CASES):
        pytest.skip("run the whole file: the report compares its cases")
    median = {case: statistics.median(t) for case, t in TIMES.items()}
    rows = []
    for case, seconds in median.items():
        base = median[BASELINE[case]]
        goal, verdict = "", ""
        if case == "three transforms":
            goal, verdict = "≤ 1.15×", rp.verdict(seconds / base <= 1.15)
        rows.append(
            [
                case,
                f"{seconds:.2f}",
                f"{RECORDS / seconds:,.0f}",
                f"{seconds / base:.2f}× {BASELINE[case].replace('no transforms', 'none')}",
                goal,
                verdict,
            ]
        )
    lines = [
        "# blockgz: what a chain of three Connect transforms costs",
        "",
        f"- {RECORDS:,} records of one topic-partition, ~200-byte JSON values; one write task "
        "(`write_task`) into a local directory, block-GZIP JSON, `flush.size=200000`; median "
        f"of {ROUNDS} rounds after a warm-up.",
        f"- machine: {rp.machine_line()}",
        "",
        *rp.table(
            ["case", "s", "records/s", "time vs the same path without", "goal", "verdict"], rows
        ),
    ]
    if not support.MEANINGFUL:
        lines.insert(1, "\n**Smoke-test scale: not meaningful.**\n")
    text = "\n".join(lines) + "\n"
    RESULTS_PATH.parent.mkdir(exist_ok=True)
    RESULTS_PATH.write_text(text)
    print("\n" + text)
