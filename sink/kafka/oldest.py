"""The timestamps holding needs, read from Kafka on the driver: the first record at or after an
offset (one fetch per partition), and the first offset at or after a time (ListOffsets requests
of :data:`OFFSETS_CHUNK` partitions, which also answer that record's time).

:func:`first_record_times` is shared with the export's lag-in-seconds figure
(:mod:`blockgz.sink.export.record_times`), :func:`offsets_for_times` with the source's start
offsets and the export's watermarks (:class:`blockgz.sink.export.tracking.Watermarks`).
:class:`HoldClock` caches both answers per partition until the offset they were asked at moves
(a found time cut never changes; a missing one is asked again each batch), so a steady
partition costs nothing between files.

Example (with a broker)::

    clock = HoldClock(consumer, admin=admin, timeout_s=2.0)
    clock.first_times({("orders", 0): 1200})  # {("orders", 0): 1764130000123} (ms)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeAlias

log = logging.getLogger("blockgz.kafka_source")

TopicPartition = tuple[str, int]
#: Partitions per ListOffsets request. librdkafka's work on one request grows with the square
#: of its partitions (measured: 7 ms of CPU for 1,000, 500 ms for 10,000, and seconds of wall
#: time on a loaded broker), so thousands of partitions are asked in chunks of this many.
OFFSETS_CHUNK = 500
#: Chunks asked at once (librdkafka's call is thread-safe and leaves the GIL): 10,000
#: partitions' latest offsets took 0.5-1 s asked one chunk after the other on a loaded
#: machine (load 45), 0.2-0.6 s four at a time.
OFFSETS_PARALLEL = 4
#: A read of more first records than this may go on in the background
#: (:meth:`HoldClock.first_times`); one of at most this many is one consumer's fetch.
BACKGROUND_FROM = OFFSETS_CHUNK
#: What a read of first records answers: the times found and the partitions found gone.
_Read: TypeAlias = "tuple[dict[TopicPartition, int], set[TopicPartition]] | None"


def first_record_times(
    consumer: Any,
    wanted: Mapping[TopicPartition, int],
    timeout_s: float,
    gone: set[TopicPartition] | None = None,
    *,
    new_consumer: Callable[[], Any] | None = None,
) -> dict[TopicPartition, int]:
    """The Kafka timestamp (ms) of the first record at or after each offset in ``wanted``
    (compaction and transaction markers leave gaps), for the partitions read within
    ``timeout_s``; records without a timestamp are left out. Partitions whose offset Kafka no
    longer has (retention) are added to ``gone``.

    Partitions are assigned :data:`OFFSETS_CHUNK` at a time and unassigned after each chunk:
    librdkafka's pause and resume cost grows with the assignment (one pause of 10,000
    assigned partitions took 24 s). With ``new_consumer``, each chunk gets a consumer of its
    own, made by it and closed after, :data:`OFFSETS_PARALLEL` chunks at a time: a consumer
    assigned a second chunk waited 0.5-1 s for its first fetch (measured at 10,000
    partitions: 10 s and 2.6 CPU-s one chunk after the other on one consumer, 0.4-0.5 s and
    0.3 CPU-s this way); otherwise the chunks are read one after the other on ``consumer``.
    """
    found: dict[TopicPartition, int] = {}
    deadline = time.monotonic() + timeout_s
    asked = sorted(wanted.items())
    chunks = [dict(asked[at : at + OFFSETS_CHUNK]) for at in range(0, len(asked), OFFSETS_CHUNK)]
    if new_consumer is None:
        for chunk in chunks:
            if time.monotonic() >= deadline:
                break
            found.update(_first_times_of(consumer, chunk, deadline, gone))
        return found

    def read(chunk: dict[TopicPartition, int]) -> tuple[dict[TopicPartition, int], set]:
        lost: set[TopicPartition] = set()
        if time.monotonic() >= deadline:
            return {}, lost
        own = new_consumer()
        try:
            return _first_times_of(own, chunk, deadline, lost), lost
        finally:
            own.close()

    with ThreadPoolExecutor(max(1, min(OFFSETS_PARALLEL, len(chunks)))) as pool:
        for times, lost in pool.map(read, chunks):
            found.update(times)
            if gone is not None:
                gone.update(lost)
    return found


def _first_times_of(
    consumer: Any,
    wanted: Mapping[TopicPartition, int],
    deadline: float,
    gone: set[TopicPartition] | None,
) -> dict[TopicPartition, int]:
    """:func:`first_record_times` of one chunk, until ``deadline`` (monotonic)."""
    from confluent_kafka import KafkaError
    from confluent_kafka import TopicPartition as KafkaPartition

    found: dict[TopicPartition, int] = {}
    assigned = [KafkaPartition(t, p, off) for (t, p), off in wanted.items()]
    consumer.assign(assigned)
    # librdkafka keeps a partition paused across unassign/assign: an earlier call's pause
    # would leave this one waiting out its deadline with nothing fetched.
    consumer.resume(assigned)
    missing = set(wanted)
    try:
        while missing and time.monotonic() < deadline:
            done: list[TopicPartition] = []
            for message in consumer.consume(num_messages=500, timeout=0.2):
                tp = (message.topic(), message.partition())
                if message.error() is not None:
                    if message.error().code() == KafkaError._AUTO_OFFSET_RESET and tp in missing:
                        missing.discard(tp)  # out of range: deleted before it was read
                        if gone is not None:
                            gone.add(tp)
                    continue
                if tp in missing and message.offset() >= wanted[tp]:
                    kind, ms = message.timestamp()
                    if kind != 0 and ms >= 0:  # 0: TIMESTAMP_NOT_AVAILABLE
                        found[tp] = ms
                    missing.discard(tp)
                    done.append(tp)
            if done:  # one call per round: each pause costs as much as the assignment is long
                consumer.pause([KafkaPartition(*tp) for tp in done])
    finally:
        consumer.unassign()
    return found


def offsets_for_times(consumer: Any, asked: Sequence[Any], timeout_s: float) -> list[Any]:
    """``consumer.offsets_for_times(asked)`` (Kafka's ListOffsets: by time, or -2/-1 for the
    earliest/latest offset), one request per :data:`OFFSETS_CHUNK` partitions, up to
    :data:`OFFSETS_PARALLEL` at a time; each request waits at most ``timeout_s``. The answers
    come in the order asked."""

    def ask(chunk: list[Any]) -> list[Any]:
        return consumer.offsets_for_times(chunk, timeout=timeout_s)

    chunks = [list(asked[at : at + OFFSETS_CHUNK]) for at in range(0, len(asked), OFFSETS_CHUNK)]
    if len(chunks) <= 1:
        return ask(chunks[0]) if chunks else []
    with ThreadPoolExecutor(min(OFFSETS_PARALLEL, len(chunks))) as pool:
        return [tp for answer in pool.map(ask, chunks) for tp in answer]


def cuts_at_times(
    admin: Any,
    times: Mapping[TopicPartition, int],
    timeout_s: float,
    *,
    committed: bool = False,
) -> dict[TopicPartition, tuple[int, int]]:
    """Per partition, the first offset whose timestamp is at least the given ms, and that
    record's own timestamp (-1 if it has none); partitions with no such record yet are left
    out, as are partitions Kafka answered with an error (unless all were: then that error is
    raised). ``committed``: as a ``read_committed`` consumer would ask (up to the last stable
    offset).

    Kafka's ListOffsets answers both, but the consumer's ``offsets_for_times`` keeps only the
    offset, so this asks through an admin client (``list_offsets``). Its requests are
    :data:`OFFSETS_CHUNK` partitions each (the client's work grows with the square of a
    request's partitions) and all sent before any answer is awaited: the admin client does
    not block.
    """
    from confluent_kafka import IsolationLevel, KafkaException
    from confluent_kafka import TopicPartition as KafkaPartition
    from confluent_kafka.admin import OffsetSpec

    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    asked = list(times.items())
    pending = [
        admin.list_offsets(
            {
                KafkaPartition(topic, partition): OffsetSpec.for_timestamp(ms)
                for (topic, partition), ms in asked[at : at + OFFSETS_CHUNK]
            },
            isolation_level=level,
            request_timeout=timeout_s,
        )
        for at in range(0, len(asked), OFFSETS_CHUNK)
    ]
    found: dict[TopicPartition, tuple[int, int]] = {}
    failed: list[KafkaException] = []
    for answers in pending:
        for tp, answer in answers.items():
            try:
                info = answer.result(timeout=timeout_s * 2)
            except KafkaException as exc:  # this partition's error: left out, as the
                failed.append(exc)  # consumer's offsets_for_times leaves it out
                continue
            if info.offset >= 0:
                found[(tp.topic, tp.partition)] = (info.offset, info.timestamp)
    if failed and len(failed) == len(asked):
        raise failed[0]  # the request itself failed (no broker): the caller asks again
    return found


class HoldClock:
    """The first-record times and time cuts of partial files, cached per partition."""

    def __init__(
        self,
        consumer: Any,
        timeout_s: float = 2.0,
        *,
        admin: Any,
        new_consumer: Callable[[], Any] | None = None,
        committed: bool = False,
    ) -> None:
        self.consumer = consumer
        self.timeout_s = timeout_s
        #: Makes the consumers first records are read with (one per chunk; see
        #: :func:`first_record_times`); ``None``: read with ``consumer``.
        self.new_consumer = new_consumer
        #: The admin client that asks the time cuts with their records' times
        #: (:func:`cuts_at_times`).
        self.admin = admin
        #: The time cuts are asked as a ``read_committed`` consumer would.
        self.committed = committed
        self._times: dict[TopicPartition, tuple[int, int]] = {}  # tp -> (offset, ms)
        #: tp -> (offset, ms): a time cut's record, the first of the file that starts there.
        #: Kept apart from ``_times`` (the current file's), which a batch capped short of the
        #: cut (``maxOffsetsPerTrigger``) still needs at the next one.
        self._cut_times: dict[TopicPartition, tuple[int, int]] = {}
        self._cuts: dict[TopicPartition, tuple[int, int]] = {}  # tp -> (offset, cut)
        #: tp -> (offset, time, end): asked at that end, no record at or after the time.
        self._no_cut: dict[TopicPartition, tuple[int, int, int]] = {}
        #: Partitions the last :meth:`first_times` found no longer holding their offset.
        self.gone: set[TopicPartition] = set()
        self._gone_at: dict[TopicPartition, int] = {}  # tp -> the offset Kafka no longer had
        #: Reads of first records going on in the background, with the offsets each asked.
        self._reading: list[tuple[Future[_Read], dict[TopicPartition, int]]] = []
        self._reader: ThreadPoolExecutor | None = None
        #: A read :meth:`first_times` was asked to start at its next call.
        self._deferred: dict[TopicPartition, int] = {}

    def first_times(
        self,
        offsets: Mapping[TopicPartition, int],
        *,
        wait_s: float | None = None,
        later: bool = False,
    ) -> dict[TopicPartition, int]:
        """The timestamp (ms) of the first record at or after each offset that could be read
        in time (cached until the offset moves).

        With ``wait_s`` (and ``new_consumer``), a read of more than
        :data:`BACKGROUND_FROM` partitions runs on a thread of its own and is waited for at
        most that long; what it has not answered by then is left out (the caller holds those
        partitions one more batch) and comes from the read when it ends, at a later call.
        Reading 10,000 partitions' first records takes about 0.5 s, which a batch's planning
        then does not wait for. With ``later`` too, that read starts only at the next call:
        a query's first batch is followed by Spark planning the query, which the read would
        otherwise slow down (measured: 0.4 s became 0.8-1.1 s on 2 cores).
        """
        deferred, self._deferred = self._deferred, {}
        if deferred:
            self._start(deferred)
        self._collect()
        for tp, at_cut in self._cut_times.items():  # a file that starts at a time cut
            if offsets.get(tp) == at_cut[0] and self._times.get(tp, (-1,))[0] != at_cut[0]:
                self._times[tp] = at_cut
        asked = {tp: o for _, read in self._reading for tp, o in read.items()}
        wanted = {
            tp: o
            for tp, o in offsets.items()
            if self._times.get(tp, (-1,))[0] != o and asked.get(tp) != o
        }
        background = (
            wait_s is not None and self.new_consumer is not None and len(wanted) > BACKGROUND_FROM
        )
        if wanted and not background:
            self._remember(wanted, self._read(wanted))
        elif wanted and later:
            self._deferred = wanted
        elif wanted:
            self._start(wanted)
        if self._reading:
            futures.wait([read for read, _ in self._reading], timeout=wait_s)
            self._collect()
        self.gone = {tp for tp, o in offsets.items() if self._gone_at.get(tp) == o}
        known = {tp: self._times.get(tp) for tp in offsets}
        return {tp: k[1] for tp, k in known.items() if k is not None and k[0] == offsets[tp]}

    def reading(self) -> int:
        """How many partitions' first records are being read in the background, or wait for
        the next call to be."""
        going = sum(len(read) for future, read in self._reading if not future.done())
        return going + len(self._deferred)

    def _start(self, wanted: dict[TopicPartition, int]) -> None:
        """Read ``wanted``'s first records on the clock's thread."""
        if self._reader is None:
            self._reader = ThreadPoolExecutor(1, thread_name_prefix="blockgz-first-records")
        self._reading.append((self._reader.submit(self._read, wanted), wanted))

    def _read(self, wanted: dict[TopicPartition, int]) -> _Read:
        """The first records' times of ``wanted``, and the partitions gone (``None``: the read
        failed, and the partitions stay held until a later batch asks again)."""
        gone: set[TopicPartition] = set()
        try:
            found = first_record_times(
                self.consumer, wanted, self.timeout_s, gone, new_consumer=self.new_consumer
            )
        except Exception:
            log.warning("could not read the first records' timestamps", exc_info=True)
            return None
        return found, gone

    def _remember(self, wanted: Mapping[TopicPartition, int], read: _Read) -> None:
        if read is None:
            return
        found, gone = read
        for tp, ms in found.items():
            self._times[tp] = (wanted[tp], ms)
        for tp in gone:
            self._gone_at[tp] = wanted[tp]

    def _collect(self) -> None:
        """Take in the answers of the background reads that have ended."""
        going = []
        for future, wanted in self._reading:
            if future.done():
                self._remember(wanted, future.result())
            else:
                going.append((future, wanted))
        self._reading = going

    def time_cuts(
        self,
        offsets: Mapping[TopicPartition, int],
        times: Mapping[TopicPartition, int],
        ends: Mapping[TopicPartition, int] | None = None,
    ) -> dict[TopicPartition, int]:
        """Per partition, the first offset whose timestamp is at least ``times[tp]``, for the
        partial file starting at ``offsets[tp]`` (a found cut is kept until that offset moves).

        ``ends`` are the partitions' latest offsets: a partition that had no such record when
        asked is not asked again until its end moves (the same start and time), since a cut
        could only be among records after that end. A held partition waiting for its time
        then costs no request: at 10,000 held partitions, each batch asked them all.
        """
        wanted = {
            tp: ms for tp, ms in times.items() if not self._cut_settled(tp, offsets[tp], ms, ends)
        }
        try:
            found = self._look_up_cuts(wanted)
        except Exception:  # as above: held one more batch
            log.warning("could not look up offsets by time", exc_info=True)
        else:
            for tp, ms in wanted.items():
                if tp in found:
                    cut, cut_ms = found[tp]
                    self._cuts[tp] = (offsets[tp], cut)
                    self._no_cut.pop(tp, None)
                    if cut_ms >= 0:
                        self._cut_times[tp] = (cut, cut_ms)
                elif ends is not None and tp in ends:
                    self._no_cut[tp] = (offsets[tp], ms, ends[tp])
        known = {tp: self._cuts.get(tp) for tp in times}
        return {tp: k[1] for tp, k in known.items() if k is not None and k[0] == offsets[tp]}

    def _look_up_cuts(
        self, times: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """Each partition's time cut and its record's time (-1: not known).

        The time comes with the cut, so a batch that ends at a cut knows the first-record time
        of the file after it without reading that record: at 10,000 partitions, reading the
        ~600 such records of each later batch took 0.26-0.36 s of its planning.

        The time is Kafka's for the record at the cut. Where that record is one a consumer skips
        (a transaction marker, or an aborted record under ``read_committed``), the next record's
        time would be the file's first, so such a file may close by time a little earlier or
        later than the rule says (never a record lost).
        """
        return cuts_at_times(self.admin, times, self.timeout_s, committed=self.committed)

    def _cut_settled(
        self, tp: TopicPartition, offset: int, ms: int, ends: Mapping[TopicPartition, int] | None
    ) -> bool:
        """Whether ``tp``'s cut for a partial file at ``offset`` and time ``ms`` is known, or
        known not to exist below the partition's unchanged end."""
        if self._cuts.get(tp, (-1,))[0] == offset:
            return True
        return ends is not None and self._no_cut.get(tp) == (offset, ms, ends.get(tp))

    def forget(self, keep: Mapping[TopicPartition, int]) -> None:
        """Drop the cache of partitions no longer held."""
        for tp in [tp for tp in self._times if tp not in keep]:
            del self._times[tp]
        for tp in [tp for tp in self._cuts if tp not in keep]:
            del self._cuts[tp]
        for tp in [tp for tp in self._no_cut if tp not in keep]:
            del self._no_cut[tp]
        for tp in [tp for tp in self._gone_at if tp not in keep]:
            del self._gone_at[tp]
        for tp in [tp for tp in self._cut_times if tp not in keep]:
            del self._cut_times[tp]

    def close(self) -> None:
        """Stop waiting for background reads (one still going ends by its own deadline)."""
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.shutdown(wait=False)
