"""A loopback TCP proxy that can cut every connection and refuse new ones for a while.

What a Kafka client sees of a broker that restarts with its data kept: its connections drop,
connection attempts fail for a time, then the same address answers again with the same data.
Tansu 0.6 (the local broker) cannot show that with a real restart — its memory storage loses
the data, its ``s3://`` storage keeps it but then reports a high watermark stuck at the first
batch, and postgres/libsql storage are not compiled in — so the tests cut the broker off here.
Written by hand: the libraries on PyPI for this (toxiproxy and the like) are clients of a Go
server that is not installable from the registries here.

    with TcpProxy("127.0.0.1", broker_port) as proxy:
        with proxy.outage():  # drop everything; new connections are reset at once
            ...
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Self

from blockgz.local_servers.ports import LOOPBACK, StartStop, free_port

_BUFFER = 256 * 1024


class TcpProxy(StartStop):
    """Forwards ``LOOPBACK:port`` to ``upstream_host:upstream_port``, one thread per direction."""

    def __init__(self, upstream_host: str, upstream_port: int, *, port: int | None = None):
        self.upstream = (upstream_host, upstream_port)
        self.port = port or free_port(LOOPBACK)
        #: Connections accepted and reset at once during an outage.
        self.refused = 0
        self._down = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        listener = socket.create_server((LOOPBACK, self.port), reuse_port=False)
        self._listener = listener
        self._thread = threading.Thread(target=self._accept, name="tcp-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        self._drop_all()
        if self._thread is not None:
            self._thread.join(5)

    @contextlib.contextmanager
    def outage(self) -> Iterator[None]:
        """Within the block: every open connection is closed, every new one reset."""
        self._down.set()
        self._drop_all()
        try:
            yield
        finally:
            self._down.clear()

    def _drop_all(self) -> None:
        with self._lock:
            doomed, self._sockets = self._sockets, set()
        for sock in doomed:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        while (listener := self._listener) is not None:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            if self._down.is_set():
                client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
                client.close()  # linger 0: a reset, as a port nobody listens on gives
                self.refused += 1
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets |= {client, upstream}
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(_BUFFER):
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
