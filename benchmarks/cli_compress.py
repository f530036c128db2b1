"""``blockgz compress`` (the command line) vs ``pigz -p2 -1`` vs the same compression in-process.

Issue #29 part 3: the CLI on 1 GB of JSON measured 2.55-3.0× ``pigz -p2 -1`` while the
in-process benchmark said 3.74×. This runs, interleaved and repeated, on one input file:

* ``pigz``: ``pigz -p 2 -1 -c INPUT > OUT``;
* ``cli``: ``python -m blockgz compress INPUT -o OUT --threads 2`` (a new interpreter each
  time: start-up and imports are part of what a user waits for);
* ``start``: ``python -m blockgz compress --help`` (start-up and imports alone);
* ``in-process``: :func:`blockgz.objects.compress.compress_file` called in this process.

Wall time and CPU time (user + system; ``RUSAGE_CHILDREN`` for the commands, ``RUSAGE_SELF``
for the in-process call) are printed per run, then medians and ratios::

    PYTHONPATH=. .venv/bin/python -m benchmarks.cli_compress --input corpus.ndjson --rounds 5

Without ``--input`` a 1 GB corpus (``blockgz.sample.write_corpus``) is written to
``.bench-cache/`` once. The previous output is deleted before each run, outside the timing.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CACHE = Path(__file__).resolve().parent.parent / ".bench-cache"
CORPUS_BYTES = 1_000_000_000


def _corpus(size: int) -> Path:
    from blockgz.sample import write_corpus

    path = CACHE / f"cli-corpus-{size}.ndjson"
    if not path.exists():
        CACHE.mkdir(exist_ok=True)
        partial = path.with_suffix(".part")
        write_corpus(partial, size)
        partial.rename(path)
    return path


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _command(
    argv: list[str],
    stdout_path: Path | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> tuple[float, float]:
    """Run a command to completion: (wall s, CPU s of it and its children)."""
    cpu0, started = _children_cpu(), time.perf_counter()
    if stdout_path is None:
        subprocess.run(
            argv,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
        )
    else:
        with open(stdout_path, "wb") as out:
            subprocess.run(
                argv, check=True, stdout=out, stderr=subprocess.DEVNULL, env=env, cwd=cwd
            )
    return time.perf_counter() - started, _children_cpu() - cpu0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--input", type=Path, help="NDJSON file [a 1 GB corpus in .bench-cache]")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--cases", default="pigz,cli,in-process,start")
    parser.add_argument(
        "--before",
        type=Path,
        help="another source tree (e.g. `git archive <commit>` unpacked): adds the case "
        "cli-before, the same command with PYTHONPATH on that tree",
    )
    args = parser.parse_args()
    source = args.input or _corpus(CORPUS_BYTES)
    size = source.stat().st_size
    out_dir = Path(tempfile.mkdtemp(prefix="cli-compress-", dir=source.parent))
    out = out_dir / "out.json.gz"
    python = sys.executable
    env_path = os.environ.get("PYTHONPATH", "")
    pigz = shutil.which("pigz")
    cases = [c for c in args.cases.split(",") if c and (c != "pigz" or pigz)]
    if args.before:
        cases.insert(cases.index("cli") + 1 if "cli" in cases else len(cases), "cli-before")
    trees = [Path.cwd()] + ([args.before] if args.before else [])
    for tree in trees:  # byte-compiled once (PYTHONDONTWRITEBYTECODE would compile every run)
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", "blockgz", "sink", "reader"],
            cwd=tree,
            check=False,
            stdout=subprocess.DEVNULL,
        )
    threads = str(args.threads)

    def clean() -> None:
        for p in out_dir.iterdir():
            p.unlink()

    def run(case: str) -> tuple[float, float]:
        if case == "pigz":
            return _command([pigz, "-p", threads, "-1", "-c", str(source)], out)
        if case in ("cli", "cli-before"):
            argv = [python, "-m", "blockgz", "compress", str(source), "-o", str(out)]
            env = cwd = None
            if case == "cli-before":
                # ``python -m`` puts the working directory first on sys.path, ahead of
                # PYTHONPATH: run from the other tree, or its "before" is this tree again.
                cwd = args.before.resolve()
                env = {**os.environ, "PYTHONPATH": str(cwd)}
            return _command([*argv, "--threads", threads], env=env, cwd=cwd)
        if case == "start":
            return _command([python, "-m", "blockgz", "compress", "--help"])
        from blockgz.objects.compress import compress_file

        cpu0, started = _self_cpu(), time.perf_counter()
        compress_file(source, out, threads=args.threads)
        return time.perf_counter() - started, _self_cpu() - cpu0

    print(f"input {source} ({size / 1e6:,.0f} MB), PYTHONPATH={env_path!r}", flush=True)
    for case in cases:  # warm-up: page cache, imports
        clean()
        run(case)
    times: dict[str, list[tuple[float, float]]] = {c: [] for c in cases}
    for r in range(args.rounds):
        order = cases[r % len(cases) :] + cases[: r % len(cases)]
        for case in order:
            clean()
            wall, cpu = run(case)
            times[case].append((wall, cpu))
            print(
                f"round {r + 1} {case:10s} wall {wall:6.3f} s  cpu {cpu:6.3f} s  "
                f"{size / 1e6 / wall:7.1f} MB/s  load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
    clean()
    out_dir.rmdir()
    med = {
        c: (statistics.median(w for w, _ in v), statistics.median(u for _, u in v))
        for c, v in times.items()
    }
    print(f"\nmedians of {args.rounds} rounds, {size / 1e6:,.0f} MB")
    print("| case | wall s | CPU s | MB/s | speed vs pigz (wall) | CPU vs pigz |")
    print("|---|---|---|---|---|---|")
    for case, (wall, cpu) in med.items():
        vs = f"{med['pigz'][0] / wall:.2f}×" if "pigz" in med else "-"
        cvs = f"{cpu / med['pigz'][1]:.2f}×" if "pigz" in med else "-"
        print(f"| {case} | {wall:.3f} | {cpu:.3f} | {size / 1e6 / wall:,.0f} | {vs} | {cvs} |")


if __name__ == "__main__":
    main()
