"""The export's log as events: text lines for people, or JSON lines for a log shipper.

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

import json
import logging
from datetime import UTC, datetime
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
