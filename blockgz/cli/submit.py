"""The export as a ``spark-submit`` application: the same CONFIG and flags as ``blockgz export``.

``spark-submit`` runs a Python *file* as the driver, so this module is that file; the master,
deploy settings and shipped environment come from ``spark-submit``'s own flags. ``blockgz export
CONFIG --master URL --print-submit`` prints a full command line (:func:`submit_command`).

Example (a shell command, so not a doctest)::

    spark-submit --master spark://10.0.0.5:7077 \\
        --archives blockgz-env.tar.gz#env --conf spark.pyspark.python=./env/bin/python \\
        "$(python -c 'import blockgz.cli.submit as s; print(s.__file__)')" \\
        s3-sink.properties --once
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path


def submit_command(
    config: str,
    *,
    master: str | None,
    export_args: Sequence[str] = (),
    python: str | None = None,
    archive: str | None = None,
) -> list[str]:
    """The ``spark-submit`` command line that runs ``blockgz export CONFIG export_args``.

    With ``archive`` (a packed environment, e.g. from ``venv-pack``), executors unpack it as
    ``./env`` and run its Python; otherwise they run ``python`` (this interpreter), which must
    then exist at the same path on every node.

    >>> cmd = submit_command("s3.properties", master="spark://h:7077", export_args=["--once"],
    ...                      python="/opt/venv/bin/python")
    >>> cmd[:5]  # doctest: +NORMALIZE_WHITESPACE
    ['spark-submit', '--master', 'spark://h:7077',
     '--conf', 'spark.pyspark.python=/opt/venv/bin/python']
    >>> cmd[-3:] == [str(Path(__file__).resolve()), "s3.properties", "--once"]
    True
    """
    python = python or sys.executable
    command = ["spark-submit"]
    if master:
        command += ["--master", master]
    if archive:
        command += [
            "--archives",
            f"{archive}#env",
            "--conf",
            "spark.pyspark.python=./env/bin/python",
        ]
        command += ["--conf", f"spark.pyspark.driver.python={python}"]
    else:
        command += ["--conf", f"spark.pyspark.python={python}"]
    return [*command, str(Path(__file__).resolve()), config, *export_args]


def shell_line(command: Sequence[str]) -> str:
    """``command`` quoted for a POSIX shell."""
    return " ".join(shlex.quote(part) for part in command)


def main(argv: Sequence[str] | None = None) -> None:
    """Run ``blockgz export`` with ``argv`` (default: this process's arguments)."""
    from blockgz.cli.app import main as cli

    cli(["export", *(sys.argv[1:] if argv is None else argv)], prog_name="blockgz")


if __name__ == "__main__":
    main()
