"""Retry S3 calls: botocore decides *what* is retryable, we decide *how long* to wait.

botocore's standard retry mode classifies errors well (5xx, throttling codes such as
``SlowDown``, connection resets) but its backoff is fixed (base 1 s, cap 20 s).
Confluent's S3 sink uses ``s3.retry.backoff.ms`` as the base of an exponential
full-jitter backoff capped at one day, with ``s3.part.retries`` total attempts, so
botocore's own retries are switched off and this wrapper applies that policy.

    >>> delays = backoff_delays(attempts=4, base_ms=200, rng=lambda: 1.0)
    >>> [round(d, 3) for d in delays]
    [0.2, 0.4, 0.8]
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import TypeVar

from botocore.exceptions import ClientError, SSLError
from botocore.retries.standard import (
    OrRetryChecker,
    RetryContext,
    ThrottledRetryableChecker,
    TransientRetryableChecker,
)

from blockgz.store.request_stats import REQUESTS

MAX_BACKOFF_S = 24 * 3600.0  # Confluent's S3_RETRY_MAX_BACKOFF_TIME_MS: one day
log = logging.getLogger("blockgz.store")
T = TypeVar("T")
_CHECKER = OrRetryChecker([TransientRetryableChecker(), ThrottledRetryableChecker()])


def is_retryable(exc: BaseException) -> bool:
    """True for errors botocore's standard mode would retry (5xx, throttling, resets), but
    not a TLS certificate that fails to verify: botocore counts it as a connection error, yet
    asking again gets the same certificate.

    >>> is_retryable(SSLError(endpoint_url="https://s3", error="certificate verify failed"))
    False
    """
    if isinstance(exc, SSLError):
        return False
    if isinstance(exc, ClientError):
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        context = RetryContext(
            attempt_number=1,
            parsed_response=exc.response,
            http_response=SimpleNamespace(status_code=status) if status else None,
            caught_exception=None,
        )
    else:
        context = RetryContext(attempt_number=1, caught_exception=exc)
    return bool(_CHECKER.is_retryable(context))


def backoff_delays(
    *, attempts: int, base_ms: int, rng: Callable[[], float] = random.random
) -> list[float]:
    """Seconds to wait before attempts 2..N: full jitter over ``base * 2**n``, capped at a day."""
    return [min(MAX_BACKOFF_S, base_ms / 1000 * 2**n) * rng() for n in range(attempts - 1)]


def call_with_retries(
    fn: Callable[[], T],
    *,
    attempts: int,
    base_ms: int,
    what: str,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``fn`` up to ``attempts`` times, sleeping a full-jitter backoff between tries."""
    delays = backoff_delays(attempts=attempts, base_ms=base_ms)
    for attempt in range(attempts):
        try:
            return fn()
        except Exception as exc:
            if attempt == attempts - 1 or not is_retryable(exc):
                raise
            REQUESTS.retry(getattr(exc, "operation_name", None))
            log.warning(
                "%s failed (%s), attempt %d of %d; retrying in %.3fs",
                what,
                _describe(exc),
                attempt + 1,
                attempts,
                delays[attempt],
            )
            sleep(delays[attempt])
    raise AssertionError("unreachable")  # pragma: no cover


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error", {})
        return f"{error.get('Code')}: {error.get('Message')}"
    return f"{type(exc).__name__}: {exc}"
