"""The sink's two hooks: where its input comes from, and who hears what it wrote.

Both are named by option as ``module:Name`` and get their own options with a prefix removed,
so they work in Spark's workers without anything but options crossing over.

* ``blockgz.input.reader=module:function`` turns a task's input Arrow batches into Arrow
  batches of Kafka records (:data:`InputReader`), given the ``blockgz.source.*`` options.
  ``blockgz export`` uses it when tasks read their Kafka offset ranges themselves
  (``blockgz.sink.kafka.ranges:read_range_rows``); the sink itself knows nothing of Kafka.
* ``blockgz.write.listener=module:Class`` names a :class:`WriteListener`, told about every
  finished object in a task and every committed batch on the driver, with the
  ``blockgz.write.listener.*`` options. Use it to count, alert, or (in blockgz's own crash
  tests) stop the job at a chosen point.

>>> load_listener("", {}) is None
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from blockgz.errors import ConfigError
from blockgz.sink.plugins import import_named, instantiate
from blockgz.written.files import WrittenFile

#: ``(options, input batches) -> Kafka record batches``, with Spark's Kafka source columns.
InputReader = Callable[[Mapping[str, str], Iterator[Any]], Iterator[Any]]


@dataclass(frozen=True)
class TaskInfo:
    """Which task attempt wrote a file, and how many files that attempt has finished."""

    batch_id: int | None
    attempt: int
    files_done: int
    #: Of those, the value objects (not the keys, headers or timestamps files beside them).
    objects_done: int = 0


class WriteListener:
    """Subclass and override what you need; every method does nothing by default."""

    def configure(self, options: Mapping[str, str]) -> None:
        """The ``blockgz.write.listener.*`` options, prefix removed."""

    def file_written(self, file: WrittenFile, task: TaskInfo) -> None:
        """In a write task, after ``file`` (and its index) is complete."""

    def batch_committed(self, batch_id: int | str, manifest_key: str) -> None:
        """On the driver, after the batch manifest is written (before the Iceberg commit of
        :mod:`blockgz.sink.iceberg`, when there is one)."""


def load_listener(spec: str, options: Mapping[str, str]) -> WriteListener | None:
    """The listener ``spec`` names, configured; ``None`` when ``spec`` is empty."""
    if not spec:
        return None
    allowed = "module:Class naming a blockgz.sink.write.hooks.WriteListener subclass"
    cls = import_named(spec, "blockgz.write.listener", allowed)
    if not (isinstance(cls, type) and issubclass(cls, WriteListener)):
        raise ConfigError(f"blockgz.write.listener: {spec!r} is not a {allowed}")
    listener = instantiate(cls, spec, "blockgz.write.listener")
    listener.configure(dict(options))
    return listener


def load_input_reader(spec: str) -> InputReader | None:
    """The input reader ``spec`` names; ``None`` when ``spec`` is empty."""
    if not spec:
        return None
    reader = import_named(spec, "blockgz.input.reader", "module:function")
    if not callable(reader):
        raise ConfigError(f"blockgz.input.reader: {spec!r} is not a function")
    return reader
