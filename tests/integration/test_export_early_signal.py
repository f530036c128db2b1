"""A stop signal in an export's first moments (issue 42): ``blockgz export`` handles SIGINT and
SIGTERM first thing, so a stop while it reads its config, checks the bucket and the brokers,
or takes its lease ends it in one line with exit 0, before Spark starts; nothing is left
behind (the lease is free: a restart archives every record).

Each case runs a real ``blockgz export`` process in its own session, as a service manager
starts one; the restart is a whole export: in ``make test-crash``.
"""

from __future__ import annotations

import re
import signal
import time

import pytest

from testkit.kafka_data import produce_numbered, read_exported
from testkit.s3 import s3_options
from testkit.service_export import ServiceExport, service_config

pytestmark = pytest.mark.crash

PARTITIONS, PER_PARTITION = 2, 10


def first_line(run: ServiceExport, timeout_s: float = 30) -> str:
    """The export's first printed line, polled for until it appears (the process alive)."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = run.output.read_text()
        if "\n" in text:
            return text.splitlines()[0]
        assert run.proc.poll() is None, text[-3000:]
        assert time.monotonic() < deadline, f"nothing printed in {timeout_s} s"
        time.sleep(0.01)  # polling the output file with a deadline


@pytest.mark.parametrize(
    ("signum", "to", "restart"),
    [(signal.SIGTERM, "group", True), (signal.SIGINT, "process", False)],
    ids=["sigterm-group", "sigint-process"],
)
def test_a_stop_signal_while_the_export_starts_ends_it_in_one_line_with_exit_0(
    kafka, s3_server, bucket, tmp_path, request, signum, to, restart
):
    topic = "early_" + re.sub(r"[^A-Za-z0-9_]", "_", request.node.name)[-40:]
    kafka.create_topic(topic, partitions=PARTITIONS)
    produce_numbered(kafka.bootstrap_servers, topic, PARTITIONS, PER_PARTITION)
    config = service_config(tmp_path / "job.properties", kafka, s3_server, bucket, topic)
    output = tmp_path / "output.txt"
    run = ServiceExport(config, tmp_path / "ckpt", output)
    try:
        assert first_line(run).startswith("exporting ")
        run.signal(signum, to=to)
        code = run.proc.wait(60)
    finally:
        run.kill()
    printed = output.read_text()
    assert code == 0, printed[-3000:]
    assert "Traceback" not in printed and "error" not in printed.lower(), printed[-3000:]
    lines = printed.strip().splitlines()
    assert len(lines) == 2 and lines[-1] == "stopped: 0 records, 0 batches, 0 objects", printed
    if restart:  # the lease is free and nothing was lost: a restart archives every record
        again = ServiceExport(config, tmp_path / "ckpt", tmp_path / "again.txt", once=True)
        assert again.wait(180) == 0, (tmp_path / "again.txt").read_text()[-3000:]
        from blockgz.store import open_store

        store, prefix = open_store(f"s3://{bucket}", s3_options(s3_server.endpoint_url))
        read_exported(store, prefix).assert_exactly_once(PARTITIONS, PER_PARTITION)
