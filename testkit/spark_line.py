"""A Python with another Spark line's pyspark, built once into a cache.

The archive's readers often run a Spark other than the exporter's (an analyst's cluster on its
own Spark line). :func:`pyspark_python` returns the interpreter of a virtual environment that
holds ``pyspark==<version>`` alone, under ``$BLOCKGZ_SPARK_LINE_CACHE`` (default
``~/.cache/blockgz``) in ``pyspark-<version>/``. The first call builds it (a pip install from
PyPI: minutes), later calls cost a file test.

The environment is built in a fresh folder beside the final one and renamed when complete, so
an install that was killed half-way never passes for a complete one; a lock file keeps two test
processes (pytest-xdist workers) from building the same one twice.

>>> line_folder("4.1.4", root=Path("/cache")).as_posix()
'/cache/pyspark-4.1.4'
>>> unreachable("WARNING: Retrying ... after connection broken by 'NewConnectionError(...)'")
True
>>> unreachable("ERROR: No matching distribution found for pyspark==9.9.9")
False
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from blockgz.errors import MissingDependencyError

_DONE = ".complete"
#: Seconds one install may take (a first download of pyspark: ~450 MB).
INSTALL_TIMEOUT_S = 900
#: What pip prints when it cannot reach the index at all (not: the index has no such version).
_NETWORK_MARKERS = (
    "after connection broken by",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "ConnectTimeoutError",
    "ProxyError",
)


class PyPIUnreachableError(MissingDependencyError):
    """PyPI could not be reached, so a package could not be installed (a test skips)."""


def cache_root() -> Path:
    """Where the environments are kept (``$BLOCKGZ_SPARK_LINE_CACHE``, default
    ``~/.cache/blockgz``)."""
    given = os.environ.get("BLOCKGZ_SPARK_LINE_CACHE")
    return Path(given) if given else Path.home() / ".cache" / "blockgz"


def line_folder(version: str, *, root: Path | None = None) -> Path:
    """The environment folder of pyspark ``version``."""
    return (root or cache_root()) / f"pyspark-{version}"


def unreachable(pip_output: str) -> bool:
    """Whether pip's output says it could not reach the package index."""
    return any(marker in pip_output for marker in _NETWORK_MARKERS)


def pyspark_python(version: str, *, root: Path | None = None) -> Path:
    """The Python of an environment holding ``pyspark==version``, built on first use.

    Raises :class:`PyPIUnreachableError` when PyPI cannot be reached, and
    :class:`MissingDependencyError` when the install fails otherwise.
    """
    return isolated_python(line_folder(version, root=root), [f"pyspark=={version}"])


def isolated_python(folder: Path, requirements: Sequence[str]) -> Path:
    """The Python of a virtual environment at ``folder`` holding ``requirements`` (pip's
    syntax), built atomically on first use."""
    python = folder / "bin" / "python"
    if (folder / _DONE).exists():
        return python
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it: wait for it
        if not (folder / _DONE).exists():
            _build(folder, requirements)
    return python


def _build(folder: Path, requirements: Sequence[str]) -> None:
    work = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        # The base interpreter's venv module (an environment made from inside another one is
        # still based on the base interpreter). Only bin/python is used later: the renamed
        # environment's scripts keep the temporary path in their first line.
        venv = [sys.executable, "-m", "venv"] + ([] if requirements else ["--without-pip"])
        _run([*venv, str(work)], "create a virtual environment")
        if requirements:
            pip = [str(work / "bin" / "python"), "-m", "pip", "install", "-q"]
            _run([*pip, *requirements], f"install {' '.join(requirements)} from PyPI")
        (work / _DONE).write_text("\n".join(requirements) + "\n")
        shutil.rmtree(folder, ignore_errors=True)  # a folder without the marker: not complete
        work.chmod(0o755)  # mkdtemp's folder is the owner's alone
        work.rename(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
    )
    if done.returncode == 0:
        return
    output = done.stdout + done.stderr
    tail = "\n".join(output.strip().splitlines()[-8:])
    error = PyPIUnreachableError if unreachable(output) else MissingDependencyError
    raise error(f"could not {what}:\n{tail}")
