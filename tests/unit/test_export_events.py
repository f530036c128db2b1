"""The export log's JSON lines (blockgz.sink.jobconfig.events)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from blockgz.sink.jobconfig.events import JsonLinesFormatter, event, formatter_for


def _record(msg: str, *args, **extra) -> logging.LogRecord:
    record = logging.LogRecord("blockgz.export", logging.WARNING, "", 0, msg, args, None)
    record.__dict__.update(extra)
    return record


def test_a_line_without_an_event_has_only_the_text_fields():
    line = json.loads(JsonLinesFormatter().format(_record("lag %d", 5)))
    assert set(line) == {"time", "level", "logger", "message"}
    assert line["message"] == "lag 5" and line["level"] == "WARNING"
    assert line["time"].endswith("+00:00")


def test_values_json_cannot_hold_are_written_as_text_not_raised():
    line = JsonLinesFormatter().format(_record("x", **event("start", where=Path("/ckpt"))))
    assert json.loads(line)["event"] == {"kind": "start", "where": "/ckpt"}


def test_an_exception_is_kept_in_the_line():
    try:
        raise ValueError("bad batch")
    except ValueError:
        import sys

        record = _record("failed")
        record.exc_info = sys.exc_info()
    line = json.loads(JsonLinesFormatter().format(record))
    assert "ValueError: bad batch" in line["error"]
    assert "\n" not in JsonLinesFormatter().format(record)  # one record, one line


def test_only_the_declared_formats_exist():
    assert isinstance(formatter_for("text"), logging.Formatter)
    with pytest.raises(KeyError):
        formatter_for("xml")
