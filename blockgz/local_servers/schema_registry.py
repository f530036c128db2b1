"""A loopback stand-in for the Confluent Schema Registry, for the tests and ``blockgz quickstart``.

Confluent's registry is not on the registries this project installs from (Apicurio is, and the
tests use it too: ``testkit/apicurio.py``), so `LocalSchemaRegistry` serves the REST
endpoints that confluent-kafka's ``SchemaRegistryClient``, ``AvroSerializer`` and
``AvroDeserializer`` call, with the real registry's JSON bodies, content type and error codes,
from a ``ThreadingHTTPServer`` thread on a free loopback port. Only Avro is supported. Schema ids
are global and shared by equal schemas; compatibility is checked with the Apache ``avro``
package's reader/writer checker, imported only when a schema is parsed. A schema's text is
answered as it was first registered, without whitespace (the real registry answers its own
canonical form); equality ignores whitespace, key order and ``"string"`` vs
``{"type": "string"}`` but not docs, defaults or aliases, as in the real registry.

The state lives in the object, not in the server thread: ``stop()`` and ``start()`` serve the
same schemas on the same URL again. The tests' fault switches (outages, failed requests, the
requests clients made) are a subclass in the repository's ``testkit/schema_registries.py``, which
does
not ship. (confluent-kafka 2.16's default subject name strategy first asks
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
    1
    {"type":"string"}
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import parse_qs, unquote, urlsplit

from blockgz.local_servers.ports import LOOPBACK, StartStop
from blockgz.local_servers.schema_registry_api import ROUTES, RegistryEndpoints
from blockgz.local_servers.schema_registry_state import (
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
class Answer:
    """What the registry answers one request: an HTTP status, a JSON body, extra headers."""

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
        pass  # quiet

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

    def forget(self) -> None:
        """Forget every schema, subject and setting (the compatibility level stays)."""
        with self._lock:
            self._store = RegistryState(self._store.default_level)

    # -- request handling (called from the server's threads) --------------------------------

    def _answer(self, method: str, target: str, raw: bytes, authorization: str | None) -> Answer:
        split = urlsplit(target)
        segments = [unquote(s) for s in split.path.split("/") if s]
        path = "/" + "/".join(segments)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        intercepted = self._intercept(method, path)
        if intercepted is not None:
            return intercepted
        if self.users is not None and not self._authorized(authorization):
            return Answer(
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
            return Answer(200, result)
        except RegistryApiError as exc:
            return Answer(exc.status, {"error_code": exc.error_code, "message": exc.message})
        except Exception as exc:  # a bug or a missing dependency: answer, do not drop the line
            return Answer(500, {"error_code": 50001, "message": f"{type(exc).__name__}: {exc}"})

    def _intercept(self, method: str, path: str) -> Answer | None:
        """An answer that replaces the registry's own for this request; ``None`` serves it.

        The hook for the tests' fault switches (``testkit/schema_registries.py``)."""
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


__all__ = ["CONTENT_TYPE", "DEFAULT_LEVEL", "LEVELS", "Answer", "LocalSchemaRegistry"]
