"""The Iceberg table over an archive in S3 (SeaweedFS): each batch's Parquet objects added in one
Iceberg commit with its offsets, read back by pyiceberg from S3, a replay recognised, and a
SIGKILL between the S3 manifest commit and the Iceberg commit completed by the restart.

The Parquet objects are written with pyarrow in the export's layout and columns
(:mod:`testkit.iceberg`) and committed by the sink's own driver code; the objects the
Parquet format writes have the same shape.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from blockgz.local_servers import fake_aws_env
from blockgz.sink.write.commit import TaskCommitMessage, write_manifest
from testkit.faults import fault_options
from testkit.iceberg import parquet_format, write_parquet
from testkit.s3 import s3_options

pytest.importorskip("pyiceberg", reason="pyiceberg is in the [iceberg] extra")

from blockgz.sink.iceberg.table import ArchiveTable
from blockgz.sink.write.config import SinkConfig

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
PARTITIONS = (0, 1, 2)


@pytest.fixture(autouse=True)
def _parquet_format():
    with parquet_format():
        yield


def sink_options(s3_server, bucket, tmp_path, **more) -> dict[str, str]:
    return {
        "path": f"s3://{bucket}/exports",
        "name": "lake",
        "format.class": "parquet",
        "blockgz.epoch": "e1",
        "blockgz.iceberg.table": "orders",
        "blockgz.iceberg.namespace": "kafka",
        "blockgz.iceberg.catalog.uri": f"sqlite:///{tmp_path}/iceberg/catalog.db",
        **s3_options(s3_server.endpoint_url),
        **more,
    }


def write_batch(config: SinkConfig, store, prefix, start: int, count: int):
    """One object per partition, offsets start..start+count-1: (files, end offsets)."""
    files = [write_parquet(store, prefix, "orders", p, start, count) for p in PARTITIONS]
    return files, {"orders": {p: start + count for p in PARTITIONS}}


def scanned(table: ArchiveTable) -> list[tuple[int, int]]:
    arrow = table.load().scan().to_arrow()
    ids, offsets = arrow["id"].to_pylist(), arrow["__kafka_offset"].to_pylist()
    return sorted((i // 1_000_000, o) for i, o in zip(ids, offsets, strict=True))


def test_batches_in_s3_become_iceberg_commits_read_back_from_s3(s3_server, bucket, tmp_path):
    options = sink_options(s3_server, bucket, tmp_path)
    config = SinkConfig.from_options(options)
    store, prefix = config.make_store()
    log = config.manifest_log()
    table = ArchiveTable.from_options(options, config)
    took = []
    for batch in range(3):
        files, ends = write_batch(config, store, prefix, batch * 20, 20)
        key = write_manifest(log, batch, [TaskCommitMessage(files=files, next_offsets=ends)])
        started = time.monotonic()
        assert table.commit(key) == [key]
        took.append(time.monotonic() - started)
    assert table.commit(key) == [], "a replay of the last batch adds nothing"
    batches = table.committed_batches()
    assert [json.loads(b["blockgz.offsets"])["orders"]["2"] for b in batches] == [20, 40, 60]
    iceberg = table.load()
    assert iceberg.metadata_location.startswith(f"s3://{bucket}/exports/_blockgz/iceberg/")
    paths = iceberg.inspect.files()["file_path"].to_pylist()
    assert len(paths) == 9 and all(p.startswith(f"s3://{bucket}/exports/topics/") for p in paths)
    expected = sorted((p, o) for p in PARTITIONS for o in range(60))
    assert scanned(table) == expected
    print(
        f"\nIceberg step per batch on SeaweedFS (3 files): {took[0]:.2f} s creating the table, "
        f"then {took[1]:.2f} s and {took[2]:.2f} s"
    )


@pytest.mark.slow
@pytest.mark.crash
def test_sigkill_between_the_manifest_and_the_iceberg_commit_then_restart(
    s3_server, bucket, tmp_path
):
    """The driver commits batch 0 (manifest, then Iceberg), writes batch 1's manifest and is
    SIGKILLed before batch 1's Iceberg commit. The restart adds batch 1 on start, Spark's
    replay of batch 1 is recognised, batch 2 follows: every file in the table once."""
    options = sink_options(s3_server, bucket, tmp_path)
    config = SinkConfig.from_options(options)
    store, prefix = config.make_store()
    batches = [(b, *write_batch(config, store, prefix, b * 10, 10)) for b in range(3)]
    marker = tmp_path / "paused"
    first = run_driver(tmp_path, {**options, **fault_options(f"pause-in-commit:1:{marker}")},
                       batches[:2])  # fmt: skip
    try:
        wait_for(first, marker)
    finally:
        kill(first)
    log = config.manifest_log()
    assert log.read_batch(1) is not None, "batch 1's manifest (the S3 commit) was written"
    table = ArchiveTable.from_options(options, config)
    assert [b["blockgz.batch"] for b in table.committed_batches()] == ["0"]

    again = run_driver(tmp_path, options, batches[1:])  # Spark replays batch 1, then batch 2
    out, _ = again.communicate(timeout=120)
    assert again.returncode == 0, out
    assert "1 committed batches added on start" in out
    assert [b["blockgz.batch"] for b in table.committed_batches()] == ["0", "1", "2"]
    paths = table.load().inspect.files()["file_path"].to_pylist()
    assert len(paths) == len(set(paths)) == 9, "each file once"
    assert scanned(table) == sorted((p, o) for p in PARTITIONS for o in range(30))


def run_driver(tmp_path: Path, options: dict[str, str], batches) -> subprocess.Popen:
    from testkit.iceberg_driver import plan_doc

    plan = tmp_path / f"plan-{time.monotonic_ns()}.json"
    plan.write_text(plan_doc(options, batches))
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    code = (
        "import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stdout); "
        "from testkit.iceberg_driver import main; main(sys.argv[1])"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, str(plan)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=tmp_path,
        env={**os.environ, **fake_aws_env(), "PYTHONPATH": path},
        start_new_session=True,
    )


def wait_for(proc: subprocess.Popen, marker: Path, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not marker.exists():
        if proc.poll() is not None:
            pytest.fail(f"the driver exited ({proc.returncode}) first:\n{proc.stdout.read()}")
        assert time.monotonic() < deadline, f"no {marker.name} within {timeout_s} s"
        time.sleep(0.1)  # polling a file with a deadline, not synchronising on time


def kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
