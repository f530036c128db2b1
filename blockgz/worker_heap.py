"""Keep Python's cyclic garbage collector off the long-lived heap of a Spark Python worker.

PySpark's daemon calls ``gc.collect()`` after every task of a reused worker, and the
interpreter runs full collections of its own while a task allocates. Each walks every tracked
object of the worker: pyarrow's, pandas' (pyarrow imports it), botocore's service models, the
modules of blockgz and confluent-kafka, ~140,000 objects and ~40-70 ms per collection here. In
py-spy profiles of the export's Python workers that was about a third of their CPU.

:func:`settle` moves what exists at the start of a task into the permanent generation
(:func:`gc.freeze`), which collections skip. A reused worker starts each task right after the
daemon's collection, so what is frozen is what outlives tasks anyway (modules, the shared S3
client, caches); what the task allocates stays collectable. Objects frozen and freed later by
reference counting are freed as usual; only a cycle among them would wait for
:func:`gc.unfreeze`.

>>> import gc
>>> settle(); gc.get_freeze_count() > 0
True
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Freeze the objects that exist now out of the cyclic collector's way."""
    gc.freeze()
