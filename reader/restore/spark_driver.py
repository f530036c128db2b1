"""``blockgz replay`` as a Spark job: the driver's part (:func:`replay_on_spark`); each task runs
:func:`blockgz.reader.restore.replay.replay` for one archived partition."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from blockgz.reader.restore.replay import ReplayResult, ReplaySettings, replay


def replay_on_spark(
    spark: Any, source: str, archive_options: Mapping[str, Any], settings: ReplaySettings
) -> ReplayResult:
    """:func:`replay` as a Spark job: each archived partition becomes one task (a partition's
    records must go in order, so one task replays one partition whole). Each task resumes as a
    local replay does, so a failed task that Spark retries sends only what is missing."""
    from blockgz.reader.reading.archive import open_archive

    with open_archive(source, dict(archive_options)) as archive:
        partitions = (
            settings.partitions
            if settings.partitions is not None
            else archive.partitions(settings.topic)
        )
    if not partitions:
        return ReplayResult()
    options = dict(archive_options)

    def one_partition(partition: int) -> tuple[int, int, int, float, list[str]]:
        from dataclasses import replace

        from blockgz.reader.reading.archive import open_archive as open_on_executor

        with open_on_executor(source, options) as executor_archive:
            done = replay(executor_archive, replace(settings, partitions=[partition]))
        sent, skipped = done.sent.get(partition, 0), done.skipped.get(partition, 0)
        return partition, sent, skipped, done.seconds, done.not_kept

    started = time.monotonic()
    rows = spark.sparkContext.parallelize(partitions, len(partitions)).map(one_partition).collect()
    result = ReplayResult(seconds=time.monotonic() - started)
    for partition, sent, skipped, _, not_kept in rows:
        result.sent[partition], result.skipped[partition] = sent, skipped
        result.not_kept += [what for what in not_kept if what not in result.not_kept]
    return result
