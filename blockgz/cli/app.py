"""The ``blockgz`` command group and what its commands share: one-line errors, progress bars,
store options.

Errors print as one line (``error: ...``) with exit status 1; ``--debug`` shows the
traceback. Heavy modules are imported inside commands so ``blockgz seek`` starts fast.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

from blockgz.errors import BlockGzError

PROGRESS_MIN_BYTES = 64 * 1024 * 1024  # below this a file takes well under a second


class State:
    debug = False


def fail_cleanly(func: Callable | None = None, *, status: int = 1, label: str = "error"):
    """Turn project and OS errors into one line on stderr unless --debug: ``error: ...`` and
    exit 1, or ``label: ...`` and exit ``status`` (``@fail_cleanly(status=2)``)."""
    if func is None:
        return functools.partial(fail_cleanly, status=status, label=label)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (BlockGzError, OSError) as exc:
            if State.debug or isinstance(exc, BrokenPipeError):
                if isinstance(exc, BrokenPipeError):
                    sys.exit(0)  # `blockgz cat x | head` is not an error
                raise
            click.echo(f"{label}: {exc}", err=True)
            sys.exit(status)

    return wrapper


@contextmanager
def progress_bar(description: str, total: int) -> Iterator[Callable[[int], None]]:
    """A rich progress bar on stderr for big inputs on a terminal; a no-op otherwise
    (without importing rich: ~45 ms of a command's start)."""
    if total < PROGRESS_MIN_BYTES or not _stderr_may_be_terminal():
        yield lambda n: None
        return
    from rich.console import Console

    console = Console(stderr=True)
    if not console.is_terminal:
        yield lambda n: None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(description, total=total)
        yield lambda n: bar.advance(task, n)


def _stderr_may_be_terminal() -> bool:
    """False when rich would certainly not draw on stderr: not a TTY and no
    ``FORCE_TERMINAL``/``TTY_COMPATIBLE`` (rich's own overrides) in the environment."""
    if os.environ.get("FORCE_TERMINAL") or os.environ.get("TTY_COMPATIBLE"):
        return True
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def size_option(ctx, param, value):
    from blockgz.options import parse_size

    try:
        return parse_size(value, name=param.name.replace("_", "-"))
    except BlockGzError as exc:
        raise click.BadParameter(str(exc)) from exc


#: Libraries whose DEBUG log is their wire traffic: py4j logs every option Spark is given (the
#: SASL password, the S3 secret key), botocore every request's headers (an SSE-C key). ``--debug``
#: shows blockgz's own debug log and tracebacks, not these.
WIRE_LOGGERS = ("py4j", "botocore", "boto3", "s3transfer", "urllib3")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks and debug logs.")
@click.version_option(package_name="blockgz")
def main(debug: bool) -> None:
    """Archive Kafka topics as seekable block-GZIP and read them back by offset.

    \b
    Examples:
      blockgz compress events.json            # events.json.gz + .events.json.index.json
      blockgz seek --offset 1200 --count 5 events.json.gz
      blockgz verify events.json.gz
      blockgz export s3-sink.properties --once   # Kafka -> S3, Confluent's layout
      blockgz quickstart                         # the whole thing on local servers
    """
    State.debug = debug
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    for name in WIRE_LOGGERS:  # their DEBUG lines carry secrets: never below INFO
        logging.getLogger(name).setLevel(max(logging.INFO, logging.getLogger().level))


def setting_option(help: str) -> Callable[[Callable], Callable]:
    """``-O KEY=VALUE`` (repeatable, collected as ``options``), with the command's own help."""
    return click.option(
        "-O", "--option", "options", multiple=True, metavar="KEY=VALUE", help=help
    )  # fmt: skip


#: ``--output table|json`` of the commands that report (``status``, ``audit``).
report_output = click.option(
    "--output",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Lines for people, or JSON for scripts.",
)


def store_options(func: Callable) -> Callable:
    """Options that reach the object store: an endpoint, and any Confluent-named setting."""
    func = setting_option(
        "An S3 setting by its Confluent name, e.g. -O s3.region=eu-west-1 (repeatable)."
    )(func)
    func = click.option(
        "--endpoint-url",
        envvar="BLOCKGZ_ENDPOINT_URL",
        help="S3 endpoint (store.url) for MinIO, Ceph, R2...; AWS_ENDPOINT_URL also works.",
    )(func)
    return func


def target_options(func: Callable) -> Callable:
    func = click.option("--partition", type=click.IntRange(min=0), help="Kafka partition.")(func)
    func = click.option("--topic", help="Topic, when TARGET is an archive prefix.")(func)
    return store_options(func)


def collect_options(endpoint_url: str | None, options: tuple[str, ...]) -> dict[str, str]:
    collected = {}
    for item in options:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--option")
        collected[key.strip()] = value.strip()
    if endpoint_url:
        collected["store.url"] = endpoint_url
    return collected
