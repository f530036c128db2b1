"""The interleaved export benchmark's arithmetic (``benchmarks.export_rounds``): medians of the
counted rounds, CPU per record, and PASS/FAIL against H and the loop."""

from __future__ import annotations

import doctest

from benchmarks import export_rounds as er


def _runs(case: str, walls: list[float], cpu: float, records: int = 1_000_000) -> list[er.Run]:
    return [er.Run(case, i + 1, w, {"jvm": cpu / 2, "workers": cpu / 2}, records) for i, w in
            enumerate(walls)]  # fmt: skip


def test_medians_cpu_per_record_and_the_verdicts():
    runs = [
        *_runs("json", [12.0, 7.0, 8.0], 11.0),
        *_runs("blockgz", [6.0, 9.0, 5.0], 8.0),
        *_runs("spark", [9.0, 8.5, 8.0], 10.0),
        *_runs("loop", [3.0, 3.5, 3.2], 6.0),
    ]
    table = er.summarize(runs)
    assert table["json"].wall_s == 8.0 and table["blockgz"].wall_s == 6.0
    assert table["blockgz"].cpu_us_per_record == 8.0
    verdicts = {(r[0], r[1], r[3]): r[-1] for r in er.target_rows(table)}
    assert verdicts == {
        ("blockgz", "json", "≥ 1×"): "**PASS**",  # 8.0 / 6.0 = 1.33 ≥ 1.0
        ("blockgz", "loop", "≥ 0.6×"): "FAIL",  # 3.2 / 6.0 = 0.53 < 0.6
        ("spark", "json", "≥ 1×"): "FAIL",  # 8.0 / 8.5 = 0.94 < 1.0
        ("spark", "loop", "≥ 0.6×"): "FAIL",
        # issue 44: speed ≥ 1.5× H (1.33× fails); CPU per record ≤ 1.1× the loop's
        ("blockgz", "json", "≥ 1.5× (issue 44)"): "FAIL",
        ("blockgz", "loop", "≤ 1.1× (issue 44)"): "FAIL",  # 8 / 6 µs = 1.33×
        ("spark", "loop", "≤ 1.1× (issue 44)"): "FAIL",  # 10 / 6 µs
    }
    text = er.render(table, rounds=3, warmup="full")
    assert "1,000,000 records" in text and "| blockgz | loop | 0.53× | ≥ 0.6× | FAIL |" in text
    assert "| blockgz | loop | CPU/record 1.33× | ≤ 1.1× (issue 44) | FAIL |" in text


def test_cpu_goal_passes_within_a_tenth_of_the_loop():
    table = er.summarize([*_runs("blockgz", [5.0], 6.5), *_runs("loop", [3.0], 6.0)])
    rows = [r for r in er.target_rows(table) if r[3] == "≤ 1.1× (issue 44)"]
    assert rows == [["blockgz", "loop", "CPU/record 1.08×", "≤ 1.1× (issue 44)", "**PASS**"]]


def test_the_jit_compilers_cpu_is_shown_apart_and_gates_nothing():
    spark = [er.Run("spark", i, 5.0, {"jvm": 5.0, "workers": 2.4}, 1_000_000, jit) for i, jit in
             enumerate([0.9, 0.6, 0.7], 1)]  # fmt: skip
    table = er.summarize([*spark, *_runs("loop", [3.0], 6.0)])
    assert table["spark"].jit_s == 0.7
    assert round(table["spark"].compiled_us_per_record, 2) == 6.7
    assert er.case_rows(table)[0][4] == "0.7"
    rows = [r for r in er.target_rows(table) if r[0] == "spark" and r[1] == "loop"]
    assert rows[-2:] == [
        ["spark", "loop", "CPU/record 1.23×", "≤ 1.1× (issue 44)", "FAIL"],  # 7.4 / 6 µs
        ["spark", "loop", "without JIT 1.12×", "(not a target)", "—"],  # 6.7 / 6 µs
    ]


def test_a_reference_that_did_not_run_gives_no_verdict():
    table = er.summarize(_runs("blockgz", [5.0], 8.0))
    assert er.target_rows(table) == []
    assert er.case_rows(table)[0][5:] == ["—", "—"]


def test_the_module_examples_hold():
    assert doctest.testmod(er).failed == 0


def test_each_goal_round_by_round_shows_the_spread_behind_the_median():
    runs = [
        *_runs("json", [8.0, 7.0, 9.0], 9.0),
        *_runs("blockgz", [5.0, 5.0, 5.0], 7.0),
        *_runs("loop", [3.0, 3.0, 3.0], 6.0),
    ]
    rows = {(r[0], r[2]): r[3:] for r in er.paired_ratios(runs)}
    assert rows[("blockgz", "speed")] == ["1.60×, 1.40×, 1.80×", "1.40–1.80×", "2 of 3"]
    assert rows[("blockgz", "CPU/record")] == ["1.17×, 1.17×, 1.17×", "1.17–1.17×", "0 of 3"]
    assert ("spark", "CPU/record") not in rows  # a case that did not run has no row
    text = er.render(er.summarize(runs), rounds=3, warmup="full", runs=runs)
    assert "| blockgz | json | speed | 1.60×, 1.40×, 1.80× | 1.40–1.80× | 2 of 3 |" in text
    assert "round by round" not in er.render(er.summarize(runs), rounds=3, warmup="full")
