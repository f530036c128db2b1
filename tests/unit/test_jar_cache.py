"""``blockgz.jars``: resolutions into the shared cache take turns (no network: Ivy is a stub).

Two test workers that start a Kafka broker each used to run Ivy at the same time on one cache.
On an empty cache one of them read a jar the other was still downloading and failed, so on a
fresh machine half of ``make test`` errored in its fixtures.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from blockgz import jars

pytestmark = pytest.mark.skipif(
    not Path("/proc/locks").exists(), reason="needs Linux's /proc/locks to see a waiting lock"
)

# Stands in for `java -jar ivy.jar ...`: logs its start and end, waits for a go file when
# asked to, and leaves one jar where Ivy's -retrieve pattern points.
STUB = """#!{python}
import os, sys, time
from pathlib import Path
args = sys.argv[1:]
name = args[args.index("-dependency") + 2]
log = Path({log!r})
with log.open("a") as out:
    out.write(f"start {{name}}\\n")
go = Path({go!r})
deadline = time.monotonic() + 30
while name == "first" and not go.exists() and time.monotonic() < deadline:
    time.sleep(0.01)
pattern = args[args.index("-retrieve") + 1]
folder = Path(pattern).parent
(folder / f"{{name}}-1.0.jar").write_text("")
with log.open("a") as out:
    out.write(f"end {{name}}\\n")
"""


def _waiters_on(path: Path) -> int:
    """How many flock requests wait on ``path`` (the ``->`` lines of /proc/locks)."""
    if not path.exists():
        return 0
    inode = os.stat(path).st_ino
    lines = Path("/proc/locks").read_text().splitlines()
    return sum(1 for line in lines if "->" in line and line.split()[-3].endswith(f":{inode}"))


def _poll(condition, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture
def stub_java(tmp_path, monkeypatch):
    monkeypatch.setenv("BLOCKGZ_JAR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(jars, "ivy_jar", lambda: tmp_path / "ivy.jar")
    log, go = tmp_path / "log", tmp_path / "go"
    script = tmp_path / "java"
    script.write_text(STUB.format(python=sys.executable, log=str(log), go=str(go)))
    script.chmod(0o755)
    return script, log, go


def test_a_second_resolution_waits_for_the_first(stub_java):
    java, log, go = stub_java
    results: dict[str, list[Path]] = {}

    def resolve(name: str) -> None:
        results[name] = jars.resolve(jars.Artifact("g", name, "1.0"), java=str(java))

    first = threading.Thread(target=resolve, args=("first",))
    first.start()
    _poll(lambda: log.exists() and "start first" in log.read_text(), "the first Ivy run")
    second = threading.Thread(target=resolve, args=("second",))
    second.start()
    lock = jars.cache_root() / ".resolve.lock"
    _poll(lambda: _waiters_on(lock) == 1, "the second resolution to wait on the lock")
    assert "second" not in log.read_text()
    go.write_text("")
    first.join(30)
    second.join(30)
    assert log.read_text().split("\n") == [
        "start first", "end first", "start second", "end second", ""
    ]  # fmt: skip
    assert [p.name for p in results["first"]] == ["first-1.0.jar"]
    assert [p.name for p in results["second"]] == ["second-1.0.jar"]


def test_whoever_waited_takes_the_others_result_without_running_ivy(stub_java):
    java, log, go = stub_java
    go.write_text("")
    artifact = jars.Artifact("g", "first", "1.0")
    jars.cache_root().mkdir(parents=True)
    got: list[list[Path]] = []
    with open(jars.cache_root() / ".resolve.lock", "w") as held:
        import fcntl

        fcntl.flock(held, fcntl.LOCK_EX)
        waiter = threading.Thread(target=lambda: got.append(jars.resolve(artifact, java=str(java))))
        waiter.start()
        _poll(lambda: _waiters_on(Path(held.name)) == 1, "the resolution to wait on the lock")
        # Meanwhile "another process" completes the same resolution.
        folder = jars.cache_root() / artifact.folder_name
        folder.mkdir(parents=True)
        (folder / "first-1.0.jar").write_text("")
        (folder / ".resolved").write_text(str(artifact))
    waiter.join(30)
    assert [p.name for p in got[0]] == ["first-1.0.jar"]
    assert not log.exists()  # Ivy never ran
