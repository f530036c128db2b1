"""S3 requests this process made, by operation and outcome, and the retries among them.

Every boto3 client blockgz makes (:func:`blockgz.store.s3_client.make_client`) reports each HTTP
request it sends through botocore's ``after-call`` / ``after-call-error`` events to
:data:`REQUESTS`; :func:`blockgz.store.retry.call_with_retries` adds a retry each time it tries
an operation again. A write task takes the difference over its run
(:meth:`RequestStats.snapshot` before, :meth:`RequestStats.since` after) and hands it to the
driver with its commit message, so the export's metrics count the requests of every executor.

Outcomes: ``ok`` (2xx and 3xx), ``client_error`` (4xx: a missing key probed on purpose is one),
``server_error`` (5xx: throttling, an overloaded server) and ``connection_error`` (no answer:
a reset, a timeout, a refused connection).

>>> stats = RequestStats()
>>> before = stats.snapshot()
>>> stats.request("PutObject", 200)
>>> stats.request("PutObject", 503)
>>> stats.retry("PutObject")
>>> stats.since(before)
{'PutObject': {'ok': 1, 'retries': 1, 'server_error': 1}}
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping
from typing import Any

#: ``{operation: {outcome or "retries": count}}``: what a task hands the driver.
RequestDigest = dict[str, dict[str, int]]

OUTCOMES = ("ok", "client_error", "server_error", "connection_error")
RETRIES = "retries"


def outcome_of(status: int | None) -> str:
    """The outcome of a request from its HTTP status (``None``: no answer came).

    >>> [outcome_of(s) for s in (200, 304, 404, 503, None)]
    ['ok', 'ok', 'client_error', 'server_error', 'connection_error']
    """
    if status is None:
        return "connection_error"
    if status >= 500:
        return "server_error"
    return "client_error" if status >= 400 else "ok"


class RequestStats:
    """Counts of S3 requests by ``(operation, outcome)``, thread-safe."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        self._last = threading.local()

    def request(self, operation: str, status: int | None) -> None:
        """Count one request; ``status`` is ``None`` when no answer came."""
        self._last.operation = operation
        with self._lock:
            self._counts[(operation, outcome_of(status))] += 1

    def retry(self, operation: str | None = None) -> None:
        """Count one retry of ``operation`` (default: this thread's last request's)."""
        operation = operation or getattr(self._last, "operation", None) or "unknown"
        with self._lock:
            self._counts[(operation, RETRIES)] += 1

    def snapshot(self) -> Counter[tuple[str, str]]:
        with self._lock:
            return Counter(self._counts)

    def since(self, before: Counter[tuple[str, str]]) -> RequestDigest:
        """What was counted after ``before`` (a :meth:`snapshot`), as a :data:`RequestDigest`."""
        digest: RequestDigest = {}
        for (operation, kind), n in sorted((self.snapshot() - before).items()):
            digest.setdefault(operation, {})[kind] = n
        return digest

    # -- botocore event handlers ----------------------------------------------------------------
    def after_call(self, http_response: Any = None, model: Any = None, **_: Any) -> None:
        status = getattr(http_response, "status_code", None)
        self.request(getattr(model, "name", "unknown"), status)

    def after_call_error(self, event_name: str = "", **_: Any) -> None:
        self.request(event_name.rsplit(".", 1)[-1] or "unknown", None)

    def watch(self, client: Any) -> Any:
        """Count the requests of a boto3 S3 ``client`` here; returns the client."""
        client.meta.events.register("after-call.s3", self.after_call)
        client.meta.events.register("after-call-error.s3", self.after_call_error)
        return client


def merge_digests(into: RequestDigest, more: Mapping[str, Mapping[str, int]]) -> RequestDigest:
    """Add ``more`` to ``into`` (in place) and return it.

    >>> merge_digests({"GetObject": {"ok": 2}}, {"GetObject": {"ok": 1, "retries": 1}})
    {'GetObject': {'ok': 3, 'retries': 1}}
    """
    for operation, kinds in more.items():
        mine = into.setdefault(operation, {})
        for kind, n in kinds.items():
            mine[kind] = mine.get(kind, 0) + int(n)
    return into


#: This process's S3 requests (every client from :func:`~blockgz.store.s3_client.make_client`).
REQUESTS = RequestStats()
