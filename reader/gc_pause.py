"""Fewer garbage collections while a replay moves millions of short-lived records.

Each record read back is a tuple the cyclic collector tracks; at CPython 3.11's thresholds a
replay of a million records runs thousands of collections, and the older generations hold
every module object the process imported, which each full pass walks again: about a fifth
of the CPU a restore spends reading (measured in ``benchmarks/test_restore_bench.py``).
:func:`fewer_collections` moves what exists so far out of the collector's sight
(``gc.freeze()``) and collects the youngest generation less often; a record holds no
reference cycle, so nothing waits longer to be freed than it would have. Both are undone
when the last user leaves (a counter: replays may run in threads of one process).

>>> import gc
>>> before = gc.get_threshold()
>>> with fewer_collections():
...     gc.get_threshold()[0] >= 50_000
True
>>> gc.get_threshold() == before
True
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

#: The youngest generation's threshold meanwhile (CPython's default: 700 allocations).
YOUNG_THRESHOLD = 50_000

_lock = threading.Lock()
_users = 0
_saved: tuple[int, ...] = ()


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Collect less often inside the block; the collector's settings come back after it."""
    global _users, _saved
    with _lock:
        if _users == 0:
            _saved = gc.get_threshold()
            gc.freeze()
            gc.set_threshold(max(YOUNG_THRESHOLD, _saved[0]), *_saved[1:])
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0:
                gc.set_threshold(*_saved)
                gc.unfreeze()
