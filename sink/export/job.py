"""``blockgz export``: run the Kafka → S3 streaming query, follow its progress, stop cleanly.

The steps, each a function below: resolve where to start (:func:`starting_offsets`, which
reads the manifests for ``startingOffsets=s3``), build and start the query
(:func:`start_query`: Spark's own Kafka source when its jar is on the classpath, ours
otherwise, into ``writeStream.format("blockgz")``), then follow it (:func:`follow`) until it
drains (``once``), is stopped (a signal, or ``stop_event``) or fails (:class:`ExportFailed`
with the root cause).

Example (starts Spark, so not a doctest)::

    job = ExportConfig.from_file("s3-sink.properties")
    result = run_export(job, checkpoint="/var/lib/blockgz/s3-sink", once=True)
    print(result.batches, result.files)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from blockgz.archive.lease import Lease, lease_key
from blockgz.archive.manifests import new_epoch
from blockgz.archive.offsets import EARLIEST, Offsets
from blockgz.errors import BlockGzError, CheckpointError, ExportFailed, LeaseLostError
from blockgz.sink.export.config import ExportConfig
from blockgz.sink.export.tracking import ExportResult, PartitionProgress, ProgressTracker
from blockgz.sink.write.options import INPUT_PREFIX, INPUT_READER, LEASE_TOKEN, LEASE_TTL

log = logging.getLogger("blockgz.export")

EPOCH_FILE = "blockgz-epoch"
#: The sink's input reader when its tasks read their Kafka ranges themselves.
RANGE_READER = "blockgz.sink.kafka.ranges:read_range_rows"


def run_export(
    job: ExportConfig,
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
    :mod:`blockgz.archive.lease`), kept while it runs and released when it stops cleanly.
    """
    checkpoint = Path(checkpoint)
    check_checkpoint(checkpoint)  # local and cheap: before anything touches S3 or Kafka
    if job.preflight:
        from blockgz.sink.export.preflight import preflight

        preflight(job, once=once)
    from blockgz.sink.export.preflight import check_other_jobs

    check_other_jobs(job)  # read-only, and what keeps two jobs from doubling one archive
    with _log_records_to(log_file):
        lease = take_lease(job, checkpoint)  # before anything is removed or written
        stop = stop_event or threading.Event()
        keeper = lease.keep(lambda lost: _lease_lost(lost, stop))
        try:
            warn_if_not_exactly_once(job)
            if job.preflight:
                abort_left_uploads(job, started_before=time.time())
            epoch = checkpoint_epoch(checkpoint)
            options, where = starting_offsets(
                job, fresh=not (checkpoint / "offsets").exists(), checkpoint=checkpoint
            )
            result = _run_query(
                job, checkpoint, epoch, options, once=once, master=master,
                on_progress=on_progress, stop=stop,
                install_signal_handlers=install_signal_handlers, spark=spark,
                log_file=log_file, lease=lease, where=where,
            )  # fmt: skip
        finally:
            keeper.stop()
            if keeper.lost is None:
                lease.release()  # the query has stopped: a successor may start at once
    if keeper.lost is not None:
        raise keeper.lost  # the query was stopped because another export took the lease
    return result


def _lease_lost(lost: LeaseLostError, stop: threading.Event) -> None:
    """Stop the query; :func:`run_export` then raises ``lost`` (the one line the CLI prints)."""
    log.debug("%s", lost)
    stop.set()


def take_lease(job: ExportConfig, checkpoint: Path) -> Lease:
    """Take the job's lease (:mod:`blockgz.archive.lease`) or raise :class:`LeaseHeldError` naming
    its holder."""
    store, prefix = job.sink.make_store()
    lease = Lease(
        store,
        lease_key(job.sink.layout, prefix, job.name),
        checkpoint=str(checkpoint.resolve()),
        ttl_ms=job.lease_ttl_ms,
    )
    lease.acquire(take_over=job.lease_takeover)
    return lease


def _run_query(
    job: ExportConfig,
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
) -> ExportResult:
    """Start the SparkSession (unless given) and the query, and follow it to its end."""
    from blockgz.sink.session import register_data_sources, spark_session

    if spark is not None:
        # A session the caller made (or one another library recreated) may not know blockgz's
        # data sources: registering is idempotent and cheap.
        register_data_sources(spark)
    else:
        spark = spark_session(
            master or default_master(),
            app_name=f"blockgz-export-{job.name}",
            conf=spark_conf_with_connector(job),
            output_to=log_file,
            forward_env=job.forward_env,
        )
    result = ExportResult()
    restore = _install_handlers(stop, result) if install_signal_handlers else None
    try:
        query = start_query(
            spark, job, options, checkpoint=checkpoint, epoch=epoch, once=once, lease=lease,
            where=where,
        )  # fmt: skip
        tracker = ProgressTracker(job, epoch, result)
        try:
            follow(query, tracker, stop, on_progress)
        except ExportFailed as exc:
            raise checkpoint_failure(checkpoint, exc) from exc
        finally:
            tracker.close()
    finally:
        if restore is not None:
            restore()
    return result


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
            self.stream = None  # type: ignore[assignment]


@contextlib.contextmanager
def _log_records_to(path: str | Path | None) -> Iterator[None]:
    """While the block runs, also write every log record (INFO and up) to ``path``."""
    if path is None:
        yield
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    handler = _LogFile(path)
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        handler.close()


# -- step 1: where to start -----------------------------------------------------------------
#: Below this much free space the checkpoint's file system is called full: Spark writes an
#: offset and a commit file per batch there, and blockgz its log.
MIN_CHECKPOINT_FREE = 16 * 1024 * 1024


def check_checkpoint(checkpoint: Path, *, min_free: int = MIN_CHECKPOINT_FREE) -> None:
    """Raise :class:`CheckpointError` unless ``checkpoint`` can be created and written and its
    file system has ``min_free`` bytes free.

    >>> import tempfile
    >>> check_checkpoint(Path(tempfile.mkdtemp()) / "ckpt")
    >>> check_checkpoint(Path("/proc/blockgz-ckpt"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    blockgz.errors.CheckpointError: checkpoint /proc/blockgz-ckpt: cannot write there (...); ...
    """
    problem = checkpoint_problem(checkpoint, min_free=min_free)
    if problem is not None:
        fix = "give --checkpoint (or blockgz.checkpoint.dir) a writable directory with free space"
        raise CheckpointError(f"checkpoint {checkpoint}: {problem}; {fix}")


def checkpoint_problem(checkpoint: Path, *, min_free: int = MIN_CHECKPOINT_FREE) -> str | None:
    """Why ``checkpoint`` cannot take Spark's logs (it cannot be created or written, or its
    file system has less than ``min_free`` bytes free), or ``None``."""
    import shutil

    probe = checkpoint / f".blockgz-probe-{os.getpid()}"
    try:
        checkpoint.mkdir(parents=True, exist_ok=True)
        with open(probe, "wb") as out:
            out.write(b"\0" * 4096)
            out.flush()
            os.fsync(out.fileno())
        probe.unlink()
        free = shutil.disk_usage(checkpoint).free
    except OSError as exc:
        with contextlib.suppress(OSError):
            probe.unlink()
        return f"cannot write there ({exc.strerror or exc})"
    if free < min_free:
        return (
            f"its file system has only {free // 1024:,} KiB free "
            f"(Spark writes offset and commit logs there every batch)"
        )
    return None


#: How the OS words a write that a file system refused (ENOSPC, EDQUOT, EROFS).
_DISK_REFUSED = ("No space left on device", "Disk quota exceeded", "Read-only file system")


def checkpoint_failure(checkpoint: Path, error: ExportFailed) -> ExportFailed:
    """``error``, or, when a running query died of a refused write and the checkpoint is what
    cannot take writes, an error that names the checkpoint and says how to resume.

    Spark's own words (``java.io.IOException: No space left on device``) name no file: the
    failed offset or commit log write is found by probing the checkpoint. Any other disk
    (``spark.local.dir``, the log) keeps Spark's message.

    >>> import tempfile
    >>> error = ExportFailed("java.io.IOException: No space left on device")
    >>> checkpoint_failure(Path(tempfile.mkdtemp()), error) is error  # it has room
    True
    """
    if not any(words in str(error) for words in _DISK_REFUSED):
        return error
    problem = checkpoint_problem(checkpoint)
    if problem is None:
        return error
    return ExportFailed(
        f"checkpoint {checkpoint}: {problem}: Spark could not write its offset or commit log "
        "there, so the export stopped; what it committed stays committed: free space there "
        "(or make it writable) and run again with the same --checkpoint to resume after the "
        "last committed batch"
    )


def checkpoint_epoch(checkpoint: Path) -> str:
    """The epoch of this checkpoint (created on first use): it keeps manifests of runs apart."""
    checkpoint.mkdir(parents=True, exist_ok=True)
    path = checkpoint / EPOCH_FILE
    if path.exists():
        return path.read_text().strip()
    epoch = new_epoch()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(epoch + "\n")
    tmp.replace(path)
    return epoch


class StartPlan(NamedTuple):
    """The source options for this run, and where it starts, in words for the one log line."""

    options: dict[str, str]
    where: str


def starting_offsets(
    job: ExportConfig, *, fresh: bool, checkpoint: Path | str = "the checkpoint"
) -> StartPlan:
    """The source options resolved for where this run starts, and that place in words.

    An existing checkpoint (``fresh=False``) resumes from itself (Spark ignores
    ``startingOffsets`` then). A fresh one, with ``blockgz.resume=archive`` (the default) and
    manifests of this job in the archive, resumes from what they committed, as a Connect sink
    resumes from its consumer offsets; partitions they do not name start at
    ``startingOffsets``. Otherwise ``startingOffsets`` holds.

    >>> import tempfile
    >>> job = ExportConfig.from_mapping({"name": "j", "topics": "t", "path": tempfile.mkdtemp(),
    ...                                  "kafka.bootstrap.servers": "k:9092"})
    >>> starting_offsets(job, fresh=True, checkpoint="/c").where
    'fresh checkpoint /c and no manifests of job j in the archive: from startingOffsets=earliest'
    """
    options = dict(job.source_options)
    given = options.get("startingOffsets", "earliest")
    if given.lower() == "s3":  # the archive's offsets (below), earliest where it has none
        given = options["startingOffsets"] = "earliest"
    if not fresh:
        return StartPlan(options, f"resuming from the checkpoint {checkpoint}")
    if not job.resume_from_manifests:
        return StartPlan(
            options,
            f"fresh checkpoint {checkpoint}, blockgz.resume=checkpoint-only: "
            f"from startingOffsets={given}",
        )
    committed = job.sink.manifest_log().committed_offsets()
    if not committed:
        return StartPlan(
            options,
            f"fresh checkpoint {checkpoint} and no manifests of job {job.name} in the archive: "
            f"from startingOffsets={given}",
        )
    partitions = kafka_partitions(job)
    if job.source.strategy == "assign":  # Spark wants exactly the assigned ones
        partitions = [tp for tp in partitions if tp in set(job.source.assigned)]
    options["startingOffsets"], where = resume_from_manifests(job, partitions, fallback=given)
    return StartPlan(options, f"fresh checkpoint {checkpoint}: {where}")


def _fallback_offset(given: str, topic: str, partition: int) -> int:
    """``startingOffsets``' offset for one partition: -2 earliest, -1 latest, or its JSON's."""
    text = given.strip().lower()
    if text == "latest":
        return -1
    if text.startswith("{"):
        value = json.loads(given).get(topic, {}).get(str(partition))
        return EARLIEST if value is None else int(value)
    return EARLIEST


def resume_from_manifests(
    job: ExportConfig, partitions: list[tuple[str, int]], *, fallback: str = "earliest"
) -> tuple[str, str]:
    """``startingOffsets`` JSON from the manifests (the committed offset, or ``fallback``'s
    for partitions they do not name: ``startingOffsets``' earliest, latest or JSON), and what
    it says in words.

    Objects that start at or after a committed offset come from a batch that never
    committed; they are removed first so the restarted job can write its own.
    """
    manifests = job.sink.manifest_log()
    start = manifests.resume_point(partitions)
    committed: Offsets = {}
    for (topic, part), offset in start.items():
        if offset >= 0:
            committed.setdefault(topic, {})[part] = offset
        else:
            start[(topic, part)] = _fallback_offset(fallback, topic, part)
    removed = manifests.remove_uncommitted(
        committed, partition_directories=job.sink.partitioner().partition_directories
    )
    by_topic: dict[str, dict[str, int]] = {}
    for (topic, part), offset in sorted(start.items()):
        by_topic.setdefault(topic, {})[str(part)] = offset
    resumed = ", ".join(
        f"{t}-{p}@{n}" for t, ps in sorted(committed.items()) for p, n in sorted(ps.items())
    )
    others = sorted(f"{t}-{p}" for (t, p) in start if committed.get(t, {}).get(p) is None)
    where = (
        f"resuming from the archive's manifests "
        f"({manifests.layout.manifest_prefix(manifests.prefix, job.name)}): {resumed}"
        + (f"; {', '.join(others)} from startingOffsets={fallback}" if others else "")
        + f" ({len(removed)} uncommitted objects removed; blockgz.resume=checkpoint-only "
        "would start at startingOffsets)"
    )
    return json.dumps(by_topic), where


def abort_left_uploads(job: ExportConfig, *, started_before: float) -> list[str]:
    """Abort multipart uploads a killed run of this job left behind: under the directories of
    the topics it exports and under its own job directory (manifests, catalog, dead letters).

    Safe because one export runs per job and topic at a time (as its checkpoint requires):
    when this run starts, no writer of those objects is alive. Uploads begun after
    ``started_before`` are left alone.
    """
    store, prefix = job.sink.make_store()
    layout = job.sink.layout
    topics = list(job.topics) or sorted({t for t, _ in kafka_partitions(job)})
    prefixes = [layout.topic_prefix(prefix, t) for t in topics]
    prefixes.append(layout.job_prefix(prefix, job.name))
    aborted: list[str] = []
    try:
        for where in prefixes:
            aborted += store.abort_uploads(where, started_before=started_before)
    finally:
        store.close()
    if aborted:
        log.warning("aborted %d multipart uploads a stopped run left unfinished", len(aborted))
    return aborted


def kafka_partitions(job: ExportConfig) -> list[tuple[str, int]]:
    """The partitions of the job's topics, from the broker's metadata."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(job.source.client_config())
    meta = admin.list_topics(timeout=15)
    wanted = set(job.topics)
    regex = re.compile(job.source.pattern) if job.source.pattern else None
    return sorted(
        (name, p)
        for name, topic in meta.topics.items()
        if name in wanted or (regex is not None and regex.fullmatch(name))
        for p in topic.partitions
    )


# -- step 2: the query ----------------------------------------------------------------------
def start_query(
    spark,
    job: ExportConfig,
    source_options: Mapping[str, str],
    *,
    checkpoint: Path,
    epoch: str,
    once: bool,
    lease: Lease | None = None,
    where: str = "",
):
    """Build ``readStream → writeStream.format("blockgz")`` and start it; log, in one line,
    which source reads Kafka and from ``where`` (:func:`starting_offsets`)."""
    from blockgz.sink.session import has_spark_kafka

    source = "kafka" if has_spark_kafka(spark) else "blockgz-kafka"
    log.info(
        "reading Kafka with the %s source%s",
        "Spark Kafka" if source == "kafka" else "blockgz",
        f", {where}" if where else "",
    )
    tasks_read_kafka = source == "blockgz-kafka" and job.tasks_read_kafka
    reader = spark.readStream.format(source).options(**source_options)
    sink_options = sink_query_options(job, epoch)
    if lease is not None:  # the driver's commit renews it before each manifest
        sink_options.update({LEASE_TOKEN: lease.token, LEASE_TTL: str(job.lease_ttl_ms)})
    if tasks_read_kafka:
        # Spark plans and replays offset ranges; each sink task reads its range itself.
        reader = reader.option("blockgz.emit", "ranges")
        sink_options.update(range_reading_options(source_options))
    frame = reader.load()
    columns = None if tasks_read_kafka else job.sink.columns_read()
    if columns is not None:
        frame = frame.select(*columns)
    writer = (
        frame.writeStream.format("blockgz")
        .options(**sink_options)
        .option("checkpointLocation", str(checkpoint))
        .queryName(_query_name(job.name))
    )
    if once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=job.trigger_interval)
    return writer.start()


def sink_query_options(job: ExportConfig, epoch: str) -> dict[str, str]:
    """The sink's options as the query passes them: the job's, plus this checkpoint's epoch."""
    return {**job.sink_options, "blockgz.epoch": epoch}


def range_reading_options(source_options: Mapping[str, str]) -> dict[str, str]:
    """The sink options that make its tasks read their offset ranges from Kafka: the input
    reader, and the source options it needs under ``blockgz.source.*``.

    >>> range_reading_options({"kafka.bootstrap.servers": "b:9092", "subscribe": "t",
    ...                        "startingOffsets": "earliest", "maxOffsetsPerTrigger": "9"})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'blockgz.input.reader': 'blockgz.sink.kafka.ranges:read_range_rows',
     'blockgz.source.kafka.bootstrap.servers': 'b:9092', 'blockgz.source.subscribe': 't'}
    """
    planning = {"startingoffsets", "maxoffsetspertrigger", "blockgz.emit"}
    options = {INPUT_READER: RANGE_READER}
    for key, value in source_options.items():
        if key.lower() not in planning:
            options[INPUT_PREFIX + key] = value
    return options


def _query_name(name: str) -> str:
    return "blockgz_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def default_master() -> str | None:
    """``local[<cores>,3]`` (every core, up to 3 attempts per task), or ``None`` under
    ``spark-submit``, whose ``--master`` then holds."""
    import os

    from blockgz.format.pipeline import default_threads

    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # started by spark-submit (or a pyspark shell)
        return None
    return f"local[{default_threads()},3]"


def spark_conf_with_connector(job: ExportConfig) -> dict[str, str]:
    """The job's Spark settings, with Spark's Kafka connector on ``spark.jars`` when
    ``blockgz.spark.kafka.jars`` asks for it (:mod:`blockgz.sink.spark_kafka`)."""
    from blockgz.sink.spark_kafka import OPTION, connector_jars, with_jars

    jars = connector_jars(job.spark_kafka_jars)
    if jars:
        log.info(
            "%s=%s: adding %s to spark.jars",
            OPTION, job.spark_kafka_jars, ", ".join(j.name for j in jars),
        )  # fmt: skip
    return with_jars(job.spark_conf, jars)


# -- step 3: following it -------------------------------------------------------------------
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
        log.info("stopping: the running batch is abandoned and will be replayed on restart")
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

    >>> text = "Job aborted\\n  File x\\nblockgz.errors.BadRecordError: t-0@5: bad\\n"
    >>> root_cause(RuntimeError(text))
    'BadRecordError: t-0@5: bad'
    """
    text = str(exc)
    names = "|".join(re.escape(n) for n in _error_names())
    ours = re.findall(rf"(?:[\w.]+\.)?({names}): ([^\n]+)", text)
    if ours:
        name, message = ours[-1]
        return f"{name}: {message}"
    py = re.findall(r"^(\w+(?:Error|Exception)): ([^\n]+)$", text, re.M)
    if py:
        return f"{py[-1][0]}: {py[-1][1]}"
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def warn_if_not_exactly_once(job: ExportConfig) -> list[str]:
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


__all__ = ["ExportConfig", "ExportFailed", "ExportResult", "PartitionProgress", "run_export"]
