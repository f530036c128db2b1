"""A checkpoint directory that cannot take Spark's logs: full, nearly full, or read-only.

Each is a real file system (a tmpfs mounted for the test; skipped where mounting is not
allowed). ``blockgz export`` must stop before it touches S3 or Kafka, with one line that names
the checkpoint and the cause, and leave the bucket empty.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from blockgz.local_servers import fake_aws_env
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
