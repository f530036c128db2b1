"""A running export (not ``--once``) on a test's SparkSession, while a scenario changes the world.

``export_while`` runs the export in the calling thread (Spark starts a streaming query from the
thread that owns the session) and the scenario in another; the scenario ends the export by
returning. ``wait_until`` polls with a deadline; ``committed`` reads the manifests; and
``archived_offsets`` counts what the reader finds.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

from blockgz.errors import ExportFailed
from blockgz.reader import open_archive
from blockgz.sink.export.job import run_export
from blockgz.sink.jobconfig.config import ExportSettings
from testkit.s3 import s3_options


def export_while(spark, job: ExportSettings, checkpoint, steps) -> BaseException | None:
    """Run the export here (Spark starts queries from the thread that owns the session) while
    ``steps(stop_event, alive)`` runs in a thread; ``steps`` sets the event when it is done.
    Returns the export's error, if it failed; a failing step fails the test."""
    stop = threading.Event()
    running = threading.Event()
    failed: list[BaseException] = []

    def scenario() -> None:
        try:
            steps(stop, running.is_set)
        except BaseException as exc:  # reported in the test's thread
            failed.append(exc)
        finally:
            stop.set()

    running.set()
    thread = threading.Thread(target=scenario, name="scenario", daemon=True)
    thread.start()
    error = None
    try:
        run_export(
            job, checkpoint=checkpoint, spark=spark, stop_event=stop, install_signal_handlers=False
        )
    except ExportFailed as exc:
        error = exc
    finally:
        running.clear()
        thread.join(120)
    if failed:
        raise failed[0]
    return error


def committed(job: ExportSettings, topic: str) -> dict[int, int]:
    return job.sink.manifest_log().committed_offsets().get(topic, {})


def wait_until(condition, alive, what: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert alive(), f"the export ended before {what}"
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        time.sleep(0.2)  # polling S3 with a deadline


def archived_offsets(s3_server, bucket: str, topic: str) -> Counter:
    with open_archive(f"s3://{bucket}", s3_options(s3_server.endpoint_url)) as archive:
        return Counter((p, r.offset) for p, r in archive.records(topic))
