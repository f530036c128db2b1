"""The export's progress lines in a log: one per topic-partition per batch, lag only when known."""

from __future__ import annotations

import io
import logging

from rich.console import Console

from blockgz.sink.export.job import ExportResult, PartitionProgress
from blockgz.sink.export.progress import ProgressView


def test_log_lines_show_the_lag_when_known_and_leave_it_out_otherwise(caplog):
    result = ExportResult(batches=1)
    result.partitions[("t", 0)] = PartitionProgress(next_offset=40, latest=100, files=2)
    result.partitions[("t", 1)] = PartitionProgress(next_offset=7, files=1)
    view = ProgressView(Console(file=io.StringIO(), force_terminal=False))
    with caplog.at_level(logging.INFO, logger="blockgz.export"), view:
        view.update(result)
        view.update(result)  # the same batch again: nothing new to log
    assert [r.getMessage() for r in caplog.records] == [
        "t-0: next offset 40, lag 60, 2 objects",
        "t-1: next offset 7, 1 objects",
    ]


def test_dead_letters_show_per_topic_partition_in_the_log_and_the_table(caplog):
    from blockgz.sink.export.progress import render

    result = ExportResult(batches=1, dead_letters=3)
    result.partitions[("t", 0)] = PartitionProgress(next_offset=40, files=2, dead_letters=3)
    result.partitions[("t", 1)] = PartitionProgress(next_offset=7, files=1)
    view = ProgressView(Console(file=io.StringIO(), force_terminal=False))
    with caplog.at_level(logging.INFO, logger="blockgz.export"), view:
        view.update(result)
    assert [r.getMessage() for r in caplog.records] == [
        "t-0: next offset 40, 2 objects, 3 dead letters",
        "t-1: next offset 7, 1 objects",
    ]
    out = io.StringIO()
    Console(file=out, width=120).print(render(result))
    assert "dead letters" in out.getvalue() and "3 dead letters" in out.getvalue()
