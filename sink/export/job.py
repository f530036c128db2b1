"""``blockgz export``: run the Kafka → S3 streaming query, follow its progress, stop cleanly.

The steps: check the checkpoint (:mod:`blockgz.sink.export.checkpoint`) and take the job's
lease (:mod:`blockgz.sink.export.lease`), resolve where to start
(:func:`~blockgz.sink.export.start.starting_offsets`, which reads the manifests for
``startingOffsets=s3``), build and start the query (:func:`start_query`: Spark's own Kafka
source when its jar is on the classpath, ours otherwise, into ``writeStream.format("blockgz")``),
then follow it (:func:`follow`) until it drains (``once``), is stopped (a signal, or
``stop_event``) or fails (:class:`ExportFailed` with the root cause).

Example (starts Spark, so not a doctest)::

    job = ExportSettings.from_file("s3-sink.properties")
    result = run_export(job, checkpoint="/var/lib/blockgz/s3-sink", once=True)
    print(result.batches, result.files)
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from blockgz.commits.writer_lease import Lease
from blockgz.errors import BlockGzError, ExportFailed
from blockgz.sink.export.checkpoint import check_checkpoint, checkpoint_epoch, checkpoint_failure
from blockgz.sink.export.kafka_clients import DriverClients
from blockgz.sink.export.lease import stop_on_lost_lease, take_lease
from blockgz.sink.export.metrics import ExportMetrics, serve_metrics
from blockgz.sink.export.query import start_query
from blockgz.sink.export.start import abort_left_uploads, starting_offsets
from blockgz.sink.export.topic_checks import check_topics
from blockgz.sink.export.tracking import ExportResult, PartitionProgress, ProgressTracker
from blockgz.sink.iceberg.table import catch_up
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.sink.jobconfig.events import jvm_output, log_records_to

log = logging.getLogger("blockgz.export")


def run_export(
    job: ExportSettings,
    *,
    checkpoint: str | Path,
    once: bool = False,
    master: str | None = None,
    on_progress: Callable[[ExportResult], None] | None = None,
    stop_event: threading.Event | None = None,
    install_signal_handlers: bool = True,
    spark=None,
    log_file: str | Path | None = None,
) -> ExportResult:
    """Run the export until drained (``once``), stopped (signal or ``stop_event``) or failed.

    With ``log_file``, a SparkSession started here writes the JVM's and its workers' output
    there, and blockgz's own log records go there too; the caller's terminal keeps only what
    it shows itself (progress, the one-line error).

    Before anything is written the job takes its lease (one writer per archive, see
    :mod:`blockgz.commits.writer_lease`), kept while it runs and released when it stops cleanly.
    """
    checkpoint = Path(checkpoint)
    # One admin client and one consumer serve every question the driver asks Kafka.
    check_checkpoint(checkpoint)  # local and cheap: before anything touches S3 or Kafka
    if stop_event is not None and stop_event.is_set():  # stopped while starting: see below
        return ExportResult()
    with (
        log_records_to(log_file, job.log_format),
        serve_metrics(job.name, job.metrics_host, job.metrics_port) as metrics,
        contextlib.closing(DriverClients(job.source.client_config())) as clients,
    ):
        if job.preflight:
            from blockgz.sink.export.preflight import preflight

            preflight(job, once=once, clients=clients)
        from blockgz.sink.export.preflight import check_other_jobs

        check_other_jobs(job)  # read-only, and what keeps two jobs from doubling one archive
        # Every topic readable, and still the life the archive holds (preflight or not).
        topic_ids = check_topics(job, clients, once=once)
        lease = take_lease(job, checkpoint)  # before anything is removed or written
        stop = stop_event or threading.Event()
        keeper = lease.keep(lambda lost: stop_on_lost_lease(lost, stop))
        try:
            warn_if_not_exactly_once(job)
            if job.preflight:
                abort_left_uploads(job, started_before=time.time(), clients=clients)
            epoch = checkpoint_epoch(checkpoint)
            options, where = starting_offsets(
                job,
                fresh=not (checkpoint / "offsets").exists(),
                checkpoint=checkpoint,
                clients=clients,
            )
            catch_up(job.sink_options, job.sink)  # batches a crash left out of the Iceberg table
            result = _run_query(
                job, checkpoint, epoch, options, once=once, master=master,
                on_progress=on_progress, stop=stop,
                install_signal_handlers=install_signal_handlers, spark=spark,
                log_file=log_file, lease=lease, where=where, metrics=metrics, clients=clients,
                topic_ids=topic_ids,
            )  # fmt: skip
        finally:
            keeper.stop()
            if keeper.lost is None:
                lease.release()  # the query has stopped: a successor may start at once
    if keeper.lost is not None:
        raise keeper.lost  # the query was stopped because another export took the lease
    return result


def _run_query(
    job: ExportSettings,
    checkpoint: Path,
    epoch: str,
    options: dict[str, str],
    *,
    once: bool,
    master: str | None,
    on_progress: Callable[[ExportResult], None] | None,
    stop: threading.Event,
    install_signal_handlers: bool,
    spark,
    log_file: str | Path | None,
    lease: Lease,
    where: str = "",
    metrics: ExportMetrics | None = None,
    clients: DriverClients | None = None,
    topic_ids: Mapping[str, str] | None = None,
) -> ExportResult:
    """Start the SparkSession (unless given) and the query, and follow it to its end."""
    from blockgz.sink.session import make_active, register_data_sources, spark_session

    result = ExportResult(metrics_url=metrics.url if metrics is not None else None)
    if stop.is_set():  # a signal while it started (``blockgz export`` handles them first)
        return result  # nothing started, nothing to stop: no JVM
    # Before the JVM starts: a stop asked for while it starts stops the query at once.
    restore = _install_handlers(stop, result) if install_signal_handlers else None
    again = None
    quiet = _Py4jAfterStop(result)
    for name in _PY4J_LOGGERS:
        logging.getLogger(name).addFilter(quiet)
    try:
        if spark is not None:
            # A session the caller made (or one another library recreated) may not know
            # blockgz's data sources: registering is idempotent and cheap.
            register_data_sources(spark)
            make_active(spark)  # this thread may not be the one that built it
        else:
            spark = spark_session(
                master or default_master(),
                app_name=f"blockgz-export-{job.name}",
                conf=spark_conf_with_connector(job),
                output_to=jvm_output(log_file, job.log_format),
                forward_env=job.forward_env,
                forward_secrets=False,  # the sink hands them over (start_query)
            )
        if install_signal_handlers:  # again: PySpark's SparkContext sets its own for SIGINT
            again = _install_handlers(stop, result)
        try:
            _query_until_stopped(
                spark, job, options, checkpoint=checkpoint, epoch=epoch, once=once, lease=lease,
                where=where, topic_ids=topic_ids, result=result, metrics=metrics,
                clients=clients, stop=stop, on_progress=on_progress,
            )  # fmt: skip
        except Exception as exc:
            if not result.stopped_by_signal:
                raise
            _stopped_with_the_jvm(exc)
    finally:
        for undo in (again, restore):
            if undo is not None:
                undo()
        for name in _PY4J_LOGGERS:
            logging.getLogger(name).removeFilter(quiet)
    return result


#: Where py4j logs (``logging.exception`` on the root logger, too) when the JVM hangs up.
_PY4J_LOGGERS = ("", "py4j", "py4j.java_gateway", "py4j.clientserver")


class _Py4jAfterStop(logging.Filter):
    """After a stop signal, py4j's records (a JVM that got the signal too hangs up on the
    driver: tracebacks of ``Connection reset``) are dropped; before it, all pass."""

    def __init__(self, result: ExportResult):
        super().__init__()
        self.result = result

    def filter(self, record: logging.LogRecord) -> bool:
        from_py4j = f"{os.sep}py4j{os.sep}" in (record.pathname or "")
        return not (self.result.stopped_by_signal and from_py4j)


def _query_until_stopped(
    spark,
    job: ExportSettings,
    options: dict[str, str],
    *,
    result: ExportResult,
    metrics: ExportMetrics | None,
    clients: DriverClients | None,
    stop: threading.Event,
    on_progress: Callable[[ExportResult], None] | None,
    **start: object,
) -> None:
    """Start the query (``start``: :func:`~blockgz.sink.export.query.start_query`'s keywords)
    and follow it to its end, counting into ``result``."""
    checkpoint = Path(start["checkpoint"])  # type: ignore[arg-type]
    first_batch = next_batch(checkpoint)
    query = start_query(spark, job, options, **start)  # type: ignore[arg-type]
    epoch, once = str(start["epoch"]), bool(start["once"])
    tracker = ProgressTracker(job, epoch, result, observer=metrics, clients=clients, once=once)
    # End offsets, lag and snapshots from the start, not from this run's first batch.
    tracker.know_committed()
    try:
        follow(query, tracker, stop, on_progress)
    except ExportFailed as exc:
        raise checkpoint_failure(checkpoint, exc) from exc
    finally:
        if stop.is_set():  # Spark may have gone before reporting a batch it committed
            tracker.count_unreported(first_batch)
        tracker.close()


def next_batch(checkpoint: Path) -> int:
    """The id of the first batch this run can commit: one past the checkpoint's last commit.

    >>> import tempfile
    >>> next_batch(Path(tempfile.mkdtemp()))
    0
    """
    done = [int(p.name) for p in (checkpoint / "commits").glob("*") if p.name.isdigit()]
    return max(done, default=-1) + 1


def _stopped_with_the_jvm(exc: BaseException) -> None:
    """A stop signal also reached Spark's JVM or its Python workers (systemd stops every
    process of the unit; a container runtime the whole tree): the query died under the
    driver instead of stopping. Nothing is lost: a batch commits with its manifest, and one
    in flight is replayed on restart. Logged (the cause in the log at DEBUG), not raised."""
    log.info(
        "stopping: Spark was stopped by the same signal; the running batch is abandoned and "
        "will be replayed on restart"
    )
    log.debug("the query ended with: %s", exc, exc_info=exc)


# -- the query ----------------------------------------------------------------------------------
def default_master() -> str | None:
    """``local[<cores>,3]`` (every core, up to 3 attempts per task), or ``None`` under
    ``spark-submit``, whose ``--master`` then holds."""

    from blockgz.blocks.pipeline import default_threads

    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # started by spark-submit (or a pyspark shell)
        return None
    return f"local[{default_threads()},3]"


def spark_conf_with_connector(job: ExportSettings) -> dict[str, str]:
    """The job's Spark settings, with Spark's Kafka connector on ``spark.jars`` when
    ``blockgz.spark.kafka.jars`` asks for it (:mod:`blockgz.sink.spark_kafka`) and the job may
    read with Spark's source (``blockgz.kafka.source`` is not ``blockgz``)."""
    from blockgz.sink.spark_kafka import DEFAULT, OPTION, connector_jars, with_jars

    if job.kafka_source == "blockgz":
        if job.spark_kafka_jars != DEFAULT:
            log.warning(
                "%s=%s is not used: blockgz.kafka.source=blockgz reads Kafka with blockgz's "
                "source", OPTION, job.spark_kafka_jars,
            )  # fmt: skip
        return dict(job.spark_conf)
    jars = connector_jars(job.spark_kafka_jars)
    if jars:
        log.info(
            "%s=%s: adding %s to spark.jars",
            OPTION, job.spark_kafka_jars, ", ".join(j.name for j in jars),
        )  # fmt: skip
    return with_jars(job.spark_conf, jars)


# -- following it -------------------------------------------------------------------------------
def follow(
    query,
    tracker: ProgressTracker,
    stop: threading.Event,
    on_progress: Callable[[ExportResult], None] | None,
) -> None:
    """Wait for the query, feeding ``tracker`` each new batch's progress, until it ends."""
    from pyspark.errors import StreamingQueryException

    while query.isActive and not stop.is_set():
        try:
            query.awaitTermination(0.5)
        except StreamingQueryException as exc:
            raise ExportFailed(root_cause(exc)) from exc
        tracker.update(query.recentProgress)
        if on_progress is not None:
            on_progress(tracker.result)
    if stop.is_set() and query.isActive:
        # Report what already finished first, so the stop's lines come last where they can.
        tracker.update(query.recentProgress)
        log.info("stopping: a batch still in flight is abandoned and replayed on restart")
        query.stop()
    # The query may end between two looks: count what its last batches committed.
    tracker.update(query.recentProgress)
    if on_progress is not None:
        on_progress(tracker.result)
    error = query.exception()
    if error is not None:
        raise ExportFailed(root_cause(error)) from error


def _error_names() -> list[str]:
    names, todo = set(), [BlockGzError]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return sorted(names, key=len, reverse=True)


def root_cause(exc: BaseException) -> str:
    """The useful line of a Spark failure: the innermost blockgz error, else Python error.

    Spark hands a worker's exception back as text inside a Java one, so the error is found
    by its class name: any subclass of :class:`BlockGzError` first, then any ``…Error``.
    When Spark's own message names none (a failed commit: ``Writing job failed.``), the
    causes PySpark keeps are searched for one (:func:`_chain_text`).

    >>> text = "Job aborted\\n  File x\\nblockgz.errors.BadRecordError: t-0@5: bad\\n"
    >>> root_cause(RuntimeError(text))
    'BadRecordError: t-0@5: bad'
    """
    text = str(exc)
    names = "|".join(re.escape(n) for n in _error_names())
    ours = re.findall(rf"(?:[\w.]+\.)?({names}): ([^\n]+)", text)
    if not ours:  # Spark's words only ("Writing job failed."): the causes PySpark keeps
        ours = re.findall(rf"(?:[\w.]+\.)?({names}): ([^\n]+)", _chain_text(exc))
    if ours:
        name, message = ours[-1]
        return f"{name}: {message}"
    py = re.findall(r"^(\w+(?:Error|Exception)): ([^\n]+)$", text, re.M)
    if py:
        return f"{py[-1][0]}: {py[-1][1]}"
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def _chain_text(exc: BaseException, depth: int = 8) -> str:
    """``exc``'s text and its causes': PySpark's ``CapturedException`` keeps the JVM's cause as
    ``_cause`` and the JVM's stack trace (with every "Caused by" message) as ``_stackTrace``;
    a streaming query failed by its commit says only ``Writing job failed.`` itself."""
    parts: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(parts) < 2 * depth:
        parts += [str(current), getattr(current, "_stackTrace", None) or ""]
        current = getattr(current, "_cause", None) or current.__cause__
    return "\n".join(parts)


def warn_if_not_exactly_once(job: ExportSettings) -> list[str]:
    """Log (and return) the settings that make keys depend on the wall clock."""
    reasons = []
    if not job.sink.partitioner().deterministic:
        reasons.append(
            "timestamp.extractor=Wallclock puts records in directories by processing time"
        )
    if job.sink.rotate_schedule_interval_ms:
        reasons.append("rotate.schedule.interval.ms cuts files by the wall clock")
    for reason in reasons:
        log.warning(
            "%s: a replayed batch may write different keys, so exactly-once does not hold "
            "(as in Confluent's connector); use Record or RecordField for exactly-once",
            reason,
        )
    return reasons


def _install_handlers(stop: threading.Event, result: ExportResult):
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum, frame):
        result.stopped_by_signal = True
        if stop.is_set():
            raise KeyboardInterrupt  # a second Ctrl-C: stop waiting for Spark
        stop.set()

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}

    def restore():
        for s, h in previous.items():
            signal.signal(s, h)

    return restore


__all__ = ["ExportFailed", "ExportResult", "ExportSettings", "PartitionProgress", "run_export"]
