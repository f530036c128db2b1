"""The export's log as events: text lines for people, or JSON lines for a log shipper, and the
log file they go to (:func:`log_records_to`; the JVM's output beside it: :func:`jvm_output`).

``blockgz.log.format=json`` writes the job's log file as one JSON object per line. Every line
has ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message`` (the text line's words);
the lines a shipper acts on also carry ``event``, a kind and its fields:

* ``start``: which source reads Kafka and where a fresh checkpoint resumes (a restart);
* ``batch``: a committed micro-batch, with Spark's time per phase in ms;
* ``partition``: per topic-partition after each batch, the next offset, lag, objects and dead
  letters;
* ``lease``: the job's lease taken over from a stopped or expired holder;
* ``metrics``: where the driver serves Prometheus metrics (``blockgz.metrics.port``);
* ``failure``: the export stopped on an error, with its one-line account.

>>> import logging
>>> record = logging.LogRecord("blockgz.export", logging.INFO, "", 0, "t-0: next offset 5",
...                            None, None)
>>> record.__dict__.update(event("partition", topic="t", partition=0, next_offset=5))
>>> line = json.loads(JsonLinesFormatter().format(record))
>>> line["event"], line["message"]
({'kind': 'partition', 'topic': 't', 'partition': 0, 'next_offset': 5}, 't-0: next offset 5')
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def event(kind: str, **fields: Any) -> dict[str, Any]:
    """The ``extra`` of a log call that is also an event: ``log.info(..., extra=event(...))``."""
    return {"event": {"kind": kind, **fields}}


class JsonLinesFormatter(logging.Formatter):
    """One JSON object per record (see the module docstring); never raises on odd values."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        kind = getattr(record, "event", None)
        if kind is not None:
            line["event"] = kind
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


def formatter_for(log_format: str) -> logging.Formatter:
    """The formatter of ``blockgz.log.format`` (``text`` or ``json``).

    >>> type(formatter_for("json")).__name__
    'JsonLinesFormatter'
    """
    return _FORMATTERS[log_format]()


_FORMATTERS = {"text": lambda: logging.Formatter(TEXT_FORMAT), "json": JsonLinesFormatter}


#: The logger the export's own records go to (its ``failure`` event too).
_EXPORT_LOG = logging.getLogger("blockgz.export")


def jvm_output(log_file: str | Path | None, log_format: str = "text") -> Path | None:
    """Where the JVM's and Spark's Python workers' output goes: the job's log file, or with
    ``blockgz.log.format=json`` a file of its own beside it (``<stem>.jvm.log``), so the JSON
    log holds JSON lines only.

    >>> jvm_output("/c/blockgz-export.log", "json").name, jvm_output("/c/x.log").name
    ('blockgz-export.jvm.log', 'x.log')
    """
    if log_file is None:
        return None
    path = Path(log_file)
    return path.with_name(f"{path.stem}.jvm.log") if log_format == "json" else path


class _LogFile(logging.FileHandler):
    """The job's log file, which may sit on a disk that fills up (the checkpoint's): a record
    it cannot write is dropped there, not reported with a traceback on the terminal."""

    def handleError(self, record: logging.LogRecord) -> None:
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handleError(record)

    def close(self) -> None:
        try:
            super().close()  # its last flush can fail the same way
        except OSError:
            self.stream = None


@contextlib.contextmanager
def log_records_to(path: str | Path | None, log_format: str = "text") -> Iterator[None]:
    """While the block runs, also write every log record (INFO and up) to ``path``, as text or
    JSON lines (:func:`formatter_for`); an error that ends the block is logged
    there as a ``failure`` event."""
    if path is None:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    handler = _LogFile(path)
    handler.setLevel(logging.INFO)
    handler.setFormatter(formatter_for(log_format))
    root, ours = logging.getLogger(), logging.getLogger("blockgz")
    level = ours.level
    if ours.getEffectiveLevel() > logging.INFO:
        ours.setLevel(logging.INFO)  # the file gets blockgz's INFO records whoever calls
    root.addHandler(handler)
    try:
        yield
    except Exception as exc:  # into the file only: the terminal gets the caller's one line
        failure = _EXPORT_LOG.makeRecord(
            _EXPORT_LOG.name, logging.ERROR, __file__, 0, "export failed: %s", (exc,), None,
            extra=event("failure", error=str(exc)),
        )  # fmt: skip
        handler.handle(failure)
        raise
    finally:
        root.removeHandler(handler)
        ours.setLevel(level)
        handler.close()
