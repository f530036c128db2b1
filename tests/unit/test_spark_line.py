"""The cached environment of another Spark line (testkit.spark_line), without PyPI: an
environment with no requirements, built atomically and once."""

from __future__ import annotations

import subprocess
import sys

import pytest

from blockgz.errors import MissingDependencyError
from testkit import spark_line
from testkit.spark_line import PyPIUnreachableError, isolated_python


def test_builds_once_and_is_taken_as_built_later(tmp_path):
    folder = tmp_path / "pyspark-0.0"
    python = isolated_python(folder, [])
    done = subprocess.run([python, "-c", "import sys; print(sys.prefix)"], capture_output=True)
    assert done.stdout.decode().strip() == str(folder), "the renamed environment runs as itself"
    marker = folder / ".complete"
    built = marker.stat().st_mtime_ns
    assert isolated_python(folder, []) == python
    assert marker.stat().st_mtime_ns == built, "not rebuilt"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".pyspark-0.0.lock", "pyspark-0.0"]


def test_a_folder_left_by_a_killed_build_is_rebuilt(tmp_path):
    folder = tmp_path / "pyspark-0.0"
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").write_text("half a copy")
    python = isolated_python(folder, [])
    assert (folder / ".complete").exists()
    assert subprocess.run([python, "-c", "pass"]).returncode == 0


def test_a_failed_install_leaves_nothing_that_passes_for_built(tmp_path, monkeypatch):
    def failing(command, what):
        if "pip" in command:
            raise MissingDependencyError(f"could not {what}")
        subprocess.run([*command[:-1], "--without-pip", command[-1]], check=True)  # quick

    monkeypatch.setattr(spark_line, "_run", failing)
    folder = tmp_path / "pyspark-0.0"
    with pytest.raises(MissingDependencyError, match="could not install"):
        isolated_python(folder, ["pyspark==0.0"])
    assert not folder.exists()
    assert [p.name for p in tmp_path.iterdir()] == [".pyspark-0.0.lock"], "no temporary folder"


@pytest.mark.parametrize(
    ("output", "error"),
    [
        ("WARNING: Retrying (Retry(total=4)) after connection broken by 'NewConnectionError'\n"
         "ERROR: No matching distribution found for pyspark==4.1.4", PyPIUnreachableError),
        ("ERROR: No matching distribution found for pyspark==9.9.9", MissingDependencyError),
    ],
    ids=["unreachable", "no-such-version"],
)  # fmt: skip
def test_pip_failures_say_whether_pypi_was_unreachable(output, error):
    command = [sys.executable, "-c", f"import sys; sys.stderr.write({output!r}); sys.exit(1)"]
    with pytest.raises(MissingDependencyError) as raised:
        spark_line._run(command, "install pyspark")
    assert type(raised.value) is error
    assert "No matching distribution" in str(raised.value)
