"""Restore on Spark: :func:`~blockgz.reader.restore.send.send_records` of each partition as a
task of one Spark job (``blockgz restore --master``, ``blockgz replay --master``)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from blockgz.reader.restore.send import SendResult, SendSettings, send_records


def send_on_spark(
    spark: Any,
    source: str,
    archive_options: Mapping[str, Any],
    runs: Sequence[SendSettings],
    *,
    task_env: Mapping[str, str] | None = None,
) -> list[SendResult]:
    """:func:`send_records` of each of ``runs`` as one Spark job, one result per run: each
    partition a run names is one task (a partition's records must go in order, so one task
    sends one partition whole; a run that names none sends every partition the archive holds
    of its topic). Each task resumes as a local send does, so a failed task that
    Spark retries sends only what is missing.

    ``task_env``: environment variables each task sets in its worker before it reads the
    archive (the driver's AWS credentials, on a cluster whose nodes lack them). They travel
    inside the pickled task, never in Spark's config, so no process's arguments, Spark's
    environment page nor its event log show them."""
    tasks = [
        (n, replace(run, partitions=[p]))
        for n, run in enumerate(runs)
        for p in _partitions(run, source, archive_options)
    ]
    results = [SendResult() for _ in runs]
    if not tasks:
        return results
    options, environ = dict(archive_options), dict(task_env or {})

    def one_partition(task: tuple[int, SendSettings]) -> tuple[int, int, int, int, list[str]]:
        from blockgz.reader.reading.archive import open_archive as open_on_executor

        os.environ.update(environ)
        number, run = task
        partition = (run.partitions or [0])[0]
        with open_on_executor(source, options) as executor_archive:
            done = send_records(executor_archive, run)
        sent, skipped = done.sent.get(partition, 0), done.skipped.get(partition, 0)
        return number, partition, sent, skipped, done.not_kept

    started = time.monotonic()
    rows = spark.sparkContext.parallelize(tasks, len(tasks)).map(one_partition).collect()
    seconds = time.monotonic() - started
    for number, partition, sent, skipped, not_kept in rows:
        done = SendResult({partition: sent}, {partition: skipped}, not_kept=not_kept)
        results[number].merge(done)
    for result in results:
        result.seconds = seconds
    return results


def _partitions(run: SendSettings, source: str, archive_options: Mapping[str, Any]) -> list[int]:
    """The partitions ``run`` names, or else every one the archive holds of its topic."""
    if run.partitions is not None:
        return run.partitions
    from blockgz.reader.reading.archive import open_archive

    with open_archive(source, dict(archive_options)) as archive:
        return list(archive.partitions(run.topic))
