"""A chain compiled for one topic's schemaless values: plain functions over dicts, no records.

Most records of a topic take the same way through a chain: a ``RegexRouter`` gives every record
of a topic the same new topic, a ``TopicNameMatches`` predicate the same answer, and a value
transform such as ``InsertField$Value`` or ``ReplaceField$Value`` does the same edit on every
schemaless map. :meth:`Chain.fused <blockgz.sink.transforms.chain.Chain.fused>` works that out
once per topic and returns a :class:`FusedPlan`: the topic the records end in and the value
kernels to run, in order. The write path then runs the kernels on each parsed value in a tight
loop, with no :class:`~blockgz.sink.transforms.connect.record.Record` per record.

A chain fuses when each of its steps, for the topic, is

* skipped or run for every record: no predicate, ``TopicNameMatches`` (its answer is the
  topic's), or ``RecordIsTombstone`` in a chain with a kernel (a kernel takes only maps, so
  the answer for a record the fused way finishes is no);
* a router that reads and writes only the topic (``topic_only``), or a transform with a
  ``value_kernel`` (the ``$Value`` side of ``InsertField`` and ``ReplaceField``).

Anything else (a key or header transform, ``Filter``, a ``HasHeaderKey`` predicate, a
``TimestampRouter``) makes :meth:`~blockgz.sink.transforms.chain.Chain.fused` answer ``None``:
then every record goes through :meth:`~blockgz.sink.transforms.chain.Chain.apply`.

A kernel is ``kernel(value, partition, offset, timestamp) -> value``: it takes a schemaless,
non-null value that it may change in place (the caller owns it: freshly parsed, or a copy) and
returns the transformed value, as a new object or the same one changed. It raises
:class:`~blockgz.sink.transforms.connect.record.Rejected` where the transform would reject
the record; a caller then runs the record through the chain, which names the transform in its error.
A kernel that reads neither the offset nor the timestamp says so with ``reads_record = False``
(its caller may then pass ``None`` for both).

>>> from blockgz.sink.transforms.chain import build_chain
>>> chain = build_chain({"transforms": "add,route",
...     "transforms.add.type": "org.apache.kafka.connect.transforms.InsertField$Value",
...     "transforms.add.static.field": "dc", "transforms.add.static.value": "eu",
...     "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
...     "transforms.route.regex": "(.*)", "transforms.route.replacement": "x-$1"})
>>> plan = chain.fused("t")
>>> plan.topic, plan.run({"a": 1}, 0, 5, None)
('x-t', {'a': 1, 'dc': 'eu'})
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import orjson

#: A compiled value transform: ``(value, partition, offset, timestamp) -> value``.
Kernel = Callable[[Any, int, "int | None", "int | None"], Any]


@dataclass(frozen=True)
class FusedPlan:
    """What a chain does to one topic's records with a schemaless, non-null value."""

    #: The topic the records end in (routers applied).
    topic: str
    #: The value kernels, in the chain's order (none: the value is left as it is).
    kernels: tuple[Kernel, ...] = ()

    @property
    def uses_record(self) -> bool:
        """Whether a kernel reads the record's offset or timestamp (a kernel says it does not
        with ``reads_record = False``)."""
        return any(getattr(kernel, "reads_record", True) for kernel in self.kernels)

    def run(self, value: Any, partition: int, offset: int | None, timestamp: int | None) -> Any:
        """The value after every kernel (``value`` is the caller's to change)."""
        for kernel in self.kernels:
            value = kernel(value, partition, offset, timestamp)
        return value

    def serialising(self) -> tuple[tuple[Kernel, ...], Serialiser]:
        """The kernels and the serialiser (:func:`dump_all`) for when only each value's JSON
        is wanted: a last kernel with a ``dumped = (kernel, serialiser)`` form leaves its last
        step (a rename) to the serialiser, which does it on the bytes."""
        dumped = getattr(self.kernels[-1], "dumped", None) if self.kernels else None
        if dumped is None:
            return self.kernels, dump_all
        return (*self.kernels[:-1], dumped[0]), dumped[1]


#: Values to their JSON, each as ``orjson.dumps`` writes it.
Serialiser = Callable[[list[Any]], list[bytes]]
_ELEMENTS = msgspec.json.Decoder(list[msgspec.Raw])


def dump_all(values: list[Any]) -> list[bytes]:
    """``[orjson.dumps(v) for v in values]``, at a third of the cost: one ``orjson.dumps`` of
    the list, cut into its elements (:func:`split_list`). orjson gives each result of a
    ``dumps`` a 1 KiB buffer, and thousands of them alive at once cost more in fresh memory
    than the serialising itself."""
    found = split_list(orjson.dumps(values))
    return [orjson.dumps(v) for v in values] if found is None else found


def split_list(data: bytes) -> list[bytes] | None:
    """The elements' JSON of a JSON list that orjson wrote (it writes a list as its
    elements' JSON joined by ``,``): msgspec finds each element's bytes without building
    it; ``None`` when it cannot (nested deeper than msgspec goes)."""
    try:
        return list(map(bytes, _ELEMENTS.decode(data)))
    except (msgspec.DecodeError, RecursionError):
        return None


def run_all(
    kernels: Sequence[Kernel],
    values: Sequence[Any],
    partition: int,
    offsets: Sequence[int | None],
    timestamps: Sequence[int | None],
) -> list[Any]:
    """The ``kernels`` on each of ``values`` (the caller's to change): one ``map`` per kernel,
    so the loop itself runs in C."""
    partitions = [partition] * len(values)
    for kernel in kernels:
        values = list(map(kernel, values, partitions, offsets, timestamps))
    return list(values)
