"""The export's log file sits on the checkpoint's disk, which may fill up."""

from __future__ import annotations

import logging
import os

import pytest

from blockgz.sink.jobconfig.events import log_records_to


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_log_disk_drops_records_without_a_traceback(capsys):
    log = logging.getLogger("blockgz.test-full-disk")
    log.setLevel(logging.INFO)
    with log_records_to("/dev/full"):  # every write: ENOSPC
        log.info("t-0: 3 files, next offset 42")
    captured = capsys.readouterr()
    assert "Logging error" not in captured.err
    assert "Traceback" not in captured.err


def test_the_log_file_gets_info_records(tmp_path):
    log = logging.getLogger("blockgz.test-log-file")
    log.setLevel(logging.INFO)
    with log_records_to(tmp_path / "export.log"):
        log.info("t-0: 3 files, next offset 42")
    assert "t-0: 3 files, next offset 42" in (tmp_path / "export.log").read_text()


def test_py4j_hanging_up_after_a_stop_signal_is_not_logged():
    """A JVM that got the stop signal too hangs up on the driver: py4j's tracebacks about it
    are dropped once the signal arrived, never before; other records always pass."""
    from blockgz.sink.export.job import _Py4jAfterStop
    from blockgz.sink.export.tracking import ExportResult

    def record(path: str) -> logging.LogRecord:
        return logging.LogRecord(
            "root", logging.ERROR, path, 1, "Exception while sending", (), None
        )

    py4j = f"{os.sep}venv{os.sep}py4j{os.sep}java_gateway.py"
    result = ExportResult()
    quiet = _Py4jAfterStop(result)
    assert quiet.filter(record(py4j)), "before a signal, py4j's errors are real errors"
    result.stopped_by_signal = True
    assert not quiet.filter(record(py4j))
    assert quiet.filter(record(f"{os.sep}blockgz{os.sep}export.py"))
