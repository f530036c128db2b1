"""The hold clock's Kafka lookups at thousands of partitions, against a fake consumer: asked in
chunks, since librdkafka's cost per request, pause or assignment grows with its size."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from blockgz.sink.kafka import oldest  # noqa: E402


@dataclass
class Message:
    tp: tuple[str, int]
    at: int

    def topic(self) -> str:
        return self.tp[0]

    def partition(self) -> int:
        return self.tp[1]

    def offset(self) -> int:
        return self.at

    def error(self) -> Any:
        return None

    def timestamp(self) -> tuple[int, int]:
        return 1, 1_000 + self.at


@dataclass
class ChunkConsumer:
    """Gives each assigned partition's record at its assigned offset, up to 500 per consume."""

    assigned: list[int] = field(default_factory=list)  # partitions per assign()
    paused: list[int] = field(default_factory=list)  # partitions per pause()
    listed: list[int] = field(default_factory=list)  # partitions per offsets_for_times()
    _queue: list[Message] = field(default_factory=list)

    def assign(self, tps: list[Any]) -> None:
        self.assigned.append(len(tps))
        self._queue = [Message((tp.topic, tp.partition), tp.offset) for tp in tps]

    def resume(self, tps: list[Any]) -> None:
        pass

    def pause(self, tps: list[Any]) -> None:
        self.paused.append(len(tps))

    def unassign(self) -> None:
        self._queue = []

    def close(self) -> None:
        self.closed = True

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        batch, self._queue = self._queue[:num_messages], self._queue[num_messages:]
        return batch

    def offsets_for_times(self, tps: list[Any], timeout: float) -> list[Any]:
        self.listed.append(len(tps))
        return [confluent_kafka.TopicPartition(tp.topic, tp.partition, 7) for tp in tps]


def test_first_record_times_of_thousands_of_partitions_assigns_them_in_chunks():
    consumer = ChunkConsumer()
    wanted = {("t", p): p for p in range(1_200)}
    found = oldest.first_record_times(consumer, wanted, timeout_s=30)
    assert found == {tp: 1_000 + offset for tp, offset in wanted.items()}
    chunk = oldest.OFFSETS_CHUNK
    assert consumer.assigned == [chunk, chunk, 1_200 - 2 * chunk]
    assert max(consumer.paused) <= chunk and sum(consumer.paused) == 1_200


def test_each_chunk_gets_a_consumer_of_its_own_when_asked():
    """A consumer assigned a second chunk waits 0.5-1 s for its first fetch: with
    ``new_consumer`` every chunk is read on a fresh one, closed after it, four at a time."""
    made: list[ChunkConsumer] = []

    def new_consumer() -> ChunkConsumer:
        made.append(ChunkConsumer())
        return made[-1]

    shared = ChunkConsumer()
    wanted = {("t", p): p for p in range(1_234)}
    found = oldest.first_record_times(shared, wanted, 30, new_consumer=new_consumer)
    assert found == {tp: 1_000 + offset for tp, offset in wanted.items()}
    assert shared.assigned == []
    assert [c.assigned for c in made] == [[oldest.OFFSETS_CHUNK]] * 2 + [[234]]
    assert all(getattr(c, "closed", False) for c in made)
    none: list[ChunkConsumer] = []
    assert oldest.first_record_times(shared, wanted, 0.0, new_consumer=none.append) == {}
    assert none == []  # nothing made once the time is up


def test_first_record_times_stops_at_its_deadline_between_chunks():
    consumer = ChunkConsumer()
    assert oldest.first_record_times(consumer, {("t", p): 0 for p in range(900)}, 0.0) == {}
    assert consumer.assigned == []  # nothing asked once the time is up


def test_chunks_asked_at_once_answer_in_the_order_asked():
    consumer = ChunkConsumer()
    asked = [confluent_kafka.TopicPartition("t", p, -1) for p in range(2_345)]
    answers = oldest.offsets_for_times(consumer, asked, 2.0)
    assert [tp.partition for tp in answers] == list(range(2_345))
    assert oldest.offsets_for_times(consumer, [], 2.0) == []


@dataclass
class Answer:
    """What an admin client's ``list_offsets`` future gives: ``ListOffsetsResultInfo``."""

    offset: int
    timestamp: int


@dataclass
class Settled:
    """A future that has its answer (or its error)."""

    value: Any

    def result(self, timeout: float | None = None) -> Any:
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


@dataclass
class AdminTimeIndex:
    """An admin client answering ListOffsets by time from ``records`` (partition ->
    [timestamps by offset]) with the found record's time, as Kafka does."""

    records: dict[int, list[int]]
    asked: list[int] = field(default_factory=list)  # partitions per request
    levels: list[Any] = field(default_factory=list)
    failing: set[int] = field(default_factory=set)  # partitions answered with an error

    def list_offsets(self, specs: dict[Any, Any], *, isolation_level: Any, request_timeout: float):
        self.asked.append(len(specs))
        self.levels.append(isolation_level)
        out: dict[Any, Settled] = {}
        for tp, spec in specs.items():
            if tp.partition in self.failing:
                error = confluent_kafka.KafkaError(
                    confluent_kafka.KafkaError.NOT_LEADER_FOR_PARTITION
                )
                out[tp] = Settled(confluent_kafka.KafkaException(error))
                continue
            times = self.records[tp.partition]
            at = next((o for o, ms in enumerate(times) if ms >= spec.timestamp), -1)
            out[tp] = Settled(Answer(at, times[at] if at >= 0 else -1))
        return out


class NeverAsked:
    """The admin client of a clock whose test plans first records only (no time cut is asked;
    one asked anyway would be logged by ``time_cuts`` and found by no cut)."""

    def list_offsets(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("no time cut was asked for")


def test_a_partition_with_no_cut_is_asked_again_only_when_its_end_moves():
    """A held partition whose time has not come has no cut below its end; until records
    arrive after that end, asking again could only give the same answer."""
    index = AdminTimeIndex({0: [100, 110], 1: [100, 200]})
    clock = oldest.HoldClock(ChunkConsumer(), admin=index)
    starts, due = {("t", 0): 0, ("t", 1): 0}, {("t", 0): 150, ("t", 1): 150}
    ends = {("t", 0): 2, ("t", 1): 2}
    assert clock.time_cuts(starts, due, ends) == {("t", 1): 1}
    assert index.asked == [2]
    assert clock.time_cuts(starts, due, ends) == {("t", 1): 1}
    assert index.asked == [2]  # partition 0: no record since; partition 1: its cut is known
    index.records[0].append(160)  # a record after the end: partition 0 is asked again
    assert clock.time_cuts(starts, due, {("t", 0): 3, ("t", 1): 2}) == {("t", 0): 2, ("t", 1): 1}
    assert index.asked == [2, 1]
    assert clock.time_cuts(starts, {**due, ("t", 0): 170}, {("t", 0): 3, ("t", 1): 2}) == {
        ("t", 0): 2,
        ("t", 1): 1,
    }  # a found cut holds while its file's start holds
    clock.forget({})
    clock.time_cuts(starts, due)  # no ends given: asked as before
    assert index.asked == [2, 1, 2]


def test_cuts_come_with_their_records_times_in_chunks():
    index = AdminTimeIndex({p: [100, 200, 300] for p in range(1_001)})
    found = oldest.cuts_at_times(index, {("t", p): 150 + p % 2 * 100 for p in range(1_001)}, 2.0)
    assert sorted(index.asked) == [1, oldest.OFFSETS_CHUNK, oldest.OFFSETS_CHUNK]
    assert found[("t", 0)] == (1, 200) and found[("t", 1)] == (2, 300)
    assert oldest.cuts_at_times(index, {("t", 0): 999}, 2.0) == {}  # no such record yet
    committed = confluent_kafka.IsolationLevel.READ_COMMITTED
    assert index.levels[-1] != committed
    oldest.cuts_at_times(index, {("t", 0): 150}, 2.0, committed=True)
    assert index.levels[-1] == committed


def test_a_partition_answered_with_an_error_is_left_out_unless_all_were():
    """As the consumer's offsets_for_times leaves it out; every partition failing is the
    request failing (no broker), which the clock logs and asks again at the next batch."""
    index = AdminTimeIndex({0: [100, 200], 1: [100, 200]}, failing={1})
    assert oldest.cuts_at_times(index, {("t", 0): 150, ("t", 1): 150}, 2.0) == {("t", 0): (1, 200)}
    with pytest.raises(confluent_kafka.KafkaException):
        oldest.cuts_at_times(index, {("t", 1): 150}, 2.0)
    clock = oldest.HoldClock(ChunkConsumer(), admin=index)
    assert clock.time_cuts({("t", 1): 0}, {("t", 1): 150}, {("t", 1): 2}) == {}
    index.failing.clear()  # not settled as "no cut": asked again while the end holds
    assert clock.time_cuts({("t", 1): 0}, {("t", 1): 150}, {("t", 1): 2}) == {("t", 1): 1}


def test_a_file_that_starts_at_a_time_cut_needs_no_read_of_its_first_record():
    """The batch ends at the cut; the file after it starts with the cut's record, whose time
    came with the cut. Without an admin client that record was read (a consumer's fetch)."""
    consumer = ChunkConsumer()  # reads record o's time as 1,000 + o
    index = AdminTimeIndex({0: [1_000, 1_100, 1_300], 1: [1_000, 1_050, 1_090]})
    clock = oldest.HoldClock(consumer, admin=index)
    starts = {("t", 0): 0, ("t", 1): 0}
    assert clock.first_times(starts) == {("t", 0): 1_000, ("t", 1): 1_000}
    assert consumer.assigned == [2]
    due = {("t", 0): 1_200, ("t", 1): 1_200}
    assert clock.time_cuts(starts, due, {("t", 0): 3, ("t", 1): 3}) == {("t", 0): 2}
    after = {("t", 0): 2, ("t", 1): 0}  # partition 0's next file starts at its cut
    assert clock.first_times(after) == {("t", 0): 1_300, ("t", 1): 1_000}
    assert consumer.assigned == [2]  # nothing read: the cut's time, and the cache
    assert clock.first_times({("t", 0): 1}) == {("t", 0): 1_001}  # elsewhere: read
    assert consumer.assigned == [2, 1]
    clock.forget({})
    assert clock.first_times({("t", 0): 2}) == {("t", 0): 1_002}  # forgotten: read again
    assert consumer.assigned == [2, 1, 1]


def test_a_read_first_record_time_is_not_replaced_by_the_cuts():
    """What a consumer read at an offset is what the sink writes first there (a transaction
    marker at the cut is skipped), so it stands over the cut's time."""
    consumer = ChunkConsumer()
    index = AdminTimeIndex({0: [1_000, 1_500]})
    clock = oldest.HoldClock(consumer, admin=index)
    assert clock.first_times({("t", 0): 1}) == {("t", 0): 1_001}
    assert clock.time_cuts({("t", 0): 0}, {("t", 0): 1_200}, {("t", 0): 2}) == {("t", 0): 1}
    assert clock.first_times({("t", 0): 1}) == {("t", 0): 1_001}


@dataclass
class GatedConsumer(ChunkConsumer):
    """A :class:`ChunkConsumer` whose reads wait until ``gate`` is set: a slow broker."""

    gate: Any = None

    def consume(self, num_messages: int, timeout: float) -> list[Message]:
        self.gate.wait(timeout=30)
        return super().consume(num_messages, timeout)


def test_a_large_read_of_first_records_goes_on_while_the_batch_plans_without_it():
    """A running export's batch waits at most ``wait_s`` for thousands of first records; the
    read goes on, and a later batch plans with its answers without asking again."""
    import threading

    gate = threading.Event()
    made: list[GatedConsumer] = []

    def new_consumer() -> GatedConsumer:
        made.append(GatedConsumer(gate=gate))
        return made[-1]

    clock = oldest.HoldClock(
        ChunkConsumer(), timeout_s=30, admin=NeverAsked(), new_consumer=new_consumer
    )
    wanted = {("t", p): p for p in range(oldest.BACKGROUND_FROM + 1)}
    try:
        assert clock.first_times(wanted, wait_s=0.0) == {}  # nothing waited for
        assert clock.reading() == len(wanted)
        assert clock.first_times(wanted, wait_s=0.0) == {}  # still going: not asked twice
        gate.set()
        found = clock.first_times(wanted, wait_s=30.0)
        assert found == {tp: 1_000 + offset for tp, offset in wanted.items()}
        assert clock.reading() == 0
        assert [c.assigned for c in made] == [[oldest.OFFSETS_CHUNK], [1]]  # one read, once
    finally:
        gate.set()
        clock.close()


def test_a_small_read_or_one_without_a_wait_is_answered_in_the_call():
    """At most :data:`BACKGROUND_FROM` partitions is one consumer's fetch, and ``--once`` runs
    pass no wait: both plan with every answer, as before."""
    made: list[ChunkConsumer] = []

    def new_consumer() -> ChunkConsumer:
        made.append(ChunkConsumer())
        return made[-1]

    clock = oldest.HoldClock(
        ChunkConsumer(), timeout_s=30, admin=NeverAsked(), new_consumer=new_consumer
    )
    small = {("t", p): p for p in range(oldest.BACKGROUND_FROM)}
    assert len(clock.first_times(small, wait_s=0.0)) == len(small)
    large = {("u", p): p for p in range(oldest.BACKGROUND_FROM * 2)}
    assert len(clock.first_times(large)) == len(large)
    assert clock.reading() == 0


def test_a_failed_background_read_leaves_its_partitions_to_be_asked_again():
    def broken() -> Any:
        raise confluent_kafka.KafkaException("broker down")

    clock = oldest.HoldClock(ChunkConsumer(), timeout_s=30, admin=NeverAsked(), new_consumer=broken)
    wanted = {("t", p): 0 for p in range(oldest.BACKGROUND_FROM + 1)}
    try:
        assert clock.first_times(wanted, wait_s=30.0) == {}  # the read failed: none known
        clock.new_consumer = lambda: ChunkConsumer()
        assert len(clock.first_times(wanted, wait_s=30.0)) == len(wanted)  # asked again
    finally:
        clock.close()


def test_a_read_asked_for_later_starts_at_the_next_call():
    """A query's first batch is followed by Spark planning the query: its large read waits
    for the next batch to start, and the batch after that plans with it."""
    made: list[ChunkConsumer] = []

    def new_consumer() -> ChunkConsumer:
        made.append(ChunkConsumer())
        return made[-1]

    clock = oldest.HoldClock(
        ChunkConsumer(), timeout_s=30, admin=NeverAsked(), new_consumer=new_consumer
    )
    wanted = {("t", p): p for p in range(oldest.BACKGROUND_FROM + 1)}
    try:
        assert clock.first_times(wanted, wait_s=0.0, later=True) == {}
        assert made == [] and clock.reading() == len(wanted)  # not started
        assert len(clock.first_times(wanted, wait_s=30.0)) == len(wanted)  # started, waited
        assert [c.assigned for c in made] == [[oldest.OFFSETS_CHUNK], [1]]  # once
    finally:
        clock.close()
