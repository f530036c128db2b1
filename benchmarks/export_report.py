"""The export benchmark's report: results table, targets, memory and CPU, as Markdown."""

from __future__ import annotations

import datetime as dt
import subprocess
from dataclasses import dataclass, field
from typing import Any

from benchmarks.export_support import (
    ALL_KEYS,
    ARROW_BATCH_ROWS,
    CASE_TITLES,
    KEY_BLOCKGZ,
    KEY_BLOCKGZ_TASKS,
    KEY_JSON,
    KEY_LOOP,
    KEY_LOOP_DEFAULTS,
    KEY_TEXT,
    LOOP_CONSUMER_TUNING,
    MAX_OFFSETS_PER_TRIGGER,
    MEANINGFUL,
    OFFSETS_PER_OBJECT,
    PARTITIONS,
    REPRODUCE,
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
from benchmarks.support import MB, SCALE, _table, _version, machine_line, report_head


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


def _gb(n: int | None) -> str:
    return "—" if not n else f"{n / 1024**3:.2f}"


def java_version() -> str:
    try:
        done = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = (done.stderr or done.stdout).strip().splitlines()
    return lines[0] if lines else "unknown"


def versions_line() -> str:
    libs = ("pyspark", "pyarrow", "confluent-kafka", "isal", "orjson", "boto3", "moto")
    out = ", ".join(f"{name} {_version(name)}" for name in libs)
    try:
        import confluent_kafka

        out += f" (librdkafka {confluent_kafka.libversion()[0]})"
    except ImportError:
        pass
    return f"blockgz {_version('blockgz')}; {out}; {java_version()}"


def _verdict(margin: float) -> str:
    verdict = "PASS" if margin >= 0 else "FAIL"
    return verdict if MEANINGFUL else verdict + " (not meaningful at this scale)"


def targets(results: dict[str, Any]) -> list[list[str]]:
    rows = []
    a = results.get(KEY_BLOCKGZ)
    for key, need, label in (
        (KEY_JSON, TARGET_VS_NATIVE, "blockgz export vs Spark's native file sink (json, gzip)"),
        (KEY_LOOP, TARGET_VS_LOOP, "blockgz export vs plain consumer loop"),
    ):
        b = results.get(key)
        if a is None or b is None:
            continue
        x = a.records_per_s / b.records_per_s
        rows.append(
            [
                label,
                f"{x:.2f}× ({a.records_per_s:,.0f} vs {b.records_per_s:,.0f} rec/s)",
                f"≥ {need:g}×",
                f"{x / need - 1:+.1%}",
                _verdict(x / need - 1),
            ]
        )
    for key, label in (
        (KEY_BLOCKGZ_TASKS, "(for information) the default plan vs tasks reading Kafka (A')"),
        (KEY_TEXT, "(for information) blockgz export vs Spark text sink, values only"),
        (KEY_LOOP_DEFAULTS, "(for information) blockgz export vs the loop on librdkafka defaults"),
    ):
        other = results.get(key)
        if a is not None and other is not None:
            x = a.records_per_s / other.records_per_s
            rows.append(
                [
                    label,
                    f"{x:.2f}× ({a.records_per_s:,.0f} vs {other.records_per_s:,.0f} rec/s)",
                    "—",
                    "—",
                    "—",
                ]
            )
    return rows


def _cases(results: dict[str, Any]) -> list[CaseResult]:
    return [results[k] for k in ALL_KEYS if k in results]


def render(results: dict[str, Any]) -> str:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    data: Dataset | None = results.get("dataset")
    lines = report_head(
        "blockgz export: Kafka → S3 end to end",
        REPRODUCE,
        MEANINGFUL,
        "The targets are defined on 1M records (scale 1.0).",
    )
    lines += [
        "BLOCKGZ_BENCH_SCALE=0.02 " + REPRODUCE + "   # smoke test",
        "```",
        "",
        f"- run: {now}, `BLOCKGZ_BENCH_SCALE={SCALE:g}`",
        f"- machine: {machine_line()}",
        f"- versions: {versions_line()}",
    ]
    if data is not None:
        lines.append(
            f"- data: topic of {PARTITIONS} partitions, {data.records:,} records "
            f"({data.records // PARTITIONS:,} each, one of them `produce_bulk`'s sentinel), "
            f"values {data.value_bytes / MB:,.1f} MB ({data.value_bytes / data.records:.0f} B "
            f"average, JSON with random hex), keys {data.key_bytes / max(1, data.records):.0f}"
            f" B, no headers; produced in {data.produce_s:.1f} s (Tansu, memory storage)"
        )
    fixed = results.get("fixed", {})
    lines += [
        f"- Spark: one `SparkSession` `local[2,3]` (driver memory default), "
        f"`maxOffsetsPerTrigger={MAX_OFFSETS_PER_TRIGGER:,}` "
        f"({TOTAL_RECORDS // MAX_OFFSETS_PER_TRIGGER} micro-batches), "
        f"`Trigger.AvailableNow`, `spark.sql.execution.arrow.maxRecordsPerBatch="
        f"{ARROW_BATCH_ROWS}` (the default), `includeHeaders=false`, fresh checkpoint per "
        "case; the Kafka source is blockgz-kafka (no spark-sql-kafka jar here)",
        f"- fixed costs, not in the timings: SparkSession start "
        f"{fixed.get('session_s', float('nan')):.1f} s; warm-up exports of "
        f"{PARTITIONS * WARMUP_PER_PARTITION:,} records (first use of the Python workers, "
        f"JIT): blockgz {fixed.get('warmup_blockgz_s', float('nan')):.1f} s (A') "
        f"{fixed.get('warmup_blockgz_tasks_s', float('nan')):.1f} s, json sink "
        f"{fixed.get('warmup_json_s', float('nan')):.1f} s, text sink "
        f"{fixed.get('warmup_text_s', float('nan')):.1f} s",
        "- S3 is moto in a child process (`MotoS3(in_process=False)`), no added latency; "
        "Spark has no S3 jars here, so its native sinks write to local disk (the favourable "
        "case for them)",
        "- time: wall time of one run (`run_export(..., once=True)`, or `start()` to "
        "termination, or process start to the last object). Each case runs twice on the "
        "whole topic (fresh checkpoint, bucket or directory each time): an untimed first "
        "round (its time is shown: the JVM is still warming up on it), then the measured "
        "one. MB/s = 10^6 bytes of Kafka values per second",
        "",
        "## Results",
        "",
    ]
    cases = _cases(results)
    base = results.get(KEY_BLOCKGZ)
    rows = []
    for c in cases:
        first = (
            "—"
            if c.first_seconds is None
            else f"{c.first_seconds:.1f} ({c.records / c.first_seconds:,.0f})"
        )
        rows.append(
            [
                CASE_TITLES[c.key],
                f"{c.seconds:.1f}",
                first,
                f"{c.records_per_s:,.0f}",
                f"{c.mb_per_s:.1f}",
                "1.00×" if c is base or base is None else f"{base.seconds / c.seconds:.2f}×",
                f"{c.output.objects}",
                f"{c.output.compressed / MB:,.1f}",
                f"{c.output.uncompressed / max(1, c.output.records):.0f}",
                f"{c.usage.other_cores:.2f}" + (" ⚠" if c.usage.other_cores > 0.2 else ""),
            ]
        )
    lines += _table(
        [
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
        ],
        rows,
    )
    a, loop = results.get(KEY_BLOCKGZ), results.get(KEY_LOOP)
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
    lines += [
        "",
        "Every case's output is decompressed and its lines counted after the run (not timed): "
        "each found exactly the produced records"
        + (
            "; for the S3 cases each index sidecar matches its object and each partition's "
            "objects cover offsets 0..end without gap or overlap."
            if any(c.key != KEY_JSON and c.key != KEY_TEXT for c in cases)
            else "."
        ),
        "'other cores': CPU used by processes outside this benchmark's tree and its servers "
        "(machine-wide, psutil); above 0.2 the row is marked ⚠.",
        "",
        "## Targets",
        "",
    ]
    lines += _table(["target", "measured", "required", "margin", "verdict"], targets(results))
    lines += ["", "## Peak memory (GB)", ""]
    rows = []
    for c in cases:
        u = c.usage
        rows.append(
            [
                CASE_TITLES[c.key].split(" ", 1)[0].rstrip("."),
                _gb(u.peak_rss.get("driver")),
                _gb(u.peak_rss.get("jvm")),
                f"{_gb(u.peak_driver_rss)} / {_gb(u.peak_driver_pss)}",
                f"{_gb(u.peak_rss.get('workers'))} / {_gb(u.peak_pss.get('workers'))}",
                f"{_gb(u.start_rss.get('workers'))}",
                str(u.peak_processes.get("workers", 0)),
                _loop_memory(c),
                _gb(u.peak_rss.get("moto")),
                _gb(u.peak_rss.get("tansu")),
            ]
        )
    lines += _table(
        [
            "case",
            "driver Python RSS",
            "JVM RSS",
            "driver side (Python + JVM) RSS / PSS",
            "Python workers RSS / PSS",
            "workers RSS at case start",
            "worker processes (peak)",
            "loop processes RSS / PSS (max per process)",
            "moto RSS",
            "Tansu RSS",
        ],
        rows,
    )
    lines += [
        "",
        f"Sampled with psutil every {SAMPLE_PERIOD_S} s (RSS) and every "
        f"{SAMPLE_PERIOD_S * PSS_EVERY:g} s (PSS, from `smaps_rollup`); each figure is the peak "
        "of the group's sum over one sample. RSS counts fork-shared pages once per process, "
        "PSS splits them. Figures are for the measured round. The Python workers are pooled by "
        "Spark across queries, so every round starts with what earlier rounds left in them "
        "('workers RSS at case start'). The loop "
        "processes' exact peak RSS per process (in brackets) is their `VmHWM`.",
        "",
        "## CPU seconds per case",
        "",
    ]
    rows = []
    for c in cases:
        cpu = c.usage.cpu_s
        total = sum(cpu.values())
        rows.append(
            [CASE_TITLES[c.key].split(" ", 1)[0].rstrip("."), f"{c.seconds:.1f}"]
            + [f"{cpu.get(g, 0.0):.1f}" for g in GROUPS]
            + [f"{total:.1f}", f"{total / max(1, c.records) * 1e6:.0f}"]
        )
    lines += _table(
        ["case", "wall s"]
        + [GROUP_LABELS[g] for g in GROUPS]
        + ["total CPU s", "CPU µs per record"],
        rows,
    )
    lines.append("")
    notes = results.get("notes")
    if notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines)


def _loop_memory(c: CaseResult) -> str:
    if c.key not in (KEY_LOOP, KEY_LOOP_DEFAULTS):
        return "—"
    u = c.usage
    per = c.extra.get("loop_max_rss", [])
    most = f" ({_gb(max(per))})" if per else ""
    return f"{_gb(u.peak_rss.get('loop'))} / {_gb(u.peak_pss.get('loop'))}{most}"
