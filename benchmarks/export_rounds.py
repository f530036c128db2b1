"""Medians, CPU per record and the target table of the interleaved export benchmark
(:mod:`benchmarks.export_ab`, what ``make bench-export`` runs). Pure: no Spark, no servers.

>>> runs = [Run("json", 1, 8.0, {"jvm": 8.0}, 1000), Run("blockgz", 1, 6.0, {"jvm": 5.0}, 1000),
...         Run("loop", 1, 4.0, {"loop": 6.0}, 1000)]
>>> table = summarize(runs)
>>> table["blockgz"].cpu_us_per_record, round(speed_ratio(table, "blockgz", "json"), 2)
(5000.0, 1.33)
>>> [row[-1] for row in target_rows(table)]
['**PASS**', '**PASS**', 'FAIL', '**PASS**']
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

#: Case key → the line the report shows for it.
TITLES = {
    "json": 'H. hand-written `readStream.format("kafka")` → `writeStream.format("json")`, gzip',
    "text": 'H\'. the same → `writeStream.format("text")`, gzip',
    "spark": "S. blockgz export, Spark's Kafka source (`blockgz.spark.kafka.jars`)",
    "sparkarrow": (
        "S'. S with `spark.sql.execution.arrow.maxBytesPerBatch=2147483647` (no per-row batch "
        "size check; small records only)"
    ),
    "sparkpattern": (
        "S\u2033. S subscribed by `topics.regex` (rows keep `topic`, as a job of several topics "
        "or a pattern)"
    ),
    "blockgz": "A. blockgz export, blockgz-kafka, sink tasks read Kafka (the default)",
    "rows": "A0. the same, `blockgz.tasks.read.kafka=false` (records through Spark's rows)",
    "loop": "C. plain confluent-kafka loop, 2 processes (`fetch.queue.backoff.ms=10`)",
}
#: The cases held to the targets, and the targets: speed ≥ need × the reference case's.
TARGETS = (("json", 1.0), ("loop", 0.6))
GATED = ("blockgz", "spark")
#: Issue 44's goals: (case, reference, need): the default path's speed ≥ 1.5× the
#: hand-written pipeline's; CPU per record of both blockgz paths ≤ 1.1× the loop's.
SPEED_GOALS = (("blockgz", "json", 1.5),)
CPU_GOALS = (
    ("blockgz", "loop", 1.1),
    ("spark", "loop", 1.1),
    ("sparkpattern", "loop", 1.1),
    ("sparkarrow", "loop", 1.1),
)
GROUPS = ("driver", "jvm", "workers", "loop", "kafka", "s3")


@dataclass(frozen=True)
class Run:
    """One counted run of a case: wall seconds, CPU seconds per process group, records."""

    case: str
    round: int
    wall_s: float
    cpu_s: dict[str, float]
    records: int
    #: Of the JVM's CPU, its JIT compiler threads' (compiling the case's code, paid once).
    jit_s: float = 0.0


@dataclass
class CaseSummary:
    """A case's medians over its counted rounds."""

    case: str
    walls: list[float]
    wall_s: float
    cpu_s: float
    cpu_groups: dict[str, float] = field(default_factory=dict)
    records: int = 0
    jit_s: float = 0.0

    @property
    def cpu_us_per_record(self) -> float:
        return self.cpu_s / max(1, self.records) * 1e6

    @property
    def compiled_us_per_record(self) -> float:
        """CPU µs per record without the JIT compiler's: what a long-running job pays."""
        return (self.cpu_s - self.jit_s) / max(1, self.records) * 1e6

    @property
    def records_per_s(self) -> float:
        return self.records / self.wall_s


def summarize(runs: Iterable[Run]) -> dict[str, CaseSummary]:
    """Per case (in the order first seen): median wall, median total CPU, median per group,
    median JIT compiler CPU."""
    by_case: dict[str, list[Run]] = {}
    for run in runs:
        by_case.setdefault(run.case, []).append(run)
    out = {}
    for case, rs in by_case.items():
        groups = {g: statistics.median(r.cpu_s.get(g, 0.0) for r in rs) for g in GROUPS}
        out[case] = CaseSummary(
            case,
            [r.wall_s for r in rs],
            statistics.median(r.wall_s for r in rs),
            statistics.median(sum(r.cpu_s.values()) for r in rs),
            groups,
            rs[0].records,
            statistics.median(r.jit_s for r in rs),
        )
    return out


def speed_ratio(table: dict[str, CaseSummary], case: str, reference: str) -> float:
    """``case``'s speed over ``reference``'s (its median wall time over ``case``'s)."""
    return table[reference].wall_s / table[case].wall_s


def _cell(table: dict[str, CaseSummary], case: str, reference: str) -> str:
    if case not in table or reference not in table:
        return "—"
    return f"{speed_ratio(table, case, reference):.2f}×"


def case_rows(table: dict[str, CaseSummary]) -> list[list[str]]:
    """One row per case: wall (median and rounds), records/s, CPU µs per record (total and by
    group), of which the JVM's JIT compiler, speed vs H and vs C."""
    rows = []
    for s in table.values():
        groups = " / ".join(f"{s.cpu_groups[g] / max(1, s.records) * 1e6:.1f}" for g in GROUPS)
        rows.append(
            [
                TITLES.get(s.case, s.case),
                f"{s.wall_s:.2f} ({', '.join(f'{w:.2f}' for w in s.walls)})",
                f"{s.records_per_s:,.0f}",
                f"{s.cpu_us_per_record:.1f} ({groups})",
                f"{s.jit_s / max(1, s.records) * 1e6:.1f}",
                _cell(table, s.case, "json"),
                _cell(table, s.case, "loop"),
            ]
        )
    return rows


def target_rows(table: dict[str, CaseSummary]) -> list[list[str]]:
    """PASS/FAIL of each gated case that ran against each reference that ran."""
    rows = []
    for case in GATED:
        for reference, need in TARGETS:
            if case in table and reference in table:
                x = speed_ratio(table, case, reference)
                verdict = "**PASS**" if x >= need else "FAIL"
                rows.append(
                    [case, reference, f"{x:.2f}×", f"≥ {need:g}×", verdict],
                )
    for case, reference, need in SPEED_GOALS:
        if case in table and reference in table:
            x = speed_ratio(table, case, reference)
            verdict = "**PASS**" if x >= need else "FAIL"
            rows.append([case, reference, f"{x:.2f}×", f"≥ {need:g}× (issue 44)", verdict])
    for case, reference, most in CPU_GOALS:
        if case in table and reference in table:
            x = table[case].cpu_us_per_record / table[reference].cpu_us_per_record
            verdict = "**PASS**" if x <= most else "FAIL"
            rows.append(
                [case, reference, f"CPU/record {x:.2f}×", f"≤ {most:g}× (issue 44)", verdict]
            )
            if table[case].jit_s:  # informative: the same without the JIT compiler's CPU
                y = table[case].compiled_us_per_record / table[reference].compiled_us_per_record
                rows.append([case, reference, f"without JIT {y:.2f}×", "(not a target)", "—"])
    return rows


def paired_ratios(runs: Iterable[Run]) -> list[list[str]]:
    """Each issue 44 goal's ratio round by round (a case against its reference in the same
    round, minutes apart), so the report shows how far the host's noise moves it: the
    verdicts above use the medians, this says how much to trust them.

    >>> runs = [Run("blockgz", 1, 4.0, {"w": 6.0}, 10), Run("json", 1, 6.0, {"w": 8.0}, 10),
    ...         Run("blockgz", 2, 5.0, {"w": 7.0}, 10), Run("json", 2, 6.5, {"w": 9.0}, 10)]
    >>> paired_ratios(runs)
    [['blockgz', 'json', 'speed', '1.50×, 1.30×', '1.30–1.50×', '1 of 2']]
    """
    by_round: dict[int, dict[str, Run]] = {}
    for run in runs:
        by_round.setdefault(run.round, {})[run.case] = run
    goals = [(c, r, "speed", need) for c, r, need in SPEED_GOALS]
    goals += [(c, r, "CPU/record", most) for c, r, most in CPU_GOALS]
    rows = []
    for case, reference, kind, bound in goals:
        ratios = []
        for cases in by_round.values():
            if case in cases and reference in cases:
                mine, theirs = cases[case], cases[reference]
                if kind == "speed":
                    ratios.append(theirs.wall_s / mine.wall_s)
                else:
                    ratios.append(sum(mine.cpu_s.values()) / sum(theirs.cpu_s.values()))
        if not ratios:
            continue
        met = sum(x >= bound if kind == "speed" else x <= bound for x in ratios)
        rows.append(
            [
                case,
                reference,
                kind,
                ", ".join(f"{x:.2f}×" for x in ratios),
                f"{min(ratios):.2f}–{max(ratios):.2f}×",
                f"{met} of {len(ratios)}",
            ]
        )
    return rows


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]


def render(
    table: dict[str, CaseSummary], rounds: int, warmup: str, runs: Iterable[Run] = ()
) -> str:
    """The report: the cases' medians, then the targets, then (given the ``runs``) each
    goal's ratio round by round (:func:`paired_ratios`)."""
    records = next(iter(table.values())).records if table else 0
    head = (
        f"{records:,} records; cases interleaved (rotated each round), {rounds} counted rounds "
        f"after an uncounted {warmup} warm-up round; medians. CPU µs per record: every process "
        "of the case (" + " / ".join(GROUPS) + "); of which JIT: the JVM's JIT compiler "
        "threads (compiling the case's code: a long-running job pays it once)."
    )
    case_header = [
        "case", "wall s (rounds)", "records/s", "CPU µs/record", "of which JIT", "vs H", "vs C"
    ]  # fmt: skip
    target_header = ["case", "vs", "ratio", "target", "verdict"]
    return "\n".join(
        [
            head,
            "",
            *_table(case_header, case_rows(table)),
            "",
            *_table(target_header, target_rows(table)),
            "",
            *_paired_section(list(runs)),
        ]
    )


def _paired_section(runs: list[Run]) -> list[str]:
    rows = paired_ratios(runs)
    if not rows:
        return []
    header = ["case", "vs", "ratio of", "round by round", "range", "rounds meeting the goal"]
    return [
        "Each issue 44 goal round by round (the case and its reference in the same round):",
        "",
        *_table(header, rows),
        "",
    ]
