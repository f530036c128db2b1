"""Kafka Connect's own single message transforms, run in one long-lived JVM for the tests.

:class:`ConnectTransforms` starts ``testkit/java/SmtRunner.java`` with Java 17's single-file
source launcher (no build step) on the jars of the pinned releases below, fetched from Maven
Central once by :mod:`blockgz.jars` (Ivy, a flock'd cache), and talks to it one JSON line per
record over stdin/stdout: a request holds a connector config's ``transforms``/``predicates``
settings and a record (topic, partition, timestamp, headers; key and value in JsonConverter's
``{"schema": ..., "payload": ...}`` form) and the answer is the record Connect's chain makes,
``{"dropped": true}`` or ``{"error": "<class>: <message>", "phase": "config" | "apply" |
"output"}`` (``output``: JsonConverter cannot write the record the chain made). The
JVM starts in about a second (it compiles the runner); a record then costs well under a
millisecond, so the differential tests can send hundreds.

Pinned: Apache Kafka ``connect-api``, ``connect-transforms``, ``connect-json`` 4.1.1 (the test
broker's version) and Debezium ``debezium-connect-plugins`` 3.6.1.Final (which holds
``io.debezium.transforms.ExtractNewRecordState``). Debezium's own resolution brings newer Kafka
jars (``kafka-clients``/``connect-api`` 4.3.0): the classpath keeps Kafka's 4.1.1 set whole and
adds only the Debezium jars whose artifact Kafka's set lacks (:func:`merge_classpath`).

>>> [p.name for p in merge_classpath([[Path("a/connect-api-4.1.1.jar")],
...     [Path("b/connect-api-4.3.0.jar"), Path("b/debezium-api-3.6.1.Final.jar")]])]
['connect-api-4.1.1.jar', 'debezium-api-3.6.1.Final.jar']
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from blockgz.errors import BlockGzError
from blockgz.jars import Artifact, resolve

KAFKA_VERSION = "4.1.1"
DEBEZIUM_VERSION = "3.6.1.Final"

#: The artifacts the runner's classpath is made of, Kafka's first (their jars win a clash).
ARTIFACTS = (
    Artifact("org.apache.kafka", "connect-api", KAFKA_VERSION),
    Artifact("org.apache.kafka", "connect-transforms", KAFKA_VERSION),
    Artifact("org.apache.kafka", "connect-json", KAFKA_VERSION),
    Artifact("io.debezium", "debezium-connect-plugins", DEBEZIUM_VERSION),
)

RUNNER_SOURCE = Path(__file__).parent / "java" / "SmtRunner.java"
#: Seconds the JVM may take to compile the runner and answer its first record.
START_TIMEOUT_S = 60.0
#: Seconds one answer may take once the JVM runs.
ANSWER_TIMEOUT_S = 20.0

_JAR_NAME = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d[\w.\-]*)\.jar$")


class SmtRunnerError(BlockGzError, RuntimeError):
    """The Java transform runner died, or did not answer in time."""


def artifact_name(jar: Path) -> str:
    """A jar's artifact name without its version (``zstd-jni-1.5.6-10.jar`` -> ``zstd-jni``).

    >>> artifact_name(Path("zstd-jni-1.5.6-10.jar")), artifact_name(Path("odd.jar"))
    ('zstd-jni', 'odd')
    """
    found = _JAR_NAME.match(jar.name)
    return found.group("artifact") if found else jar.stem


def merge_classpath(resolutions: Iterable[Sequence[Path]]) -> list[Path]:
    """One jar per artifact name across ``resolutions``: the first resolution naming it wins."""
    chosen: dict[str, Path] = {}
    for jars in resolutions:
        for jar in jars:
            chosen.setdefault(artifact_name(jar), jar)
    return list(chosen.values())


def classpath() -> list[Path]:
    """The runner's jars, fetched from Maven Central on first use."""
    return merge_classpath(resolve(artifact) for artifact in ARTIFACTS)


class ConnectTransforms:
    """The Java runner as a context manager: ``run(request) -> answer`` per record."""

    def __init__(self, java: str = "java") -> None:
        self.java = java
        self._process: subprocess.Popen[str] | None = None
        self._stderr_path: Path | None = None

    @staticmethod
    def unavailable_reason() -> str | None:
        """Why the runner cannot start here (no Java, no pyspark's Ivy), or ``None``."""
        if shutil.which("java") is None:
            return "the Connect transforms runner needs Java 17+ on PATH"
        from blockgz.jars import ivy_jar

        if ivy_jar() is None:
            return "pyspark is not installed (its Ivy jar fetches Connect's jars)"
        return None

    def __enter__(self) -> ConnectTransforms:
        jars = os.pathsep.join(str(jar) for jar in classpath())
        handle, name = tempfile.mkstemp(prefix="smt-runner-", suffix=".stderr")
        self._stderr_path = Path(name)
        with os.fdopen(handle, "w") as stderr:
            self._process = subprocess.Popen(
                [self.java, "-Xmx256m", "-cp", jars, str(RUNNER_SOURCE)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                encoding="utf-8",
            )
        try:
            self.run({"config": {}, "topic": "warm-up", "value": None}, START_TIMEOUT_S)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        process, self._process = self._process, None
        if process is not None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
        if self._stderr_path is not None:
            self._stderr_path.unlink(missing_ok=True)
            self._stderr_path = None

    def run(self, request: dict[str, Any], timeout: float = ANSWER_TIMEOUT_S) -> dict[str, Any]:
        """Connect's answer for one request (see the module docstring for both shapes)."""
        process = self._process
        if process is None or process.stdin is None or process.stdout is None:
            raise SmtRunnerError("the Connect transforms runner is not running")
        try:
            process.stdin.write(json.dumps(request) + "\n")
            process.stdin.flush()
        except BrokenPipeError:
            tail = self._stderr_tail()
            raise SmtRunnerError(f"the Connect transforms runner died: {tail}") from None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise SmtRunnerError(f"no answer from the Connect transforms runner in {timeout} s")
            ready, _, _ = select.select([process.stdout], [], [], left)
            if ready:
                break
        line = process.stdout.readline()
        if not line:
            raise SmtRunnerError(f"the Connect transforms runner died: {self._stderr_tail()}")
        return json.loads(line)

    def _stderr_tail(self) -> str:
        if self._stderr_path is None or not self._stderr_path.exists():
            return "(no stderr)"
        lines = self._stderr_path.read_text(errors="replace").strip().splitlines()
        return " | ".join(lines[-5:]) or "(no stderr)"
