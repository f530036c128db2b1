"""A checkpoint directory that cannot take Spark's logs: full, nearly full, or read-only.

Each is a real file system (a tmpfs mounted for the test; skipped where mounting is not
allowed). At start, ``blockgz export`` must stop before it touches S3 or Kafka, with one line
that names the checkpoint and the cause, and leave the bucket empty. When the file system
fills up under a running export, Spark's next offset or commit log write fails with ENOSPC:
the export must stop with one line that names the checkpoint (Spark's own words name no
file), having committed nothing it did not write; once there is room again, a rerun on the
same checkpoint archives every offset exactly once.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from blockgz.local_servers import fake_aws_env
from blockgz.sink.jobconfig.config import ExportSettings
from testkit.running_export import archived_offsets, committed, wait_until
from testkit.s3 import s3_options

pytestmark = pytest.mark.slow

BLOCKGZ = str(Path(sys.executable).with_name("blockgz"))


@contextlib.contextmanager
def tmpfs(where: Path, *options: str) -> Iterator[Path]:
    """A tmpfs mounted at ``where`` for the block (skips the test if mounting is refused)."""
    where.mkdir(parents=True, exist_ok=True)
    mount = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mount.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mount.stderr.strip() or mount.returncode}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def keep_log_pages(log: Path, size: int = 1 << 20) -> None:
    """Reserve pages past the end of the export's log (``fallocate --keep-size``), so that its
    lines do not take the room the test leaves for Spark's logs."""
    subprocess.run(
        ["fallocate", "--keep-size", "--offset", str(log.stat().st_size), "--length", str(size),
         str(log)],
        check=True,
    )  # fmt: skip


def fill(directory: Path) -> None:
    """Write until the file system says it is full."""
    with open(directory / "filler", "wb") as out, contextlib.suppress(OSError):
        while True:
            out.write(b"\0" * 65536)
            out.flush()


@pytest.fixture
def export(kafka, s3_server, bucket, tmp_path):
    topic = "ckpt-" + bucket[-8:]
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, [b'{"n": 1}'])
    config = tmp_path / "job.properties"
    options = {
        "name": "ckpt-faults",
        "topics": topic,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": bucket,
        **s3_options(s3_server.endpoint_url),
    }
    config.write_text("".join(f"{k}={v}\n" for k, v in options.items()))

    def run(checkpoint: Path) -> tuple[int, list[str], list[str]]:
        done = subprocess.run(
            [BLOCKGZ, "export", str(config), "--once", "--checkpoint", str(checkpoint)],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, **fake_aws_env()},
            check=False,
        )
        listed = s3_server.client().list_objects_v2(Bucket=bucket).get("Contents", [])
        return done.returncode, done.stderr.strip().splitlines(), [o["Key"] for o in listed]

    return run


def assert_refused(code: int, lines: list[str], keys: list[str], checkpoint: Path, cause: str):
    assert code == 1, lines
    assert not any("Traceback" in line for line in lines), lines
    (error,) = [line for line in lines if line.startswith("error:")]
    assert f"checkpoint {checkpoint}" in error and cause in error, error
    assert "--checkpoint" in error, "the message says what to do"
    assert keys == [], "nothing may reach S3"


def test_a_full_checkpoint_file_system(export, tmp_path):
    with tmpfs(tmp_path / "full", "size=256k") as where:
        fill(where)
        checkpoint = where / "ckpt"
        assert_refused(*export(checkpoint), checkpoint, "No space left on device")


def test_a_nearly_full_checkpoint_file_system(export, tmp_path):
    with tmpfs(tmp_path / "small", "size=4m") as where:
        checkpoint = where / "ckpt"
        assert_refused(*export(checkpoint), checkpoint, "KiB free")


def test_a_read_only_checkpoint(export, tmp_path):
    with tmpfs(tmp_path / "ro", "size=64m", "ro") as where:
        checkpoint = where / "ckpt"
        assert_refused(*export(checkpoint), checkpoint, "Read-only file system")


# -- the file system fills up while the export runs ---------------------------------------------
PAGE = os.sysconf("SC_PAGE_SIZE")  # what tmpfs allocates a file's bytes in


@pytest.mark.crash
@pytest.mark.parametrize(
    ("room", "failing_log"),
    # No room at all: the offset log of the next batch fails, so that batch never starts.
    # Two pages: the offset log (one page, and one for its .crc) takes them, the batch reaches
    # S3 and the sink commits its manifest, and then Spark's commit log fails.
    [(0, "offsets"), (2 * PAGE, "commits")],
    ids=["offset-log-fails", "commit-log-fails"],
)
def test_the_checkpoint_fills_up_while_the_export_runs(
    room, failing_log, kafka, s3_server, bucket, tmp_path
):
    topic = "full_" + uuid.uuid4().hex[:8]
    kafka.create_topic(topic, partitions=2)
    first = kafka.produce_bulk(topic, 19, 2)  # 20 records a partition
    options = {
        "name": "ckpt-full",
        "topics": topic,
        "kafka.bootstrap.servers": kafka.bootstrap_servers,
        "s3.bucket.name": bucket,
        **s3_options(s3_server.endpoint_url),
        "flush.size": "10",
        "blockgz.trigger.interval": "1 second",
    }
    config = tmp_path / "job.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in options.items()))
    job = ExportSettings.from_mapping(options)
    env = {**os.environ, **fake_aws_env()}

    def export(checkpoint: Path, *flags: str) -> list[str]:
        return [BLOCKGZ, "export", str(config), "--checkpoint", str(checkpoint), *flags]

    with tmpfs(tmp_path / "fs", "size=24m") as where:  # room for the start-up check (16 MiB)
        checkpoint = where / "ckpt"
        stderr_file = tmp_path / "stderr"
        with open(stderr_file, "w") as stderr:
            running = subprocess.Popen(
                export(checkpoint), stdout=subprocess.DEVNULL, stderr=stderr, env=env
            )

        def alive() -> bool:
            return running.poll() is None

        try:
            wait_until(lambda: committed(job, topic) == first, alive, "the first batch", 60)
            # The manifest comes before Spark's commit log: wait for batch 0's, or it takes the
            # room left below and batch 1's offset log fails instead.
            done_0 = [checkpoint / "commits" / "0", checkpoint / "commits" / ".0.crc"]
            wait_until(lambda: all(p.exists() for p in done_0), alive, "Spark's commit 0", 30)
            keep_log_pages(checkpoint / "blockgz-export.log")
            fill(where)
            filler = where / "filler"
            os.truncate(filler, filler.stat().st_size - room)
            late, deadline = 0, time.monotonic() + 30
            while alive():  # Kafka keeps getting records: the next batch must write its logs
                assert time.monotonic() < deadline, "the export ran on with a full checkpoint"
                kafka.produce(topic, [b'{"late": %d}' % late], partition=late % 2)
                late += 1
                time.sleep(0.2)  # a record every 0.2 s while polling the process
        finally:
            if running.poll() is None:
                running.kill()
                running.wait(30)

        # One line names the checkpoint and the cause; no Java or Python stack trace.
        lines = stderr_file.read_text().strip().splitlines()
        assert running.returncode == 1, lines
        expected = re.compile(r"exporting |\d{4}-\d\d-\d\d [\d:,]+ (INFO|WARNING) blockgz|error: ")
        assert all(expected.match(line) for line in lines), lines
        (error,) = [line for line in lines if line.startswith("error:")]
        assert f"checkpoint {checkpoint}: cannot write there (No space left on device)" in error
        assert "run again with the same --checkpoint" in error, "the message says what to do"

        # What the sink committed is exactly what reached S3, no more, no less.
        batch_1_ran = failing_log == "commits"
        assert (checkpoint / "offsets" / "1").exists() == batch_1_ran
        assert not (checkpoint / "commits" / "1").exists()
        at_stop = committed(job, topic)
        assert (at_stop != first) == batch_1_ran, (at_stop, first)
        seen = archived_offsets(s3_server, bucket, topic)
        assert set(seen) == {(p, o) for p, end in at_stop.items() for o in range(end)}
        assert max(seen.values()) == 1

        filler.unlink()  # room again: the same checkpoint resumes (and replays batch 1)
        rerun = subprocess.run(
            export(checkpoint, "--once"), capture_output=True, text=True, timeout=120, env=env
        )
        assert rerun.returncode == 0, rerun.stderr

    everything = kafka.high_watermarks(topic)
    assert sum(everything.values()) == sum(first.values()) + late and late > 0
    assert committed(job, topic) == everything
    seen = archived_offsets(s3_server, bucket, topic)
    assert set(seen) == {(p, o) for p, end in everything.items() for o in range(end)}
    assert max(seen.values()) == 1, "no offset twice"
