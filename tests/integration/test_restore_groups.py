"""Consumer groups on targets ``blockgz restore`` fills with ``blockgz.replay`` markers: a target
that already held records, and ``--by-key``. A consumer of each group on the target then reads
exactly the restored records the group had not consumed on the source: nothing reprocessed,
nothing skipped; a group no single offset per partition can resume is named and left alone."""

from __future__ import annotations

import uuid

from blockgz.commits.cluster_snapshots import TopicState
from tests.integration.test_restore import (
    EXACT,
    archive_of,
    consume_as_group,
    read_all,
    run,
    snapshot,
)


def due(records, topic: str, offsets: dict[int, int]) -> list[bytes]:
    """The values of ``topic``'s records at or past the group's committed offsets."""
    return sorted(
        r.value for r in records if r.topic == topic and r.offset >= offsets.get(r.partition, 0)
    )


def test_groups_on_a_target_that_held_records_resume_exactly(kafka, tmp_path):
    run_id = uuid.uuid4().hex[:6]
    topic, busy = f"held_{run_id}", f"held_{run_id}_busy"
    records = archive_of(tmp_path, topic, 2, 30)
    group = f"g-{run_id}"
    committed = {0: 12, 1: 500}  # partition 1: past the archived range, so at its end
    snapshot(tmp_path, 0, {topic: TopicState(2, {})}, {group: {topic: committed}})
    kafka.create_topic(busy, partitions=2)
    kafka.produce(busy, [b"theirs-0", b"theirs-1"], partition=0)
    args = [str(tmp_path), topic, "--rename", f"{topic}={busy}",
            "--bootstrap-servers", kafka.bootstrap_servers, *EXACT]  # fmt: skip
    done = run(*args)
    assert done.exit_code == 0, done.output
    assert "with blockgz.replay headers" in done.stderr
    # offsets 0, 3, 4, 5, 6, 7, 10, 11, 12: 8 restored records below 12, after 2 of their own
    assert f"group {group}: {busy}[0]=10, {busy}[1]=30" in done.stderr, done.stderr
    consumed = consume_as_group(kafka, group, [busy])
    assert sorted(m.value() for m in consumed) == due(records, topic, committed)
    assert len(consumed) == 30 - 8

    again = run(*args)  # a rerun sends nothing and sets the same offsets
    assert again.exit_code == 0, again.output
    assert "0 records sent, 60 there already" in again.stderr, again.stderr
    assert f"group {group}: {busy}[0]=10, {busy}[1]=30" in again.stderr


def test_by_key_groups_are_placed_where_one_offset_per_partition_is_exact(kafka, tmp_path):
    run_id = uuid.uuid4().hex[:6]
    single, double = f"bk1_{run_id}", f"bk2_{run_id}"
    records = archive_of(tmp_path, single, 1, 40) + archive_of(tmp_path, double, 2, 20)
    caught_up, midway, first_done = (f"{n}-{run_id}" for n in ("caught", "midway", "first"))
    groups = {
        caught_up: {single: {0: 17}},  # one source partition: always a prefix
        midway: {double: {0: 5, 1: 5}},  # partition 0's rest was sent before 1's start
        first_done: {double: {0: 10_000, 1: 7}},  # partition 0 consumed whole: a prefix
    }
    snapshot(tmp_path, 0, {single: TopicState(1, {}), double: TopicState(2, {})}, groups)
    for topic in (single, double):
        kafka.create_topic(f"{topic}_k", partitions=3)
    result = run(
        str(tmp_path), single, double, "--suffix", "_k", "--by-key",
        "--bootstrap-servers", kafka.bootstrap_servers, *EXACT,
    )  # fmt: skip
    assert result.exit_code == 1, result.output  # one group left alone: said, and exit 1
    assert "restored 80 records of 2 topics" in result.stderr
    assert f"group {midway} not set: {double}_k[" in result.stderr, result.stderr
    assert "no single offset resumes it" in result.stderr
    assert f"group {caught_up}: {single}_k[0]=" in result.stderr
    assert f"group {first_done}: {double}_k[0]=" in result.stderr
    spread = read_all(kafka, f"{single}_k")
    assert sum(1 for got in spread.values() if got) > 1  # really spread over partitions
    for group in (caught_up, first_done):
        ((topic, committed),) = groups[group].items()
        consumed = consume_as_group(kafka, group, [f"{topic}_k"])
        assert sorted(m.value() for m in consumed) == due(records, topic, committed), group
        assert 0 < len(consumed) < sum(1 for r in records if r.topic == topic), group
    listed = kafka.admin().list_consumer_groups().result(timeout=15).valid
    assert midway not in {g.group_id for g in listed}
