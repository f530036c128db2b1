"""Live progress of an export, per topic-partition: offset, records/s, lag, objects written.

On a terminal it is a rich table redrawn in place; elsewhere (logs, CI) one line per
topic-partition whenever a batch commits, so a log file still says what happened where.
"""

from __future__ import annotations

import logging
from types import TracebackType

from rich.console import Console
from rich.live import Live
from rich.table import Table

from blockgz.sink.export.tracking import ExportResult
from blockgz.sink.jobconfig.events import event

log = logging.getLogger("blockgz.export")


def render(result: ExportResult, title: str = "") -> Table:
    """The progress table for one snapshot (a dead-letter column once there are any)."""
    table = Table(title=title or None, title_justify="left", expand=False)
    columns = [
        ("topic-partition", "left"),
        ("next offset", "right"),
        ("records/s", "right"),
        ("lag", "right"),
        ("objects", "right"),
    ]
    if result.dead_letters:
        columns.append(("dead letters", "right"))
    for name, justify in columns:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for (topic, part), state in sorted(result.partitions.items()):
        row = [
            f"{topic}-{part}",
            "-" if state.next_offset is None else f"{state.next_offset:,}",
            f"{state.rate:,.0f}",
            "-" if state.lag is None else f"{state.lag:,}" + _held(state),
            f"{state.files:,}",
        ]
        if result.dead_letters:
            row.append(f"{state.dead_letters:,}")
        table.add_row(*row)
    table.caption = (
        f"{result.batches} batches, {result.records:,} records, {result.files:,} objects"
        + (f", {result.dead_letters:,} dead letters" if result.dead_letters else "")
    )
    return table


def _held(state) -> str:
    """`` (held N)`` for a partition whose partial file waits on purpose (issue 44)."""
    return f" (held {state.held:,})" if state.held else ""


class ProgressView:
    """``with ProgressView(console) as view: run_export(..., on_progress=view.update)``."""

    def __init__(self, console: Console | None = None, title: str = ""):
        self.console = console or Console(stderr=True)
        self.title = title
        self._live: Live | None = None
        self._logged_batches = 0

    def __enter__(self) -> ProgressView:
        if self.console.is_terminal:
            self._live = Live(console=self.console, refresh_per_second=2, transient=False)
            self._live.__enter__()
        return self

    def update(self, result: ExportResult) -> None:
        if self._live is not None:
            self._live.update(render(result, self.title))
            return
        if result.batches == self._logged_batches:
            return
        self._logged_batches = result.batches
        for (topic, part), state in sorted(result.partitions.items()):
            lag = "" if state.lag is None else f", lag {state.lag:,}{_held(state)}"  # if known
            dead = f", {state.dead_letters:,} dead letters" if state.dead_letters else ""
            log.info(
                "%s-%d: next offset %s%s, %d objects%s",
                topic,
                part,
                state.next_offset,
                lag,
                state.files,
                dead,
                extra=event(
                    "partition",
                    topic=topic,
                    partition=part,
                    next_offset=state.next_offset,
                    lag=state.lag,
                    objects=state.files,
                    dead_letters=state.dead_letters,
                ),
            )

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._live is not None:
            self._live.__exit__(exc_type, exc, tb)
            self._live = None
