"""A local server for a pytest fixture: started, or the test skipped with the reason it cannot
run here.

Every server class of :mod:`blockgz.local_servers` (and the testkit's own) says with
``unavailable_reason()`` why it cannot start on this machine (no Java, no ``weed`` binary),
and is a context manager that stops it. The fixtures of ``tests/conftest.py`` and
``benchmarks/conftest.py`` all did the same three steps with it; :func:`running` is them once.
:func:`fresh_bucket` is the other step they repeated: a fresh bucket named after the test.

>>> class Stub:
...     unavailable_reason = staticmethod(lambda: None)
...     def __enter__(self): return "up"
...     def __exit__(self, *exc): print("stopped")
>>> servers = running(Stub)
>>> next(servers)
'up'
>>> next(servers, None)
stopped
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import pytest


def running(server_class: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
    """``server_class(*args, **kwargs)`` started, for a fixture to ``yield from``, and stopped
    when the fixture ends; the test is skipped with ``server_class.unavailable_reason()`` when
    it gives one."""
    reason = server_class.unavailable_reason()
    if reason:
        pytest.skip(reason)
    with server_class(*args, **kwargs) as server:
        yield server


def fresh_bucket(server: Any, request: Any, prefix: str = "t-", digits: int = 20) -> str:
    """A new bucket on ``server`` for the test of ``request``: ``prefix`` and ``digits`` hex
    digits of the SHA-1 of its node id (stable across runs, apart across tests).

    >>> from types import SimpleNamespace as N
    >>> made = []
    >>> server = N(client=lambda: N(create_bucket=lambda Bucket: made.append(Bucket)))
    >>> fresh_bucket(server, N(node=N(nodeid="tests/x.py::test_a")), "c-", 8) == made[0]
    True
    >>> made[0][:2], len(made[0])
    ('c-', 10)
    """
    name = prefix + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:digits]
    server.client().create_bucket(Bucket=name)
    return name
