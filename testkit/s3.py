"""Local S3 for tests and benchmarks: moto's S3 server, and a fault-injecting proxy in front of it.

`MotoS3` runs moto's S3 on a free loopback port (in a thread, or in a child process so that
its memory and GIL stay out of the measurements); it lives in :mod:`blockgz.local_servers.moto_s3`
(the quickstart uses it too) and is re-exported here with its helpers. `FaultProxy` is a
streaming HTTP reverse proxy that sits between a boto3 client and moto: it can add
per-request latency, answer chosen requests with S3's 500/503 errors or a TCP reset instead
of forwarding them, and logs every request (method, path, query, headers, status, body
bytes sent).

Plain classes and functions only: the pytest fixtures live with the tests that use them.
"""

from __future__ import annotations

import contextlib
import http.client
import random
import socket
import socketserver
import struct
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import IO, Any, Literal, Self
from urllib.parse import parse_qsl, urlsplit

from botocore.client import BaseClient

from blockgz.local_servers import (
    ACCESS_KEY,
    LOOPBACK,
    REGION,
    SECRET_KEY,
    MotoS3,
    fake_aws_env,
    make_s3_client,
)
from blockgz.local_servers.ports import StartStop

__all__ = [
    "ACCESS_KEY",
    "FAULTS",
    "REGION",
    "SECRET_KEY",
    "Fault",
    "FaultProxy",
    "FaultRule",
    "MotoS3",
    "RequestRecord",
    "fake_aws_env",
    "make_s3_client",
    "s3_options",
]


def drop_bucket(client: Any, name: str) -> None:
    """Abort the bucket's open uploads, delete its objects and the bucket itself.

    SeaweedFS gives every bucket a collection of its own (seven volumes a time), and its
    volume slots are bounded by free disk over the volume size: a session that leaves every
    test's bucket behind runs out of writable volumes after ~65 buckets ("InternalError").
    """
    from botocore.exceptions import ClientError

    try:
        for page in client.get_paginator("list_multipart_uploads").paginate(Bucket=name):
            for upload in page.get("Uploads", []):
                client.abort_multipart_upload(
                    Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"]
                )
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=name):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            if keys:
                client.delete_objects(Bucket=name, Delete={"Objects": keys, "Quiet": True})
        client.delete_bucket(Bucket=name)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") != "NoSuchBucket":
            raise


def s3_options(endpoint_url: str, **extra: str) -> dict[str, str]:
    """Confluent-named options for blockgz's S3 store against a local server (fast retries)."""
    return {
        "store.url": endpoint_url,
        "s3.region": REGION,
        "aws.access.key.id": ACCESS_KEY,
        "aws.secret.access.key": SECRET_KEY,
        "s3.retry.backoff.ms": "1",
        **extra,
    }


Fault = Literal["500", "503", "reset"]
FAULTS: tuple[str, ...] = ("500", "503", "reset")

_CHUNK = 1 << 20  # streaming unit, both directions
_SPOOL_MAX = 16 << 20  # dechunked request bodies above this spill to a temporary file
_MAX_LINE = 65536

# Connection-level headers, never forwarded (RFC 9110 §7.6.1), plus the ones the proxy rewrites.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
_NOT_FORWARDED_UP = _HOP_BY_HOP | {"expect", "content-length"}

_ERROR_XML = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    "<Error><Code>{code}</Code><Message>{message}</Message>"
    "<Resource>{resource}</Resource><RequestId>{request_id}</RequestId></Error>"
)
_FAULT_RESPONSES: dict[str, tuple[int, str, str, str]] = {
    # fault: (status, reason, S3 error code, message)
    "500": (
        500,
        "Internal Server Error",
        "InternalError",
        "We encountered an internal error. Please try again.",
    ),
    "503": (503, "Slow Down", "SlowDown", "Please reduce your request rate."),
}


@dataclass
class RequestRecord:
    """One request as seen by a :class:`FaultProxy`.

    Fields are filled in as the request progresses; each is set before the client can observe
    its effect (``status`` before the status line is sent, ``response_bytes`` before each write),
    so once a client call has returned, the records of its requests are up to date.
    """

    method: str
    path: str  # without the query string, as sent (percent-encoded)
    query: str  # raw query string, "" if none
    headers: dict[str, str]  # request headers as sent by the client (repeats joined with ", ")
    started: float = field(default_factory=time.monotonic)
    status: int | None = None  # status sent to the client; None for a reset or a dropped request
    response_bytes: int = 0  # response body bytes sent to the client
    request_bytes: int = 0  # request body bytes received from the client
    faulted: bool = False
    fault: str | None = None
    error: str | None = None  # set when forwarding failed (upstream down, client went away)
    finished: float | None = None

    @property
    def params(self) -> dict[str, str]:
        """The query string as a dict, blank values kept (``?uploads``: ``{"uploads": ""}``)."""
        return dict(parse_qsl(self.query, keep_blank_values=True))

    def header(self, name: str) -> str | None:
        """A request header, looked up case-insensitively."""
        lowered = name.lower()
        for key, value in self.headers.items():
            if key.lower() == lowered:
                return value
        return None

    def matches(
        self,
        method: str | None = None,
        path_contains: str | None = None,
        query_contains: str | None = None,
    ) -> bool:
        """Whether this request has ``method`` and contains the given substrings."""
        return (
            (method is None or self.method == method.upper())
            and (path_contains is None or path_contains in self.path)
            and (query_contains is None or query_contains in self.query)
        )


@dataclass
class FaultRule:
    """A fault to apply to the next ``remaining`` matching requests (``None``: all of them)."""

    fault: Fault
    remaining: int | None
    method: str | None = None
    path_contains: str | None = None
    query_contains: str | None = None
    #: The share of matching requests faulted (drawn from the proxy's seeded generator).
    probability: float = 1.0
    hits: int = 0  # requests faulted so far


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, proxy: FaultProxy, address: tuple[str, int]) -> None:
        self.proxy = proxy
        self._connections: dict[socket.socket, threading.Thread] = {}
        self._connections_lock = threading.Lock()
        super().__init__(address, _ProxyHandler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind() does a reverse DNS lookup (getfqdn) that can stall.
        socketserver.TCPServer.server_bind(self)
        self.server_name = LOOPBACK
        self.server_port = int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            name=f"FaultProxy:{self.server_address[1]}<-{client_address[1]}",
            daemon=True,
        )
        with self._connections_lock:
            self._connections[request] = thread
        thread.start()

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.pop(request, None)
        super().shutdown_request(request)

    def close_connections(self, timeout_s: float) -> None:
        """Cut every client connection and wait (up to ``timeout_s``) for their threads."""
        with self._connections_lock:
            connections = list(self._connections.items())
        for sock, _ in connections:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout_s
        for _, thread in connections:
            thread.join(max(0.0, deadline - time.monotonic()))


class _ClientGone(Exception):
    """The client closed its connection or sent a malformed body."""


class _ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    # Headers and body go out in separate writes; with Nagle on, a small body waits for the
    # client's delayed ACK (a 1 KiB GET took 68 ms instead of 25 ms at 20 ms latency).
    disable_nagle_algorithm = True
    server: _ProxyServer
    _expecting = False  # the current request has "Expect: 100-continue", not yet answered

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def handle_expect_100(self) -> bool:
        # Don't answer "100 Continue" while parsing: a faulted request must get its error (or
        # its reset) instead. _continue() sends it once we decide to read the body.
        self._expecting = True
        return True

    def _handle(self) -> None:
        proxy = self.server.proxy
        target = urlsplit(self.path)
        if not self.path.startswith("/"):  # absolute-form target ("http://host/path")
            self.path = target.path + (f"?{target.query}" if target.query else "")
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        record = RequestRecord(
            method=self.command, path=target.path, query=target.query, headers=headers
        )
        proxy._request_started(record)
        try:
            latency = proxy.latency_s
            if latency > 0:
                time.sleep(latency)  # simulated network round trip, not synchronisation
            rule = proxy._take_fault(record)
            if rule is None:
                self._forward(record)
            elif rule.fault == "reset":
                self._reset()
            else:
                self._send_fault(record, rule.fault)
        except (_ClientGone, OSError, ValueError, http.client.HTTPException) as exc:
            # The client went away or sent garbage (ValueError: a bad Content-Length); drop it.
            record.error = record.error or repr(exc)
            self.close_connection = True
        finally:
            self._expecting = False
            record.finished = time.monotonic()
            proxy._request_finished()

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = do_PATCH = do_OPTIONS = _handle

    # -- request body ------------------------------------------------------------------------

    def _continue(self) -> None:
        if self._expecting:
            self._expecting = False
            self.send_response_only(100)
            self.end_headers()

    def _is_chunked(self) -> bool:
        return "chunked" in self.headers.get("Transfer-Encoding", "").lower()

    def _has_body(self) -> bool:
        return self._is_chunked() or int(self.headers.get("Content-Length") or 0) > 0

    def _read_body(self, sink: Callable[[bytes], object], record: RequestRecord) -> None:
        """Read the request body (after "100 Continue" if asked for) and pass it on in chunks."""
        self._continue()
        pace = _Pacer(self.server.proxy.bandwidth_bps)
        inner = sink

        def sink(data: bytes) -> object:
            pace.moved(len(data))  # the client's upload is as slow as the simulated link
            return inner(data)

        if self._is_chunked():
            self._read_chunked(sink, record)
            return
        remaining = int(self.headers.get("Content-Length") or 0)
        while remaining > 0:
            data = self.rfile.read(min(_CHUNK, remaining))
            if not data:
                raise _ClientGone("client closed the connection mid-body")
            record.request_bytes += len(data)
            remaining -= len(data)
            sink(data)

    def _read_chunked(self, sink: Callable[[bytes], object], record: RequestRecord) -> None:
        while True:
            line = self.rfile.readline(_MAX_LINE)
            if not line.endswith(b"\n"):
                raise _ClientGone(f"bad chunk size line {line[:80]!r}")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError as exc:
                raise _ClientGone(f"bad chunk size line {line[:80]!r}") from exc
            if size == 0:
                break
            while size > 0:
                data = self.rfile.read(min(_CHUNK, size))
                if not data:
                    raise _ClientGone("client closed the connection mid-chunk")
                record.request_bytes += len(data)
                size -= len(data)
                sink(data)
            if self.rfile.readline(_MAX_LINE) not in (b"\r\n", b"\n"):
                raise _ClientGone("chunk not followed by CRLF")
        while True:  # trailer section, dropped
            line = self.rfile.readline(_MAX_LINE)
            if line in (b"\r\n", b"\n"):
                return
            if not line:
                raise _ClientGone("client closed the connection in the trailers")

    # -- faults ------------------------------------------------------------------------------

    def _reset(self) -> None:
        """Drop the connection with a TCP RST (SO_LINGER 0), without reading or answering."""
        sock = self.connection
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        # socket.close() only closes the descriptor once the makefile() reader is closed too.
        self.rfile.close()
        sock.close()

    def _send_fault(self, record: RequestRecord, fault: str) -> None:
        status, reason, code, message = _FAULT_RESPONSES[fault]
        if self._has_body():
            if self._expecting:
                # Per RFC 9110 §10.1.1: answer without "100 Continue"; the client then won't
                # send the body, so this connection can't be reused.
                self.close_connection = True
            else:
                self._read_body(lambda _data: None, record)
        request_id = f"FAULT{id(record) & 0xFFFFFFFF:08X}"
        body = _ERROR_XML.format(
            code=code, message=message, resource=record.path, request_id=request_id
        ).encode()
        record.status = status
        self.send_response_only(status, reason)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-amz-request-id", request_id)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            record.response_bytes += len(body)
            self.wfile.write(body)

    # -- forwarding --------------------------------------------------------------------------

    def _forward(self, record: RequestRecord) -> None:
        proxy = self.server.proxy
        with contextlib.ExitStack() as cleanup:
            upstream = http.client.HTTPConnection(
                proxy.upstream_host, proxy.upstream_port, timeout=proxy.upstream_timeout_s
            )
            cleanup.callback(upstream.close)
            spool: IO[bytes] | None = None
            length: int | None = None
            if self._is_chunked():
                # Dechunk into a spool so upstream gets a plain Content-Length body.
                spool = cleanup.enter_context(tempfile.SpooledTemporaryFile(max_size=_SPOOL_MAX))
                self._read_body(spool.write, record)
                length = spool.tell()
                spool.seek(0)
            elif "Content-Length" in self.headers:
                length = int(self.headers["Content-Length"])
            try:
                upstream.putrequest(
                    self.command, self.path, skip_host=True, skip_accept_encoding=True
                )
                for name, value in self.headers.items():
                    if name.lower() not in _NOT_FORWARDED_UP:
                        upstream.putheader(name, value)
                if length is not None:
                    upstream.putheader("Content-Length", str(length))
                upstream.endheaders()
                if spool is not None:
                    while data := spool.read(_CHUNK):
                        upstream.send(data)
                elif length:
                    self._read_body(upstream.send, record)
                response = upstream.getresponse()
            except (OSError, http.client.HTTPException) as exc:
                record.error = f"upstream: {exc!r}"
                self._send_bad_gateway(record, exc)
                return
            self._relay(record, response)

    def _send_bad_gateway(self, record: RequestRecord, exc: Exception) -> None:
        body = f"proxy could not reach upstream: {exc!r}\n".encode()
        self.close_connection = True  # the request body may be half read
        record.status = 502
        self.send_response_only(502, "Bad Gateway")
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            record.response_bytes += len(body)
            self.wfile.write(body)

    def _relay(self, record: RequestRecord, response: http.client.HTTPResponse) -> None:
        """Send the upstream response to the client, streaming the body in chunks."""
        status = response.status
        no_body = self.command == "HEAD" or status in (204, 304) or 100 <= status < 200
        length = response.getheader("Content-Length")
        chunked = not no_body and (length is None or response.chunked)
        record.status = status
        self.send_response_only(status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in _HOP_BY_HOP:
                self.send_header(name, value)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if no_body:
            return
        buffer = bytearray(self.server.proxy.chunk_size)
        view = memoryview(buffer)
        pace = _Pacer(self.server.proxy.bandwidth_bps)
        while n := response.readinto(buffer):
            pace.moved(n)
            record.response_bytes += n  # counted before the write: see RequestRecord
            if chunked:
                self.wfile.write(b"%x\r\n" % n)
                self.wfile.write(view[:n])
                self.wfile.write(b"\r\n")
            else:
                self.wfile.write(view[:n])
        if chunked:
            self.wfile.write(b"0\r\n\r\n")


class _Pacer:
    """Holds one connection's transfer to ``bps`` bytes per second (``None``: no limit)."""

    def __init__(self, bps: float | None):
        self.bps = bps
        self.started = time.monotonic()
        self.total = 0

    def moved(self, n: int) -> None:
        if not self.bps:
            return
        self.total += n
        ahead = self.total / self.bps - (time.monotonic() - self.started)
        if ahead > 0:
            time.sleep(ahead)  # simulated link speed, not synchronisation


class FaultProxy(StartStop):
    """A loopback HTTP reverse proxy in front of an S3 endpoint, with latency and fault injection.

    Every request is logged in :attr:`requests`, optionally delayed by :attr:`latency_s`, then
    either forwarded to ``upstream_url`` (bodies streamed in ``chunk_size`` pieces both ways) or,
    if it matches an injected fault, answered by the proxy itself: ``"500"`` (InternalError),
    ``"503"`` (SlowDown), or ``"reset"`` (TCP RST, no response). Faulted requests never reach
    the upstream. Thread-safe; serves each client connection on its own thread, with keep-alive.

    Example::

        with MotoS3() as moto, FaultProxy(moto.endpoint_url) as proxy:
            s3 = proxy.client()  # retries: standard mode, 3 attempts
            s3.create_bucket(Bucket="b")
            proxy.latency_s = 0.02  # ~real S3 request latency
            proxy.inject("503", times=1, method="PUT")
            s3.put_object(Bucket="b", Key="k", Body=b"x")  # retried once
            assert proxy.count(method="PUT", faulted=True) == 1
            proxy.inject("500", times=None, method="PUT", query_contains="uploadId")  # permanent
    """

    def __init__(
        self,
        upstream_url: str,
        *,
        latency_s: float = 0.0,
        bandwidth_bps: float | None = None,
        chunk_size: int = _CHUNK,
        upstream_timeout_s: float = 60.0,
    ) -> None:
        upstream = urlsplit(upstream_url)
        if upstream.scheme != "http" or not upstream.hostname:
            raise ValueError(f"upstream must be an http:// URL, got {upstream_url!r}")
        self.upstream_url = upstream_url
        self.upstream_host: str = upstream.hostname
        self.upstream_port: int = upstream.port or 80
        self.upstream_timeout_s = upstream_timeout_s
        self.latency_s = latency_s
        #: Per-connection bytes per second in each direction, as one stream to real S3 gets.
        self.bandwidth_bps = bandwidth_bps
        self.chunk_size = chunk_size
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._rules: list[FaultRule] = []
        self._random = random.Random(0)
        self._log: list[RequestRecord] = []
        self._in_flight = 0
        self.peak_in_flight = 0  # most requests handled at once since the last clear_log()
        self._server: _ProxyServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FaultProxy is not started")
        return int(self._server.server_address[1])

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:PORT`` of the proxy."""
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> Self:
        """Bind a free loopback port and start serving."""
        if self._server is not None:
            return self
        self._server = _ProxyServer(self, (LOOPBACK, 0))
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"FaultProxy:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop accepting, cut open connections, and join the threads. Safe to call twice."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        server.close_connections(timeout_s)
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def client(self, **config: Any) -> BaseClient:
        """A boto3 S3 client going through the proxy; ``config`` as for :func:`make_s3_client`."""
        return make_s3_client(self.endpoint_url, **config)

    # -- faults ------------------------------------------------------------------------------

    def inject(
        self,
        fault: Fault,
        *,
        times: int | None = 1,
        method: str | None = None,
        path_contains: str | None = None,
        query_contains: str | None = None,
        probability: float = 1.0,
    ) -> FaultRule:
        """Fault the next ``times`` requests that match (``times=None``: every one, for good).

        Rules are tried in the order they were injected; a request gets at most one fault.
        ``query_contains`` is matched against the raw query string, e.g. ``"uploadId"`` with
        ``method="PUT"`` selects UploadPart. ``probability`` faults that share of the matching
        requests, drawn from the generator seeded by :meth:`seed` (reproducible rates; which
        request gets the fault still depends on the order concurrent requests arrive in).
        """
        if not 0.0 < probability <= 1.0:
            raise ValueError(f"probability must be in (0, 1], got {probability}")
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; expected one of {FAULTS}")
        if times is not None and times < 1:
            raise ValueError(f"times must be >= 1 or None, got {times}")
        rule = FaultRule(
            fault=fault,
            remaining=times,
            method=method.upper() if method else None,
            path_contains=path_contains,
            query_contains=query_contains,
            probability=probability,
        )
        with self._lock:
            self._rules.append(rule)
        return rule

    def seed(self, value: int) -> None:
        """Seed the generator that decides which requests probabilistic faults hit."""
        with self._lock:
            self._random.seed(value)

    def clear_faults(self) -> None:
        """Remove every injected fault."""
        with self._lock:
            self._rules.clear()

    @property
    def faults(self) -> list[FaultRule]:
        """The fault rules still active."""
        with self._lock:
            return list(self._rules)

    def _take_fault(self, record: RequestRecord) -> FaultRule | None:
        with self._lock:
            for rule in self._rules:
                if record.matches(rule.method, rule.path_contains, rule.query_contains):
                    if rule.probability < 1.0 and self._random.random() >= rule.probability:
                        continue
                    rule.hits += 1
                    if rule.remaining is not None:
                        rule.remaining -= 1
                        if rule.remaining == 0:
                            self._rules.remove(rule)
                    record.faulted = True
                    record.fault = rule.fault
                    return rule
        return None

    # -- request log -------------------------------------------------------------------------

    @property
    def requests(self) -> list[RequestRecord]:
        """A snapshot of the request log, oldest first."""
        with self._lock:
            return list(self._log)

    def clear_log(self) -> None:
        """Forget the logged requests (and reset :attr:`peak_in_flight`)."""
        with self._lock:
            self._log.clear()
            self.peak_in_flight = self._in_flight

    def count(
        self,
        method: str | None = None,
        path_contains: str | None = None,
        query_contains: str | None = None,
        faulted: bool | None = None,
    ) -> int:
        """How many logged requests match all the given criteria."""
        return sum(
            1
            for record in self.requests
            if record.matches(method, path_contains, query_contains)
            and (faulted is None or record.faulted == faulted)
        )

    @property
    def in_flight(self) -> int:
        """Requests being handled right now."""
        with self._lock:
            return self._in_flight

    def wait_idle(self, timeout_s: float = 10.0) -> None:
        """Block until no request is in flight (e.g. before reading a record's final fields)."""
        with self._idle:
            if not self._idle.wait_for(lambda: self._in_flight == 0, timeout_s):
                raise TimeoutError(f"{self._in_flight} request(s) still in flight")

    def _request_started(self, record: RequestRecord) -> None:
        with self._lock:
            self._log.append(record)
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)

    def _request_finished(self) -> None:
        with self._idle:
            self._in_flight -= 1
            self._idle.notify_all()
