"""Start a SparkSession that can run blockgz's Python data sources, quietly.

Three things trip up a Python data source on a fresh machine: workers start ``python3`` from
``PATH`` instead of this interpreter, the modules holding the data sources must be importable
on the workers, and log4j prints pages of warnings. :func:`spark_session` fixes all three and
registers the sources.

Example (starts a JVM, so not run as a doctest)::

    spark = spark_session("local[2,3]")
    df = spark.readStream.format("blockgz-kafka").option("subscribe", "t").load()
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from blockgz.runtime import worker_site

_LOG4J = """\
rootLogger.level = {level}
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{HH:mm:ss}} %p %c{{1}}: %m%n
logger.py.name = org.apache.spark.api.python
logger.py.level = error
logger.native.name = org.apache.hadoop.util.NativeCodeLoader
logger.native.level = error
logger.utils.name = org.apache.spark.util.Utils
logger.utils.level = error
logger.exec.name = org.apache.spark.sql.execution
logger.exec.level = error
logger.stream.name = org.apache.spark.sql.execution.streaming
logger.stream.level = error
logger.tsm.name = org.apache.spark.scheduler.TaskSetManager
logger.tsm.level = error
logger.executor.name = org.apache.spark.executor.Executor
logger.executor.level = fatal
logger.dagsched.name = org.apache.spark.scheduler.DAGScheduler
logger.dagsched.level = error
"""

#: The project root, so workers can import ``sink``, ``reader`` and ``blockgz`` from a checkout.
_PROJECT_ROOT = str(Path(__file__).resolve().parent.parent)
#: Its ``sitecustomize`` moves Spark's zip copies of the installed pyspark and py4j behind them
#: on each worker's path: every new worker compiled pyspark from the zip (issue 44).
_WORKER_SITE = str(Path(worker_site.__file__).resolve().parent)


def _log4j_file(level: str) -> str:
    path = Path(tempfile.gettempdir()) / f"blockgz-log4j2-{level.lower()}.properties"
    text = _LOG4J.format(level=level.lower())
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    return str(path)


def prepare_environment() -> None:
    """Point Spark's Python workers at this interpreter and this checkout, and have them import
    pyspark from the installed package rather than Spark's zip copy (:data:`_WORKER_SITE`);
    idempotent."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    for folder in (_PROJECT_ROOT, _WORKER_SITE):
        if folder not in paths:
            paths.insert(0, folder)
    os.environ["PYTHONPATH"] = os.pathsep.join(paths)


def spark_session(
    master: str | None = "local[2,3]",
    *,
    app_name: str = "blockgz",
    log_level: str = "WARN",
    conf: dict[str, Any] | None = None,
    output_to: str | os.PathLike[str] | None = None,
    forward_env: bool = True,
    forward_secrets: bool = True,
):
    """Get (or create) a SparkSession with blockgz's data sources registered.

    ``local[N,F]`` rather than ``local[N]``: plain local mode never retries a failed task.
    ``master=None`` keeps the master ``spark-submit`` was given.
    ``output_to`` names a file that gets everything the JVM and Spark's Python workers print
    (log4j, stack traces, librdkafka's chatter in the workers), instead of the terminal.
    ``forward_env`` hands the driver's AWS variables to the executors
    (:mod:`blockgz.sink.executor_env`); secrets are redacted from the UI and plans either way.
    The credentials among them go into Spark's config (and so the JVM's argv) only with
    ``forward_secrets`` and a master that is not local (local executors inherit them); the
    export passes ``False`` and hands them to its sink instead.

    The JVM starts in a session of its own (:func:`start_jvm_apart`), so a signal to this
    process's group (systemd's stop, a container's, a terminal's) reaches the driver alone,
    which stops the query cleanly.
    """
    from blockgz.sink.executor_env import executor_conf, is_local

    prepare_environment()
    from pyspark.sql import SparkSession

    log4j = _log4j_file(log_level)
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j}"
    builder = SparkSession.builder if master is None else SparkSession.builder.master(master)
    builder = (
        builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.executor.extraJavaOptions", java_opts)
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.python.worker.faulthandler.enabled", "true")
    )
    conf = {str(k): str(v) for k, v in (conf or {}).items()}
    secrets = forward_secrets and not is_local(master)
    conf.update(executor_conf(os.environ, conf, forward=forward_env, secrets=secrets))
    for key, value in conf.items():
        builder = builder.config(key, str(value))
    with _stderr_to(output_to):  # the JVM inherits it when it starts; the workers from it
        start_jvm_apart(builder._options)
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    quiet_accumulator_server(spark)
    register_data_sources(spark)
    return spark


def start_jvm_apart(settings: dict[str, Any]) -> None:
    """Launch PySpark's JVM (``spark-submit`` with ``settings``, as ``getOrCreate`` would) in a
    session of its own, unless one runs already or ``spark-submit`` started this driver.

    PySpark starts it in this process's group, so a SIGTERM to the group (systemd, a container
    runtime) ran the JVM's shutdown hooks under the driver: the query died with a py4j
    traceback instead of stopping. Apart, the JVM and its Python workers get no group signal;
    the driver stops the query, and the JVM still exits when the driver does (its stdin pipe
    closes).
    """
    from pyspark import SparkConf
    from pyspark.core.context import SparkContext
    from pyspark.java_gateway import launch_gateway

    with SparkContext._lock:  # PySpark's own, held while it launches one
        if SparkContext._gateway is not None or os.environ.get("PYSPARK_GATEWAY_PORT"):
            return
        conf = SparkConf(loadDefaults=False)
        conf.setAll([(str(k), str(v)) for k, v in settings.items()])
        gateway = launch_gateway(conf, popen_kwargs={"start_new_session": True})
        SparkContext._gateway = gateway
        SparkContext._jvm = gateway.jvm


@contextlib.contextmanager
def _stderr_to(path: str | os.PathLike[str] | None) -> Iterator[None]:
    """Point file descriptor 2 at ``path`` (appending) while the block runs."""
    if path is None:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def quiet_accumulator_server(spark) -> None:
    """Stop PySpark's accumulator server from printing a traceback when the JVM hangs up.

    When the JVM goes away first (at exit, or while ``stop()`` runs) the server's reader
    hits end-of-file and :mod:`socketserver` prints the ``EOFError`` with its traceback on
    stderr: noise at the end of a clean stop. Only a closed connection is silenced; any
    other error still prints.
    """
    server = getattr(spark.sparkContext, "_accumulatorServer", None)
    if server is None or getattr(server, "_blockgz_quiet", False):
        return
    report = server.handle_error

    def handle_error(request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], EOFError | ConnectionError):
            report(request, client_address)

    server.handle_error = handle_error
    server._blockgz_quiet = True


def register_data_sources(spark) -> None:
    """Register the sink, ``format("blockgz")``, and the ``blockgz-kafka`` source on ``spark``.

    A session that has ``blockgz`` already keeps it: :mod:`blockgz.spark_session` registers
    the class that also reads archives under that name, and an export run on such a session
    must not take the reading away.
    """
    from blockgz.sink.kafka.source import KafkaDataSource
    from blockgz.sink.write.datasource import BlockGzDataSource

    if not has_data_source(spark, BlockGzDataSource.name()):
        spark.dataSource.register(BlockGzDataSource)
    spark.dataSource.register(KafkaDataSource)


def make_active(spark) -> None:
    """Make ``spark`` the JVM's active session in this thread: Spark looks Python data sources
    up in the active session, which a thread other than the one that built it has not got
    (``run_export`` in a thread would otherwise fail with ``DATA_SOURCE_NOT_FOUND``)."""
    # Not a classic JVM session (Spark Connect): nothing thread-local to set.
    with contextlib.suppress(Exception):
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)


def warm_planner(spark) -> threading.Thread:
    """Plan a one-column query on a thread of its own, so that the JVM loads and compiles
    Spark's analyzer, optimizer and planner while a streaming query's source is starting.

    A query's first batch otherwise pays that once, in its ``queryPlanning`` (0.4-0.5 s; later
    batches 6-30 ms). While the source starts (its Python process, the first offsets from
    Kafka) the driver JVM mostly waits, so the warming costs the first batch nothing: it is
    done before the batch is planned. Nothing runs (no job, no Python worker), and a failure
    (a session stopping under it) is logged at debug level and otherwise ignored.

    Example (needs a JVM, so not run as a doctest)::

        warm_planner(spark)
        query = frame.writeStream.format("blockgz").start()
    """

    def plan() -> None:
        try:
            spark.range(1).select("id")._jdf.queryExecution().executedPlan()
        except Exception:  # only a warming: the query plans without it
            logging.getLogger(__name__).debug("warming Spark's planner failed", exc_info=True)

    thread = threading.Thread(target=plan, name="blockgz-warm-planner", daemon=True)
    thread.start()
    return thread


def has_data_source(spark, name: str) -> bool:
    """Whether a Python data source called ``name`` is registered on ``spark``."""
    try:
        return bool(spark._jsparkSession.sessionState().dataSourceManager().dataSourceExists(name))
    except Exception:  # not a classic JVM session: registering again is what it did before
        return False


def has_spark_kafka(spark) -> bool:
    """True when Spark's own Kafka source (the spark-sql-kafka jar) is on the classpath."""
    jvm = spark.sparkContext._jvm
    try:
        # Spark's loader, which also sees ``spark.jars`` (java.lang.Class.forName from py4j
        # looks in the JVM's own classpath only, so it missed jars added that way).
        jvm.org.apache.spark.util.Utils.classForName(
            "org.apache.spark.sql.kafka010.KafkaSourceProvider", False, False
        )
    except Exception:
        return False
    return True
