"""JVM parts from Maven Central, resolved once into a cache (a Kafka broker, Spark's connector).

Resolution runs Apache Ivy's command line, from the ``ivy`` jar that pyspark ships, so neither
Maven nor a download tool needs to be installed (``mvn dependency:copy-dependencies`` would
need Maven, which a user's machine may lack; Spark's own ``--packages`` resolver is this same
Ivy, behind a Spark application). The artifact and its runtime dependencies are copied into
``$BLOCKGZ_JAR_CACHE`` (default ``~/.cache/blockgz/jars``) under ``<group>/<name>-<version>/``,
and a marker file records a complete resolution, so later calls cost a directory listing.

>>> Artifact("org.apache.kafka", "kafka_2.13", "4.1.1").folder_name
'org.apache.kafka/kafka_2.13-4.1.1'
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from blockgz.errors import JarResolutionError

_DONE = ".resolved"
#: Seconds one resolution may take (a first download of ~45 MB of jars).
RESOLVE_TIMEOUT_S = 600


@dataclass(frozen=True)
class Artifact:
    """Maven coordinates of one artifact (its runtime dependencies come along)."""

    group: str
    name: str
    version: str

    @property
    def folder_name(self) -> str:
        return f"{self.group}/{self.name}-{self.version}"

    def __str__(self) -> str:
        return f"{self.group}:{self.name}:{self.version}"


def cache_root() -> Path:
    """Where resolved jars are kept (``$BLOCKGZ_JAR_CACHE``, default ``~/.cache/blockgz/jars``)."""
    given = os.environ.get("BLOCKGZ_JAR_CACHE")
    return Path(given) if given else Path.home() / ".cache" / "blockgz" / "jars"


def ivy_jar() -> Path | None:
    """The Ivy jar pyspark ships, or ``None`` without pyspark."""
    try:
        import pyspark
    except ImportError:
        return None
    found = sorted(Path(pyspark.__file__).parent.joinpath("jars").glob("ivy-*.jar"))
    return found[-1] if found else None


def resolved(artifact: Artifact) -> list[Path] | None:
    """The artifact's jars if already in the cache, else ``None``."""
    folder = cache_root() / artifact.folder_name
    if not (folder / _DONE).exists():
        return None
    return sorted(folder.glob("*.jar"))


def resolve(artifact: Artifact, *, java: str = "java") -> list[Path]:
    """The jars of ``artifact`` and its runtime dependencies, fetched on first use.

    Raises :class:`JarResolutionError` with Ivy's last lines when Maven Central cannot be
    reached or does not serve the version.
    """
    jars = resolved(artifact)
    if jars is not None:
        return jars
    ivy = ivy_jar()
    if ivy is None:
        raise JarResolutionError(f"cannot fetch {artifact}: pyspark (which ships Ivy) is missing")
    cache_root().mkdir(parents=True, exist_ok=True)
    # Ivy's cache is not safe for two processes at once (two test workers starting a broker
    # each): one reads a jar the other is still downloading and fails. One resolution at a
    # time, and whoever waited finds the other's result.
    with open(cache_root() / ".resolve.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        jars = resolved(artifact)
        if jars is not None:
            return jars
        return _resolve_unlocked(artifact, ivy, java)


def _resolve_unlocked(artifact: Artifact, ivy: Path, java: str) -> list[Path]:
    folder = cache_root() / artifact.folder_name
    folder.parent.mkdir(parents=True, exist_ok=True)
    # Into a fresh folder beside the final one, renamed when complete: a resolution that was
    # killed half-way never passes for a complete one.
    work = Path(tempfile.mkdtemp(prefix=f".{artifact.name}-", dir=folder.parent))
    try:
        command = [
            java, "-jar", str(ivy),
            "-dependency", artifact.group, artifact.name, artifact.version,
            "-confs", "default",
            "-cache", str(cache_root() / ".ivy-cache"),
            "-retrieve", str(work / "[artifact]-[revision](-[classifier]).[ext]"),
        ]  # fmt: skip
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=RESOLVE_TIMEOUT_S, check=False
        )
        if done.returncode != 0 or not any(work.glob("*.jar")):
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
            raise JarResolutionError(f"could not fetch {artifact} from Maven Central:\n{tail}")
        (work / _DONE).write_text(str(artifact))
        shutil.rmtree(folder, ignore_errors=True)
        work.rename(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return sorted(folder.glob("*.jar"))
