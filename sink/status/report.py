"""What ``blockgz status`` reports and how it is judged: a row per topic-partition
(:class:`PartitionStatus`), :class:`Issue` lines, the :class:`StatusReport` with its JSON and
exit code, and :func:`assess`, which turns a report's figures into issues.
:mod:`blockgz.sink.status.job_status` fills one in for a job.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, fields
from typing import Any

from blockgz.times import format_duration, iso_seconds

HEALTHY, WARNING, PROBLEM = 0, 1, 2
_LEVELS = {WARNING: "warning", PROBLEM: "problem"}


@dataclass
class PartitionStatus:
    """One topic-partition: what the archive committed and what Kafka holds."""

    topic: str
    partition: int
    #: The first and last offsets of the committed objects (``None``: none yet).
    first_offset: int | None = None
    last_offset: int | None = None
    #: The next offset after everything the manifests committed (``None``: nothing yet).
    committed: int | None = None
    #: Kafka's log start and end offsets (``None``: the brokers were not asked, or failed).
    kafka_start: int | None = None
    kafka_end: int | None = None
    dead_letters: int = 0
    #: When the manifest that last advanced ``committed`` was written (epoch seconds).
    last_commit: float | None = None
    #: Records of the lag the export holds back on purpose: its partial file, waiting for
    #: ``flush.size`` or a time rotation (:mod:`blockgz.sink.kafka.holding`); never alarmed on.
    held: int = 0

    @property
    def lag(self) -> int | None:
        """Records in Kafka not archived yet (from its log start when nothing is committed)."""
        if self.kafka_end is None:
            return None
        start = self.committed if self.committed is not None else self.kafka_start
        return max(0, self.kafka_end - (start or 0))

    @property
    def late(self) -> int | None:
        """The lag without the records held on purpose: what alarms look at."""
        return None if self.lag is None else self.lag - self.held


#: A row's fields, for its JSON (``asdict`` deep-copies each: 3 s for 10,000 partitions).
_ROW_FIELDS = fields(PartitionStatus)


@dataclass(frozen=True)
class Issue:
    """A warning (1) or a problem (2), in one line."""

    level: int
    message: str

    def line(self) -> str:
        return f"{_LEVELS[self.level]}: {self.message}"


@dataclass
class StatusReport:
    """One job's status (see the module docstring); :meth:`to_json` for scripts."""

    job: str
    archive: str
    brokers: str
    checked_at: float
    partitions: list[PartitionStatus] = field(default_factory=list)
    #: Unfinished multipart uploads under the job's prefixes: key and start time.
    open_uploads: list[dict[str, Any]] = field(default_factory=list)
    #: Objects under the job's topic prefixes that no manifest committed: key, size, time.
    uncommitted: list[dict[str, Any]] = field(default_factory=list)
    manifests: int = 0
    records: int = 0
    issues: list[Issue] = field(default_factory=list)
    #: What held records wait for (``''``: the export holds nothing back).
    held_for: str = ""

    @property
    def held(self) -> int:
        """Records the export holds back on purpose, over all partitions."""
        return sum(p.held for p in self.partitions)

    @property
    def last_commit(self) -> float | None:
        """The newest commit of any topic-partition."""
        return max(
            (p.last_commit for p in self.partitions if p.last_commit is not None), default=None
        )

    @property
    def exit_code(self) -> int:
        """0 healthy, 1 a warning, 2 a problem."""
        return max((issue.level for issue in self.issues), default=HEALTHY)

    def to_dict(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "archive": self.archive,
            "brokers": self.brokers,
            "checked_at": iso_seconds(self.checked_at),
            "status": ("healthy", "warning", "problem")[self.exit_code],
            "exit_code": self.exit_code,
            "manifests": self.manifests,
            "records": self.records,
            "held": self.held,
            "held_for": self.held_for,
            "last_commit": iso_seconds(self.last_commit),
            "partitions": [
                {
                    **{f.name: getattr(p, f.name) for f in _ROW_FIELDS if f.name != "last_commit"},
                    "lag": p.lag,
                    "last_commit": iso_seconds(p.last_commit),
                }
                for p in self.partitions
            ],
            "open_uploads": self.open_uploads,
            "uncommitted": self.uncommitted,
            "issues": [{"level": _LEVELS[i.level], "message": i.message} for i in self.issues],
        }

    def to_json(self) -> str:
        """The report as JSON (times in ISO 8601 UTC)."""
        return json.dumps(self.to_dict(), indent=2)


def assess(
    report: StatusReport,
    *,
    max_lag: int | None = None,
    max_commit_age: float | None = None,
    now: float | None = None,
) -> list[Issue]:
    """The warnings and problems of ``report``'s figures (added to ``report.issues`` too).

    Lag above ``max_lag`` records is a warning. A topic-partition whose last commit is older
    than ``max_commit_age`` seconds while records wait for it (its lag is above 0, or unknown)
    is a problem; an idle one (lag 0) is not. Records held back on purpose (a partial file
    waiting for ``flush.size`` or a time rotation) count for neither.

    >>> r = StatusReport("j", "s3://b", "k:9092", 0.0, [PartitionStatus("t", 0, committed=5,
    ...                  kafka_end=105, last_commit=1000.0)])
    >>> for issue in assess(r, max_lag=50, max_commit_age=600, now=2000.0):
    ...     print(issue.line())
    warning: t-0: lag 100 records > --max-lag 50
    problem: t-0: no commit for 16m40s > --max-commit-age 10m (100 records wait)
    >>> r.exit_code
    2
    """
    now = time.time() if now is None else now
    found: list[Issue] = []
    for p in report.partitions:
        lag = p.late
        if max_lag is not None and lag is not None and lag > max_lag:
            found.append(
                Issue(WARNING, f"{p.topic}-{p.partition}: lag {lag} records > --max-lag {max_lag}")
            )
        if max_commit_age is None or lag == 0:
            continue
        waiting = "records wait" if lag is None else f"{lag} records wait"
        if p.last_commit is None:
            if p.committed is None and lag:
                what = f"{p.topic}-{p.partition}: nothing committed yet ({waiting})"
                found.append(Issue(WARNING, what))
            continue
        age = now - p.last_commit
        if age > max_commit_age:
            found.append(
                Issue(
                    PROBLEM,
                    f"{p.topic}-{p.partition}: no commit for {format_duration(age)} > "
                    f"--max-commit-age {format_duration(max_commit_age)} ({waiting})",
                )
            )
    report.issues.extend(found)
    return found
