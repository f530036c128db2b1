"""Apache Kafka 4 (KRaft, one combined broker + controller node) on free loopback ports.

The broker's jars come from Maven Central once (:mod:`blockgz.jars`, ~45 MB,
cached); the node gets its own log directory, is formatted with ``kafka.tools.StorageTool``
and started with ``kafka.Kafka``. It keeps its data across :meth:`ApacheKafka.restart` (same
ports, same log directory), which is what a broker restart under a running export needs. The
topic, produce and watermark helpers are :class:`~blockgz.local_servers.kafka.LocalKafka`'s.

Example::

    with ApacheKafka() as kafka:
        kafka.create_topic("t", partitions=2)
        kafka.produce("t", [b"a", (b"key", b"b")], partition=0)
        kafka.restart()  # SIGKILL, then the same node again, with its data
        assert kafka.high_watermarks("t") == {0: 2, 1: 0}
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from blockgz.jars import Artifact, resolve, resolved
from blockgz.local_servers.kafka import LocalKafka
from blockgz.local_servers.ports import LOOPBACK, free_ports

#: The broker blockgz is proven on.
KAFKA = Artifact("org.apache.kafka", "kafka_2.13", "4.1.1")
_PORT_ATTEMPTS = 3
_IN_USE = "Address already in use"
#: Settings of a one-node test cluster: replication 1 everywhere, no rebalance delay, one
#: partition for the internal topics (they are created at the first group or transaction).
_NODE_SETTINGS = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
    "auto.create.topics.enable": "true",
    "log.cleaner.backoff.ms": "200",
    "log.retention.check.interval.ms": "500",
    # Test data carries fixed timestamps, in the past and the future: Kafka 4 refuses records
    # stamped over an hour ahead, and time retention would delete old-stamped segments.
    "log.message.timestamp.after.max.ms": str(2**63 - 1),
    "log.retention.ms": "-1",
}


class ApacheKafka(LocalKafka):
    """A one-node KRaft Apache Kafka on free loopback ports, with its own log directory.

    ``broker_settings`` are added to (or replace) the node's ``server.properties``.
    ``heap`` is the JVM's ``-Xmx``.
    """

    #: Apache Kafka reports exact high watermarks however records are batched.
    exact_producer_settings: Mapping[str, Any] = {"linger.ms": 1}
    #: How many ports beyond the client's and the controller's the node listens on.
    extra_port_count = 0

    def __init__(
        self,
        *,
        start_timeout_s: float = 90.0,
        broker_settings: Mapping[str, str] | None = None,
        heap: str = "768m",
        host: str = LOOPBACK,
        advertised_port: int | None = None,
    ) -> None:
        super().__init__(
            start_timeout_s=start_timeout_s, host=host, advertised_port=advertised_port
        )
        self.broker_settings = dict(broker_settings or {})
        self.heap = heap
        self.controller_port: int | None = None
        #: More free ports, chosen with the others at the first start (a subclass's listeners).
        self.extra_ports: list[int] = []
        self.home: Path | None = None  # server.properties and the log directory
        self._own_home = False

    @staticmethod
    def unavailable_reason() -> str | None:
        """Why no broker can start here (no Java, no pyspark to fetch jars with), or ``None``."""
        try:
            import confluent_kafka  # noqa: F401
        except ImportError as exc:
            return f"{exc.name} is not installed (the [spark] extra)"
        if shutil.which("java") is None:
            return "java is not on PATH (Apache Kafka needs Java 17 or newer)"
        if resolved(KAFKA) is None:
            from blockgz.jars import ivy_jar

            if ivy_jar() is None:
                return "pyspark is not installed (its Ivy jar fetches Kafka from Maven Central)"
        return None

    @property
    def log_dir(self) -> Path:
        assert self.home is not None, "ApacheKafka is not started"
        return self.home / "data"

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> Self:
        """Fetch the jars (first time), format the node, start it, and return once it serves
        metadata requests. Started again after :meth:`kill`, it reuses ports and data."""
        if self._process is not None:
            return self
        classpath = os.pathsep.join(str(j) for j in resolve(KAFKA))
        deadline = time.monotonic() + self.start_timeout_s
        try:
            if self.port is None:
                self._first_start(classpath, deadline)
            else:
                self._launch_node(classpath)
                self._wait_for_port(self.port, deadline)
            self._wait_for_metadata(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def _first_start(self, classpath: str, deadline: float) -> None:
        if self.home is None:
            self.home = Path(tempfile.mkdtemp(prefix="blockgz-kafka-"))
            self._own_home = True
        for _ in range(_PORT_ATTEMPTS):
            self.port, self.controller_port, *self.extra_ports = free_ports(
                self.host, 2 + self.extra_port_count
            )
            shutil.rmtree(self.log_dir, ignore_errors=True)
            self._write_properties()
            self._format(classpath)
            self._launch_node(classpath)
            if self._wait_for_port(self.port, deadline):
                return
            output = self.log_text
            self._kill()
            if _IN_USE not in output:
                raise RuntimeError(f"Apache Kafka exited while starting:\n{output[-3000:]}")
        raise RuntimeError(f"no free ports for Apache Kafka after {_PORT_ATTEMPTS} attempts")

    def _write_properties(self) -> None:
        assert self.home is not None
        settings = {
            **_NODE_SETTINGS,
            **self._listener_settings(),
            "controller.quorum.voters": f"1@{self.host}:{self.controller_port}",
            "log.dirs": str(self.log_dir),
            **self.broker_settings,
        }
        text = "".join(f"{k}={v}\n" for k, v in settings.items())
        (self.home / "server.properties").write_text(text)

    def _listener_settings(self) -> dict[str, str]:
        """The node's listeners: PLAINTEXT for clients and CONTROLLER for KRaft (a subclass
        adds more, on :attr:`extra_ports`)."""
        advertised = self.advertised_port or self.port
        return {
            "listeners": f"PLAINTEXT://{self.host}:{self.port},"
            f"CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{self.host}:{advertised}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        }

    def _format_arguments(self) -> list[str]:
        """More arguments of ``StorageTool format`` (a subclass's SCRAM users)."""
        return []

    def _format(self, classpath: str) -> None:
        assert self.home is not None
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        command = [
            "java", "-cp", classpath, "kafka.tools.StorageTool", "format",
            # "=" form: an id may start with "-" (1 in 64), which argparse takes for an option.
            f"--cluster-id={cluster_id}", "-c", str(self.home / "server.properties"),
            *self._format_arguments(),
        ]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"formatting Kafka's log directory failed:\n{done.stderr[-2000:]}")

    def _launch_node(self, classpath: str) -> None:
        assert self.home is not None
        command = [
            "java", f"-Xmx{self.heap}", "-XX:+UseG1GC", "-Djava.awt.headless=true",
            "-cp", classpath, "kafka.Kafka", str(self.home / "server.properties"),
        ]  # fmt: skip
        self._spawn(command)

    def _wait_for_port(self, port: int, deadline: float) -> bool:
        """True once the broker accepts connections; False if it exited while starting."""
        import socket

        process = self._process
        assert process is not None
        while time.monotonic() < deadline:
            if process.poll() is not None:
                return False
            try:
                socket.create_connection((self.host, port), timeout=0.5).close()
                return True
            except OSError:
                time.sleep(0.05)  # poll interval; the deadline bounds the wait
        raise TimeoutError(f"Apache Kafka on port {port} did not start:\n{self.log_text[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the broker, keeping its ports and log directory for :meth:`start`."""
        process = self._process
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
        self._reset_clients()
        self._kill()

    def restart(self) -> Self:
        """SIGKILL the broker and start it again on the same ports with its data."""
        self.kill()
        return self.start()

    def stop(self) -> None:
        """Kill the broker and delete its log directory. Safe to call twice."""
        super().stop()
        self.controller_port = None
        if self._own_home and self.home is not None:
            shutil.rmtree(self.home, ignore_errors=True)
            self.home = None
