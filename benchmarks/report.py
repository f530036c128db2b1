"""The pieces every benchmark report is made of, once: Markdown tables, number formats, the
machine and versions lines, interference flags, targets and verdicts, the head of a results
file, and publishing it.

Each suite renders its own sections with these: :mod:`benchmarks.file_report` (compression,
decompression and seek on local files), :mod:`benchmarks.s3_support` (S3 seek and upload) and
:mod:`benchmarks.export_report` (Kafka → S3 export).
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
import platform
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blockgz
from benchmarks.support import MEANINGFUL, ROOT, SCALE

NOT_MEANINGFUL = " (not meaningful at this scale)"
#: Other work on the machine (processes, kernel threads, hypervisor steal) using more than this
#: many cores while a benchmark ran flags its row: on 2 vCPUs its numbers are low.
DISTURBED_CORES = 0.2


# -- tables and numbers ---------------------------------------------------------------------
def table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A Markdown table, one line per row."""
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return out


def fmt(value: float | None, spec: str) -> str:
    """``value`` in ``spec``, or an em dash when there is none."""
    return "—" if value is None else format(value, spec)


def times(a: float | None, b: float | None) -> str:
    """``a / b`` as ``1.23×``, or an em dash when either is missing or zero."""
    return "—" if not a or not b else f"{a / b:.2f}×"


def ms(seconds: float) -> str:
    """Seconds as milliseconds with one decimal."""
    return f"{seconds * 1e3:,.1f}"


def gb(n: int | None) -> str:
    """Bytes as GiB with two decimals, or an em dash."""
    return "—" if not n else f"{n / 1024**3:.2f}"


# -- machine and versions -------------------------------------------------------------------
def package_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def tool_version(argv: Sequence[str], timeout_s: float = 20) -> str:
    """The first line a command-line tool prints for its version (stdout, else stderr)."""
    if shutil.which(argv[0]) is None:
        return "not installed"
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    text = (done.stdout or done.stderr).strip().splitlines()
    return text[0] if text else "unknown"


def versions_line(
    packages: Iterable[str], tools: Iterable[Sequence[str]] = (), extra: Iterable[str] = ()
) -> str:
    """``blockgz <version>; <package> <version>, ...; <tool's version line>; <extra>; ...``.

    ``packages`` are distribution names, ``tools`` the argv that prints a tool's version
    (``["pigz", "--version"]``), ``extra`` any further text (a bundled library's version).
    """
    libs = ", ".join(f"{name} {package_version(name)}" for name in packages)
    parts = [f"blockgz {blockgz.__version__}", libs, *extra]
    parts += [tool_version(argv) for argv in tools]
    return "; ".join(part for part in parts if part)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / 1024**2:.0f} GiB RAM"
    except OSError:
        pass
    return "RAM unknown"


def machine_line() -> str:
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{cpus} CPUs ({_cpu_model()}), {_memory()}, Linux {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def run_lines(versions: str, detail: str = "") -> list[str]:
    """The ``- run:``, ``- machine:`` and ``- versions:`` bullets; ``detail`` follows the scale."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return [
        f"- run: {now}, `BLOCKGZ_BENCH_SCALE={SCALE:g}`{detail}",
        f"- machine: {machine_line()}",
        f"- versions: {versions}",
    ]


# -- interference ---------------------------------------------------------------------------
def is_disturbed(cores: float | None) -> bool:
    return cores is not None and cores > DISTURBED_CORES


def load_cell(cores: float | None) -> str:
    """Cores used by other work, marked ⚠ above :data:`DISTURBED_CORES`."""
    return "—" if cores is None else f"{cores:.2f}" + (" ⚠" if is_disturbed(cores) else "")


def disturbed_warning(names: Sequence[str]) -> list[str]:
    """A call-out naming the benchmarks that ran while something else used the CPU."""
    if not names:
        return []
    return [
        f"> **⚠ {len(names)} benchmark(s) ran while something else used the CPU "
        f"(> {DISTURBED_CORES:g} cores): {', '.join(names)}. On 2 cores their numbers are low "
        "and unreliable; re-run on an idle machine.**",
        "",
    ]


# -- targets --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    """What a target's check found.

    ``margin`` is how far the measurement is past the threshold, as a fraction of it (≥ 0:
    headroom, < 0: shortfall), ``None`` when the target is pass/fail only. ``passed`` is
    ``None`` for a row shown for information only.
    """

    measured: str
    required: str = "—"
    margin: float | None = None
    passed: bool | None = None


def at_least(measured: str, value: float, threshold: float, required: str) -> Outcome:
    """``value`` must reach ``threshold`` (a speed-up, a ratio, a rate)."""
    margin = value / threshold - 1
    return Outcome(measured, required, margin, margin >= 0)


def at_most(measured: str, value: float, threshold: float, required: str) -> Outcome:
    """``value`` must not exceed ``threshold`` (a time)."""
    margin = threshold / value - 1
    return Outcome(measured, required, margin, margin >= 0)


@dataclass(frozen=True)
class Target:
    """A goal of the issue, checked on the results once every key of ``needs`` is there."""

    name: str
    needs: tuple[str, ...]
    check: Callable[[Mapping[str, Any]], Outcome]


def verdict(passed: bool | None) -> str:
    """PASS or FAIL, flagged when the scale makes it meaningless; ``—`` for information."""
    if passed is None:
        return "—"
    return ("PASS" if passed else "FAIL") + ("" if MEANINGFUL else NOT_MEANINGFUL)


def target_rows(
    targets: Iterable[Target], results: Mapping[str, Any], *, show_missing: bool = True
) -> list[list[str]]:
    """(target, measured, required, margin, verdict) for each target; one whose results are
    missing is reported NOT RUN, or left out when not ``show_missing``."""
    rows = []
    for target in targets:
        missing = [k for k in target.needs if results.get(k) is None]
        if missing:
            if show_missing:
                rows.append([target.name, "—", "", "", f"NOT RUN ({', '.join(missing)} missing)"])
            continue
        out = target.check(results)
        rows.append(
            [target.name, out.measured, out.required, fmt(out.margin, "+.1%"), verdict(out.passed)]
        )
    return rows


def targets_section(
    targets: Iterable[Target], results: Mapping[str, Any], *, show_missing: bool = True
) -> list[str]:
    rows = target_rows(targets, results, show_missing=show_missing)
    header = ["target", "measured", "required", "margin", "verdict"]
    return ["## Targets", "", *table(header, rows), ""]


# -- the results file -----------------------------------------------------------------------
def report_head(
    title: str, scale_note: str, reproduce: str | None = None, smoke_note: str = "smoke test"
) -> list[str]:
    """The first lines of a results file: title, smoke-scale warning, how to reproduce."""
    lines = [f"# {title}", ""]
    if not MEANINGFUL:
        lines += [
            f"> **BLOCKGZ_BENCH_SCALE={SCALE:g}: smoke-test scale; numbers and verdicts are "
            f"NOT meaningful.** {scale_note}",
            "",
        ]
    if reproduce:
        smoke = f"BLOCKGZ_BENCH_SCALE=0.02 {reproduce}   # {smoke_note}"
        lines += ["## Reproduce", "", "```sh", reproduce, smoke, "```", ""]
    return lines


def publish_report(config, title: str, text: str, path: Path, written: bool) -> None:
    """Write ``text`` to ``path`` when ``written``, and print it at the end of the session.

    ``config`` is pytest's config (``request.config`` in a fixture).
    """
    if written:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    plugins = config.pluginmanager
    terminal = plugins.get_plugin("terminalreporter")
    capture = plugins.get_plugin("capturemanager")
    if terminal is None or capture is None:
        return
    where = path.relative_to(ROOT)
    with capture.global_and_fixture_disabled():
        terminal.write_line("")
        terminal.write_sep("=", title)
        for line in text.splitlines():
            terminal.write_line(line)
        terminal.write_line(
            f"(written to {where})"
            if written
            else f"({where} not written: only full-scale runs of every case are)"
        )
