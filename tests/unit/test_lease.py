"""The lease's rules (blockgz.commits.writer_lease) on a local directory store, with a fake clock
and a
fake "is that process alive" where a rule depends on them."""

from __future__ import annotations

import json
import os

import pytest

from blockgz.commits.writer_lease import Holder, Lease, takeover_reason
from blockgz.errors import LeaseHeldError, LeaseLostError, PreconditionFailedError
from blockgz.store import LocalStore

KEY = "_blockgz/job/lease.json"


class Clock:
    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def lease(store, clock, **kw) -> Lease:
    kw.setdefault("ttl_ms", 10_000)
    kw.setdefault("host", "host-a")
    return Lease(store, KEY, clock=clock, **kw)


@pytest.fixture
def store(tmp_path):
    return LocalStore(tmp_path)


def test_a_live_holder_keeps_it_and_the_refusal_names_it(store):
    clock = Clock()
    first = lease(store, clock, checkpoint="/ckpt/one")
    first.acquire()
    second = lease(store, clock, checkpoint="/ckpt/two", host="host-b")
    with pytest.raises(LeaseHeldError) as caught:
        second.acquire()
    message = str(caught.value)
    assert "\n" not in message
    for part in ("host-a", f"pid {os.getpid()}", "/ckpt/one", "since", "blockgz.lease.takeover"):
        assert part in message


def test_expiry_lets_another_take_it_and_the_old_one_loses_it_at_its_renewal(store):
    clock = Clock()
    first = lease(store, clock)
    first.acquire()
    clock.now += 9.9
    with pytest.raises(LeaseHeldError):
        lease(store, clock, host="host-b").acquire()
    clock.now += 0.2  # past its expiry: it was paused and did not renew
    taken = lease(store, clock, host="host-b").acquire()
    assert taken.generation == 2 and taken.host == "host-b"
    with pytest.raises(LeaseLostError, match="lost its lease to host host-b"):
        first.renew()


def test_renewal_pushes_expiry_back(store):
    clock = Clock()
    first = lease(store, clock)
    first.acquire()
    clock.now += 8
    first.renew()
    clock.now += 8  # 16 s after taking it, 8 s after the renewal
    with pytest.raises(LeaseHeldError):
        lease(store, clock, host="host-b").acquire()


def test_same_host_dead_pid_is_taken_over_at_once(store):
    clock = Clock()
    dead = Holder("host-a", 999_999, "/ckpt", since=clock.now, token="old", expires=clock.now + 60)
    store.put(KEY, dead.to_json())
    with pytest.raises(LeaseHeldError):
        lease(store, clock, alive=lambda pid, started: True).acquire()
    taken = lease(store, clock, alive=lambda pid, started: False).acquire()
    assert taken.pid == os.getpid()


def test_other_host_dead_pid_is_not_taken_over(store):
    clock = Clock()
    other = Holder("host-z", 1, "/ckpt", since=clock.now, token="old", expires=clock.now + 60)
    assert takeover_reason(other, now=clock.now, host="host-a", alive=lambda p, s: False) is None


def test_takeover_option_takes_it_from_a_live_holder(store):
    clock = Clock()
    first = lease(store, clock)
    first.acquire()
    lease(store, clock, host="host-b").acquire(take_over=True)
    with pytest.raises(LeaseLostError):
        first.renew()


def test_release_lets_the_next_start_at_once_and_only_the_holder_releases(store):
    clock = Clock()
    first = lease(store, clock)
    first.acquire()
    intruder = lease(store, clock, host="host-b")
    intruder.release()  # not its lease: nothing happens
    assert not json.loads(store.get(KEY))["released"]
    first.release()
    assert json.loads(store.get(KEY))["released"]
    assert lease(store, clock, host="host-b").acquire().host == "host-b"


def test_the_sink_commit_renews_with_the_token_alone(store):
    clock = Clock()
    first = lease(store, clock)
    first.acquire()
    Lease.for_token(store, KEY, first.token).renew()  # another process of the holder
    first.renew()  # the driver's renewal still works after the commit's
    with pytest.raises(LeaseLostError):
        Lease.for_token(store, KEY, "not-the-token").renew()


def test_local_conditional_puts(store):
    tag = store.put_if("x.json", b"1", if_none_match=True)
    with pytest.raises(PreconditionFailedError):
        store.put_if("x.json", b"2", if_none_match=True)
    new = store.put_if("x.json", b"3", if_match=tag)
    with pytest.raises(PreconditionFailedError):
        store.put_if("x.json", b"4", if_match=tag)  # stale
    assert store.get_versioned("x.json") == (b"3", new)
    assert [o.key for o in store.list("")] == ["x.json"]  # no lock or temp file listed


def test_the_sink_commits_only_while_it_holds_the_lease_and_a_fenced_abort_deletes_nothing(
    tmp_path,
):
    """The driver's commit renews the lease before the manifest; after another export took
    the lease it raises, writes no manifest, and its abort leaves the objects alone (the new
    holder may have committed the same keys)."""
    pytest.importorskip("pyspark")
    from blockgz.sink.write.commit import TaskCommitMessage
    from blockgz.sink.write.datasource import BlockGzStreamWriter
    from blockgz.written.files import WrittenFile
    from testkit.batches import spark_kafka_rows

    schema = spark_kafka_rows("value", "topic", "partition", "offset")
    store = LocalStore(tmp_path)
    mine = Lease(store, KEY)
    mine.acquire()
    options = {"path": str(tmp_path), "name": "job", "blockgz.lease.token": mine.token}
    writer = BlockGzStreamWriter(options, schema)
    store.put("topics/t/partition=0/t+0+0000000000.json", b"{}\n")
    written = WrittenFile("topics/t/partition=0/t+0+0000000000.json", "t", 0, "", 0, 0, 1, 3, 3)
    message = TaskCommitMessage(files=[written], next_offsets={"t": {0: 1}})
    writer.commit([message], 0)  # ours: renewed, then the manifest
    assert writer.config.manifest_log().committed_offsets() == {"t": {0: 1}}
    Lease(store, KEY, host="elsewhere").acquire(take_over=True)
    with pytest.raises(LeaseLostError, match="lost its lease to host elsewhere"):
        writer.commit([TaskCommitMessage(files=[], next_offsets={"t": {0: 2}})], 1)
    assert writer.config.manifest_log().committed_offsets() == {"t": {0: 1}}
    writer.abort([message], 1)
    assert store.get("topics/t/partition=0/t+0+0000000000.json") == b"{}\n"


def test_a_keeper_leaves_a_lease_a_commit_just_renewed_and_renews_an_older_one(store):
    clock = Clock()
    holder = lease(store, clock)
    holder.acquire()
    commit = Lease.for_token(store, KEY, holder.token, ttl_ms=10_000)
    commit.clock = clock
    clock.now += 4
    commit.renew()  # before a manifest: expires now + 10 s
    tag = store.get_versioned(KEY)[1]
    clock.now += 1  # 9 s left: fresh
    assert holder.renew(unless_fresh=True).expires == clock.now + 9
    assert store.get_versioned(KEY)[1] == tag  # read, not written
    clock.now += 1  # 8 s left: renewed
    assert holder.renew(unless_fresh=True).expires == clock.now + 10
    assert store.get_versioned(KEY)[1] != tag
    lease(store, clock, host="host-b").acquire(take_over=True)
    with pytest.raises(LeaseLostError):  # taken over: lost, fresh or not
        holder.renew(unless_fresh=True)
