"""A loopback stand-in for the Confluent Schema Registry, for the tests and ``blockgz quickstart``.

No registry server can be installed here (DESIGN.md), so `LocalSchemaRegistry` serves the REST
endpoints that confluent-kafka's ``SchemaRegistryClient``, ``AvroSerializer`` and
``AvroDeserializer`` call, with the real registry's JSON bodies, content type and error codes,
from a ``ThreadingHTTPServer`` thread on a free loopback port. Only Avro is supported. Schema ids
are global and shared by equal schemas; compatibility is checked with the Apache ``avro``
package's reader/writer checker, imported only when a schema is parsed. A schema's text is
answered as it was first registered, without whitespace (the real registry answers its own
canonical form); equality ignores whitespace, key order and ``"string"`` vs
``{"type": "string"}`` but not docs, defaults or aliases, as in the real registry.

The state lives in the object, not in the server thread: ``stop()`` and ``start()`` (or
``with registry.outage():``) serve the same schemas on the same URL again, ``fail_next()``
answers the next requests with an error, and ``requests`` / ``request_count()`` show what the
clients asked for. (confluent-kafka 2.16's default subject name strategy first asks
``GET /associations/resources/-/{topic}``, answered ``[]`` here, then uses ``{topic}-value``:
that is one extra request per topic, field and serializer or deserializer.)

Example:

    >>> import json, urllib.request
    >>> with LocalSchemaRegistry() as registry:
    ...     request = urllib.request.Request(
    ...         registry.url + "/subjects/orders-value/versions",
    ...         data=json.dumps({"schema": '{"type": "string"}'}).encode(),
    ...         headers={"Content-Type": CONTENT_TYPE},
    ...     )
    ...     with urllib.request.urlopen(request) as response:
    ...         print(json.load(response)["id"])
    ...     with urllib.request.urlopen(registry.url + "/schemas/ids/1") as response:
    ...         print(json.load(response)["schema"])
    ...     print(registry.request_count("/schemas/ids/1"))
    1
    {"type":"string"}
    1
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hmac
import json
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, unquote, urlsplit

from blockgz.local_servers.ports import LOOPBACK, StartStop
from blockgz.local_servers.registry_api import ROUTES, RegistryEndpoints
from blockgz.local_servers.registry_state import (
    CONTENT_TYPE,
    DEFAULT_LEVEL,
    LEVELS,
    RegistryApiError,
    RegistryState,
)


def _route(method: str, segments: list[str]) -> tuple[str, list[str]]:
    """The endpoint name and path captures for a request, or a 404 / 405 error."""
    path_matched = False
    for route_method, pattern, name in ROUTES:
        if len(pattern) != len(segments):
            continue
        if all(p in ("*", s) for p, s in zip(pattern, segments, strict=True)):
            path_matched = True
            if route_method == method:
                captures = [s for p, s in zip(pattern, segments, strict=True) if p == "*"]
                return name, captures
    if path_matched:
        raise RegistryApiError(405, 405, "HTTP 405 Method Not Allowed")
    raise RegistryApiError(404, 404, "HTTP 404 Not Found")


@dataclass
class _Fault:
    remaining: int
    status: int
    error_code: int
    message: str
    path: str | None = None


@dataclass
class _Answer:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


class _Handler(BaseHTTPRequestHandler):
    """One HTTP/1.0 request (the connection closes after it, so ``stop()`` is an outage)."""

    server: _Server
    server_version = "LocalSchemaRegistry/1"

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests read ``requests`` instead

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        answer = self.server.registry._answer(
            method, self.path, raw, self.headers.get("Authorization")
        )
        data = json.dumps(answer.body, separators=(",", ":")).encode()
        self.send_response(answer.status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True  # so start() after stop() can bind the same port again

    def __init__(self, address: tuple[str, int], registry: LocalSchemaRegistry) -> None:
        super().__init__(address, _Handler)
        self.registry = registry


class LocalSchemaRegistry(StartStop):
    """A Confluent-compatible Schema Registry (Avro only) on a loopback port, in a thread.

    ``users`` (``{"user": "password"}``) turns on HTTP basic auth for every request, as
    ``basic.auth.user.info`` sends it. ``compatibility`` is the global level it starts with and
    returns to on ``DELETE /config``. ``port=0`` takes a free port on the first ``start()``;
    later starts bind the same port, so a ``stop()`` / ``start()`` pair is an outage, not a new
    registry: the schemas, ids and configuration are kept until ``reset()``.

    Example (starts a server, so not a doctest)::

        with LocalSchemaRegistry(users={"alice": "secret"}) as registry:
            client = SchemaRegistryClient(
                {"url": registry.url, "basic.auth.user.info": "alice:secret"}
            )
            schema_id = client.register_schema("orders-value", Schema(avsc, "AVRO"))
            registry.fail_next(2, status=503)  # the next two requests get 503
            with registry.outage():  # connections are refused in here
                ...
            consume_everything()  # e.g. with an AvroDeserializer on a new client
            assert registry.request_count(f"/schemas/ids/{schema_id}") == 1
    """

    def __init__(
        self,
        *,
        port: int = 0,
        users: Mapping[str, str] | None = None,
        compatibility: str = DEFAULT_LEVEL,
    ) -> None:
        if compatibility.upper() not in LEVELS:
            raise ValueError(f"compatibility must be one of {', '.join(LEVELS)}: {compatibility!r}")
        self.host = LOOPBACK
        self.port: int | None = port or None
        self.users = dict(users) if users is not None else None
        self._lock = threading.RLock()
        self._store = RegistryState(compatibility.upper())
        self._requests: list[tuple[str, str]] = []
        self._faults: list[_Fault] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, the client's ``url`` (known once started; kept on stop)."""
        if self.port is None:
            raise RuntimeError("LocalSchemaRegistry is not started")
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the server is accepting connections."""
        return self._server is not None

    def start(self) -> Self:
        """Listen (again) and serve in a daemon thread; returns at once, ready for requests."""
        if self._server is not None:
            return self
        server = _Server((self.host, self.port or 0), self)
        self.port = int(server.server_address[1])
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"schema-registry-{self.port}",
            daemon=True,
        )
        thread.start()
        self._server, self._thread = server, thread
        return self

    def stop(self) -> None:
        """Close the listening socket (clients get "connection refused"); keeps all state."""
        server, self._server = self._server, None
        thread, self._thread = self._thread, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join()

    @contextlib.contextmanager
    def outage(self) -> Iterator[None]:
        """``with registry.outage():`` the registry is down inside the block and back after it."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    def fail_next(
        self,
        n: int = 1,
        status: int = 503,
        *,
        error_code: int | None = None,
        message: str = "Injected failure (LocalSchemaRegistry.fail_next)",
        path: str | None = None,
    ) -> None:
        """Answer the next ``n`` requests (whose path starts with ``path``, if given) with an error.

        ``error_code`` defaults to 50001 for a 5xx status and to ``status`` otherwise. Failed
        requests are counted in ``requests`` too. Note that the client retries 408, 429, 500,
        502, 503 and 504 (``max.retries``, default 2, waiting ``retries.wait.ms``).
        """
        if error_code is None:
            error_code = 50001 if status >= 500 else status
        with self._lock:
            self._faults.append(_Fault(n, status, error_code, message, path))

    @property
    def requests(self) -> list[tuple[str, str]]:
        """Every request so far as ``(method, path)``; the path percent-decoded, no query."""
        with self._lock:
            return list(self._requests)

    def request_count(self, path: str | None = None, method: str | None = None) -> int:
        """How many requests had exactly this path (and method); all of them by default."""
        with self._lock:
            return sum(
                1
                for m, p in self._requests
                if (path is None or p == path) and (method is None or m == method.upper())
            )

    def clear_requests(self) -> None:
        """Forget the requests counted so far."""
        with self._lock:
            self._requests.clear()

    def reset(self) -> None:
        """Forget every schema, subject, setting, request and pending fault (a new registry)."""
        with self._lock:
            self._store = RegistryState(self._store.default_level)
            self._requests.clear()
            self._faults.clear()

    # -- request handling (called from the server's threads) --------------------------------

    def _answer(self, method: str, target: str, raw: bytes, authorization: str | None) -> _Answer:
        split = urlsplit(target)
        segments = [unquote(s) for s in split.path.split("/") if s]
        path = "/" + "/".join(segments)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        with self._lock:
            self._requests.append((method, path))
            fault = self._take_fault(path)
        if fault is not None:
            return _Answer(fault.status, {"error_code": fault.error_code, "message": fault.message})
        if self.users is not None and not self._authorized(authorization):
            return _Answer(
                401,
                {"error_code": 40101, "message": "Unauthorized"},
                {"WWW-Authenticate": 'Basic realm="SchemaRegistry"'},
            )
        try:
            name, captures = _route(method, segments)
            body: Any = {}
            if raw:
                try:
                    body = json.loads(raw)
                except ValueError as exc:
                    raise RegistryApiError(400, 400, f"Malformed JSON body: {exc}") from exc
                if not isinstance(body, dict):
                    raise RegistryApiError(400, 400, "The request body must be a JSON object")
            with self._lock:
                result = getattr(RegistryEndpoints(self._store), name)(*captures, query, body)
            return _Answer(200, result)
        except RegistryApiError as exc:
            return _Answer(exc.status, {"error_code": exc.error_code, "message": exc.message})
        except Exception as exc:  # a bug or a missing dependency: answer, do not drop the line
            return _Answer(500, {"error_code": 50001, "message": f"{type(exc).__name__}: {exc}"})

    def _take_fault(self, path: str) -> _Fault | None:
        for fault in self._faults:
            if fault.path is None or path.startswith(fault.path):
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self._faults.remove(fault)
                return fault
        return None

    def _authorized(self, authorization: str | None) -> bool:
        assert self.users is not None
        scheme, _, encoded = (authorization or "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, sep, password = (
                base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
            )
        except (binascii.Error, UnicodeDecodeError):
            return False
        expected = self.users.get(user)
        return (
            bool(sep)
            and expected is not None
            and hmac.compare_digest(expected.encode(), password.encode())
        )


__all__ = ["CONTENT_TYPE", "DEFAULT_LEVEL", "LEVELS", "LocalSchemaRegistry"]
