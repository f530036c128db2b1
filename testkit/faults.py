"""Stop or fail the export at a chosen point, for the crash tests, through the sink's listener hook.

Set ``blockgz.write.listener=testkit.faults:FaultListener`` and
``blockgz.write.listener.fault=<what>`` (:func:`fault_options` builds both):

* ``fail-first-attempt``: every write task's first attempt raises after writing its first
  object, so Spark's retry (``local[N,F]``) must clean up and redo it;
* ``pause-after-files:<count>:<batch>:<marker>``: in batch ``<batch>``, once a task has finished
  ``<count>`` value objects (the files beside them not counted), write this process's pid to
  file ``<marker>`` and wait there forever (the test SIGKILLs the job, or just this Python
  worker). Only the first task to get there pauses: once the marker exists, later tasks and
  retried attempts go on;
* ``pause-in-commit:<batch>:<marker>``: the same inside the driver's commit, after the
  manifest is written and before Spark records the batch as committed (and before the batch's
  Iceberg commit, with ``blockgz.iceberg.table``).
* ``hold-after-files:<count>:<batch>:<marker>`` and ``hold-in-commit:<batch>:<marker>``: the
  same places, but the export goes on once the test creates ``<marker>.go`` (:func:`release`),
  so a test changes the world at a known point of a running export.

>>> parse_fault("pause-in-commit:3:/tmp/m")
Fault(kind='pause-in-commit', batch=3, marker='/tmp/m', files=1)
>>> parse_fault("pause-after-files:2:1:/tmp/m").files
2
>>> sorted(fault_options("fail-first-attempt"))
['blockgz.write.listener', 'blockgz.write.listener.fault']
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass

from blockgz.errors import BlockGzError, ConfigError
from blockgz.sink.write.hooks import TaskInfo, WriteListener
from blockgz.written.files import WrittenFile

OPTION = "fault"
KINDS = (
    "fail-first-attempt",
    "pause-after-files",
    "pause-in-commit",
    "hold-after-files",
    "hold-in-commit",
)
#: How long a held export waits for the test to release it.
HOLD_S = 180


def fault_options(spec: str) -> dict[str, str]:
    """The sink options that inject ``spec``."""
    return {
        "blockgz.write.listener": "testkit.faults:FaultListener",
        f"blockgz.write.listener.{OPTION}": spec,
    }


class InjectedFault(BlockGzError, RuntimeError):
    """Raised on purpose by ``fail-first-attempt``."""


@dataclass(frozen=True)
class Fault:
    kind: str
    batch: int | None = None
    marker: str | None = None
    files: int = 1


def parse_fault(text: str | None) -> Fault | None:
    """Read the option; ``None`` when no fault is asked for."""
    if not text:
        return None
    kind, _, rest = text.partition(":")
    if kind not in KINDS:
        raise ConfigError(f"{OPTION}: {kind!r} is not allowed; allowed: {', '.join(KINDS)}")
    if kind == "fail-first-attempt":
        return Fault(kind)
    files = "1"
    if kind.endswith("-after-files"):
        files, _, rest = rest.partition(":")
    batch, _, marker = rest.partition(":")
    if not batch.isdigit() or not files.isdigit() or not marker:
        shape = (
            "<count>:<batch>:<marker file>" if kind.endswith("-after-files") else "<batch>:<marker>"
        )
        raise ConfigError(f"{OPTION}: use {kind}:{shape}")
    return Fault(kind, int(batch), marker, int(files))


def _pause(marker: str) -> None:
    try:
        with open(marker, "x") as out:  # the first task here pauses; a retry goes on
            out.write(f"{os.getpid()}\n")
    except FileExistsError:
        return
    while True:  # the crash test kills the whole process group from outside
        time.sleep(3600)


def _hold(marker: str) -> None:
    """Write ``marker`` (the first task here only) and wait until ``<marker>.go`` exists."""
    try:
        with open(marker, "x") as out:
            out.write(f"{os.getpid()}\n")
    except FileExistsError:
        return
    deadline = time.monotonic() + HOLD_S
    while not os.path.exists(marker + ".go"):
        if time.monotonic() > deadline:
            raise InjectedFault(f"held for {HOLD_S} s and never released: {marker}")
        time.sleep(0.1)  # polling the test's release file, with a deadline


def release(marker: str) -> None:
    """Let an export held at ``marker`` go on."""
    with open(marker + ".go", "w"):
        pass


class FaultListener(WriteListener):
    """Injects the configured :class:`Fault` when the sink reports a file or a commit."""

    fault: Fault | None = None

    def configure(self, options: Mapping[str, str]) -> None:
        self.fault = parse_fault(options.get(OPTION))

    def file_written(self, file: WrittenFile, task: TaskInfo) -> None:
        fault = self.fault
        if fault is None:
            return
        if fault.kind == "fail-first-attempt" and task.attempt == 0:
            raise InjectedFault("injected failure in the first attempt of a write task")
        if (
            fault.kind.endswith("-after-files")
            and task.batch_id == fault.batch
            and task.objects_done >= fault.files
        ):
            assert fault.marker is not None
            (_hold if fault.kind.startswith("hold") else _pause)(fault.marker)

    def batch_committed(self, batch_id: int | str, manifest_key: str) -> None:
        fault = self.fault
        if fault is not None and fault.kind.endswith("-in-commit") and batch_id == fault.batch:
            assert fault.marker is not None
            (_hold if fault.kind.startswith("hold") else _pause)(fault.marker)
