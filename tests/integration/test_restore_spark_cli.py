"""``blockgz restore --master local[2]`` as a user runs it (a subprocess): a restore a first run
left half done is finished as a Spark job, one task per archived partition, each record sent
exactly once and as it was, and the consumer group set; a rerun then sends nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from blockgz.commits.cluster_snapshots import TopicState
from blockgz.reader.restore.markers import MARKER
from tests.integration.test_restore import (
    EXACT,
    archive_of,
    as_archived,
    as_restored,
    consume_as_group,
    read_all,
    run,
    snapshot,
)


def restore_command(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "blockgz.cli", "restore", *args]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}  # this checkout's code
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=240)


@pytest.mark.slow
def test_restore_on_spark_through_the_command_finishes_a_partial_restore(kafka, tmp_path):
    run_id = uuid.uuid4().hex[:6]
    topic, target = f"sp_{run_id}", f"sp_{run_id}_m"
    records = archive_of(tmp_path, topic, 3, 40)
    group = f"g-{run_id}"
    snapshot(tmp_path, 0, {topic: TopicState(3, {})}, {group: {topic: {0: 0, 1: 12, 2: 500}}})
    common = [str(tmp_path), topic, "--suffix", "_m", "--bootstrap-servers",
              kafka.bootstrap_servers, *EXACT]  # fmt: skip

    first = run(*common, "--partition", f"{topic}:0")  # locally, partition 0 only
    assert first.exit_code == 0, first.output
    assert f"{topic} -> {target} (created): 40 records sent" in first.stderr

    done = restore_command(*common, "--master", "local[2]")
    assert done.returncode == 0, done.stderr
    said = f"{topic} -> {target}: 80 records sent, 40 restored before (the recorded position)"
    assert said in done.stderr, done.stderr
    # offsets 0, 3, 4, ..., 11: 8 below 12; 500 is past partition 2's end: its end (40 records
    # and the transaction's commit marker)
    assert f"group {group}: {target}[0]=0, {target}[1]=8, {target}[2]=41" in done.stderr
    for p, messages in read_all(kafka, target).items():  # record by record, each once
        expected = [r for r in records if r.partition == p]
        assert [as_restored(m) for m in messages] == [as_archived(r) for r in expected]
        assert not any(MARKER in dict(m.headers() or []) for m in messages)
    consumed = consume_as_group(kafka, group, [target])
    assert sorted(m.value() for m in consumed) == sorted(
        r.value for r in records if r.partition == 0 or (r.partition == 1 and r.offset >= 12)
    )

    again = run(*common)  # the Spark run's positions count for any later run
    assert again.exit_code == 0, again.output
    assert f"{topic} -> {target}: 0 records sent, 120 restored before" in again.stderr
    assert sum(map(len, read_all(kafka, target).values())) == 120
