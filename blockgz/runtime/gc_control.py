"""Keep Python's cyclic garbage collector out of the way of blockgz's hot paths: both helpers
in one place, each with the reason it exists.

**Spark Python workers** (:func:`settle`). PySpark's daemon calls ``gc.collect()`` after every
task of a reused worker, and the interpreter runs full collections of its own while a task
allocates. Each walks every tracked object of the worker: pyarrow's, pandas' (pyarrow imports
it), botocore's service models, the modules of blockgz and confluent-kafka, ~140,000 objects
and ~40-70 ms per collection here. In py-spy profiles of the export's Python workers that was
about a third of their CPU. :func:`settle` moves what exists at the start of a task into the
permanent generation (:func:`gc.freeze`), which collections skip. A reused worker starts each
task right after the daemon's collection, so what is frozen is what outlives tasks anyway
(modules, the shared S3 client, caches); what the task allocates stays collectable. Objects
frozen and freed later by reference counting are freed as usual; only a cycle among them would
wait for :func:`gc.unfreeze`.

**Replays** (:func:`fewer_collections`). Each record read back is a tuple the cyclic collector
tracks; at CPython 3.11's thresholds a replay of a million records runs thousands of
collections, and the older generations hold every module object the process imported, which
each full pass walks again: about a fifth of the CPU a restore spends reading (measured in
``benchmarks/test_restore_bench.py``). :func:`fewer_collections` moves what exists so far out
of the collector's sight (``gc.freeze()``) and collects the youngest generation less often; a
record holds no reference cycle, so nothing waits longer to be freed than it would have. Both
are undone when the last user leaves (a counter: replays may run in threads of one process).

>>> import gc
>>> settle(); gc.get_freeze_count() > 0
True
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

#: The youngest generation's threshold inside :func:`fewer_collections` (CPython's default:
#: 700 allocations).
YOUNG_THRESHOLD = 50_000

_lock = threading.Lock()
_users = 0
_saved: tuple[int, ...] = ()


def settle() -> None:
    """Freeze the objects that exist now out of the cyclic collector's way (at the start of a
    Spark task)."""
    gc.freeze()


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
