"""``blockgz`` as a terminal runs it: a subprocess with the test's fake AWS environment, its
exit code, its output lines and how long it took.

Example (runs an export, so not a doctest)::

    code, lines, seconds = export_once(tmp_path, {"name": "j", "topics": "t", ...})
    assert code == 1 and len(lines) <= 3 and seconds < 30
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from blockgz.local_servers import fake_aws_env

BLOCKGZ = str(Path(sys.executable).with_name("blockgz"))


def export_once(
    tmp_path: Path, options: Mapping[str, str], env: Mapping[str, str] | None = None
) -> tuple[int, list[str], float]:
    """``blockgz export --once`` of ``options`` (written to ``tmp_path/job.properties``, the
    checkpoint in ``tmp_path/ckpt``): exit code, output lines (stdout, then stderr), seconds."""
    config = tmp_path / "job.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in options.items()))
    started = time.monotonic()
    proc = subprocess.run(
        [BLOCKGZ, "export", str(config), "--once", "--checkpoint", str(tmp_path / "ckpt")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={**os.environ, **fake_aws_env(), **(env or {})},
    )
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    return proc.returncode, lines, time.monotonic() - started


def assert_one_line_failure(code: int, lines: list[str], seconds: float, *words: str) -> None:
    """A refusal as a terminal shows it: exit 1 within 30 s, at most 3 lines and no traceback,
    one ``error:`` line holding each of ``words``."""
    assert code == 1, lines
    assert len(lines) <= 3 and not any("Traceback" in line for line in lines), lines
    assert seconds < 30, seconds
    error = [line for line in lines if line.startswith("error:")]
    assert len(error) == 1, lines
    for word in words:
        assert word in error[0], error[0]
