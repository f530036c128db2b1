"""The registry stand-in with the tests' fault switches: outages, failed requests, and a record
of what the clients asked for.

:class:`~blockgz.local_servers.schema_registry.LocalSchemaRegistry` ships for ``blockgz
quickstart``;
what only tests need lives here.

    >>> import json, urllib.request
    >>> with FaultyRegistry() as registry:
    ...     registry.fail_next(1, status=503, path="/subjects")
    ...     try:
    ...         urllib.request.urlopen(registry.url + "/subjects")
    ...     except urllib.error.HTTPError as exc:
    ...         print(exc.code)
    ...     with urllib.request.urlopen(registry.url + "/subjects") as response:
    ...         print(json.load(response))
    ...     print(registry.request_count("/subjects"))
    503
    []
    2
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from blockgz.local_servers.schema_registry import Answer, LocalSchemaRegistry


@dataclass
class _Fault:
    remaining: int
    status: int
    error_code: int
    message: str
    path: str | None = None


class FaultyRegistry(LocalSchemaRegistry):
    """:class:`LocalSchemaRegistry` plus ``outage()``, ``fail_next()``, ``requests``,
    ``request_count()`` and ``reset()``.

    Example (starts a server, so not a doctest)::

        with FaultyRegistry() as registry:
            registry.fail_next(2, status=503)  # the next two requests get 503
            with registry.outage():  # connections are refused in here
                ...
            consume_everything()  # e.g. with an AvroDeserializer on a new client
            assert registry.request_count(f"/schemas/ids/{schema_id}") == 1
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._requests: list[tuple[str, str]] = []
        self._faults: list[_Fault] = []

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
        message: str = "Injected failure (FaultyRegistry.fail_next)",
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
            self.forget()
            self._requests.clear()
            self._faults.clear()

    def _intercept(self, method: str, path: str) -> Answer | None:
        with self._lock:
            self._requests.append((method, path))
            fault = self._take_fault(path)
        if fault is None:
            return None
        return Answer(fault.status, {"error_code": fault.error_code, "message": fault.message})

    def _take_fault(self, path: str) -> _Fault | None:
        for fault in self._faults:
            if fault.path is None or path.startswith(fault.path):
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self._faults.remove(fault)
                return fault
        return None
