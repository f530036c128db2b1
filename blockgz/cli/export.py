"""``blockgz export`` and ``blockgz quickstart``: the Spark job, and Confluent's quickstart."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path

import click

from blockgz.cli.app import State, collect_options, fail_cleanly, main, setting_option
from blockgz.errors import ExportFailed


@main.command()
@click.argument("config", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--checkpoint",
    type=click.Path(file_okay=False),
    help="Spark checkpoint directory; keep it to resume exactly once [./checkpoints/NAME].",
)
@click.option("--once", is_flag=True, help="Export what is in Kafka now, then exit.")
@click.option("--master", help="Spark master [local[<cores>,3]].")
@setting_option("Override a config setting, e.g. -O flush.size=1000 (repeatable).")
@click.option(
    "--print-submit",
    is_flag=True,
    help="Print the spark-submit command that runs this export on a cluster, and exit.",
)
@click.option(
    "--verbose",
    is_flag=True,
    help="Show Spark's and the JVM's output here instead of in CHECKPOINT/blockgz-export.log.",
)
@fail_cleanly
def export(config, checkpoint, once, master, options, print_submit, verbose) -> None:
    """Export Kafka topics to S3 in the layout of Confluent's S3 sink, exactly once.

    CONFIG is a .properties file or a Kafka Connect JSON config ({"name":..,"config":{..}})
    with Confluent's S3-sink settings, plus topics (or topics.regex) and
    kafka.bootstrap.servers. Spark's Kafka source options such as startingOffsets
    (earliest, latest or JSON: where partitions the archive has not committed start) and
    maxOffsetsPerTrigger may sit in the same file; spark.* keys configure Spark;
    blockgz.trigger.interval (default "5 seconds") paces a running job. The sink's
    tasks read their Kafka offset ranges themselves (Spark's own metrics then count
    ranges, not records); blockgz.tasks.read.kafka=false hands Spark the records.

    On a cluster (--master spark://HOST:7077, YARN, k8s) the executors get the AWS_*
    variables of this shell (credentials, region, endpoint); the credentials travel inside
    the sink's writer, never in Spark's settings (process arguments, UI, event log);
    blockgz.executor.env.forward=false leaves them to the nodes' profile or role.
    --print-submit prints the same job as a spark-submit command line.

    Before Spark starts, it checks that the bucket takes a write, the brokers answer and
    the topics exist (blockgz.preflight=false skips that). Spark's own output goes to
    blockgz-export.log in the checkpoint directory (blockgz-export.jvm.log beside it with
    blockgz.log.format=json); a failure prints one line.
    Ctrl-C, SIGINT or SIGTERM, to this process or its whole process group (systemd, a
    container runtime), stops cleanly with exit code 0, from the first moment on (while it
    starts, it stops before Spark does): the running micro-batch is replayed on restart.
    Exit code 1: the export failed (one line), or a second Ctrl-C aborted the wait (one line).

    A new (or lost) checkpoint resumes from what the archive's manifests committed, as a
    Connect sink resumes from its consumer offsets (blockgz.resume=checkpoint-only: from
    startingOffsets instead). One export per job at a time: a second one refuses to start,
    naming the holder of the job's lease (blockgz.lease.ttl.ms, blockgz.lease.takeover).

    \b
    Examples:
      blockgz export s3-sink.properties --once
      blockgz export s3-sink.json --checkpoint /var/lib/blockgz/s3-sink
      blockgz export s3-sink.properties --checkpoint /tmp/new   # resumes from the archive
      blockgz export s3-sink.properties --master spark://10.0.0.5:7077 --once
      blockgz export s3-sink.properties --master yarn --print-submit
    """
    with _EarlyStop() as stop:  # first: a stop signal while it starts ends it cleanly too
        try:
            _export(config, checkpoint, once, master, options, print_submit, verbose, stop)
        except KeyboardInterrupt:  # a second signal: stop waiting
            click.echo("aborted: a second stop signal; a batch in flight is replayed", err=True)
            raise SystemExit(1) from None


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _EarlyStop:
    """SIGINT and SIGTERM handlers for the export's first moments (reading the config,
    preflight, the lease, before the job installs its own): a stop is recorded in
    :attr:`event`, which the job checks before it starts Spark and follows afterwards; a
    second one aborts the wait (``KeyboardInterrupt``). The default handlers would die with
    a traceback (SIGINT) or without a word (SIGTERM)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signalled = False
        self.previous: dict[int, object] = {}

    def __enter__(self) -> _EarlyStop:
        if threading.current_thread() is threading.main_thread():
            self.previous = {s: signal.signal(s, self._handler) for s in _STOP_SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]

    def _handler(self, signum: int, frame: object) -> None:
        if self.signalled:
            raise KeyboardInterrupt
        self.signalled = True
        self.event.set()


def _export(config, checkpoint, once, master, options, print_submit, verbose, stop) -> None:
    """The export command's work, with ``stop`` (:class:`_EarlyStop`) in place."""
    from blockgz.sink.export.job import run_export
    from blockgz.sink.export.progress import ProgressView
    from blockgz.sink.jobconfig.config import ExportSettings

    if print_submit:
        from blockgz.cli.submit import shell_line, submit_command

        passed = [*(["--checkpoint", checkpoint] if checkpoint else []), *(["--once"] * once)]
        passed += [arg for option in options for arg in ("-O", option)]
        click.echo(shell_line(submit_command(config, master=master, export_args=passed)))
        return
    job = ExportSettings.from_file(config, collect_options(None, options))
    checkpoint = checkpoint or job.checkpoint_dir or str(Path("checkpoints") / job.name)
    logging.getLogger("blockgz").setLevel(logging.DEBUG if State.debug else logging.INFO)
    log_file = None if (verbose or State.debug) else Path(checkpoint) / "blockgz-export.log"
    click.echo(
        f"exporting {', '.join(job.topics) or 'matching topics'} to "
        f"{job.sink.target_url} (checkpoint {checkpoint}"
        + (f", log {log_file})" if log_file else ")"),
        err=True,
    )
    with ProgressView(title=f"blockgz export {job.name}") as view:
        try:
            result = run_export(
                job,
                checkpoint=checkpoint,
                once=once,
                master=master,
                on_progress=view.update,
                log_file=log_file,
                stop_event=stop.event,
            )
        except ExportFailed as exc:
            if log_file is None:
                raise
            raise ExportFailed(f"{exc} (Spark's account: {log_file})") from exc
    how = "stopped" if result.stopped_by_signal or stop.signalled else "done"
    click.echo(
        f"{how}: {result.records:,} records, {result.batches} batches, {result.files:,} objects",
        err=True,
    )


@main.command()
@click.option("--master", help="Run the exports on this Spark master [local[<cores>,3]].")
@click.option(
    "--cluster",
    is_flag=True,
    help="Start a Spark standalone master and worker on loopback and run the exports there.",
)
@fail_cleanly
def quickstart(master, cluster) -> None:
    """Run Confluent's S3-sink quickstart on local servers, explaining each step.

    Starts a Tansu Kafka broker and a SeaweedFS S3 server on free loopback ports, produces nine
    records, exports them with flush.size=3, lists the three objects, seeks an offset,
    and shuts everything down. Needs the [spark,local] extras and Java 17+.

    \b
    Examples:
      blockgz quickstart
      blockgz quickstart --cluster                  # on a loopback standalone cluster
      blockgz quickstart --master spark://10.0.0.5:7077
    """
    from blockgz.cli.quickstart import run_quickstart

    if master and cluster:
        raise click.UsageError("give --master or --cluster, not both")
    run_quickstart(master=master, cluster=cluster)
