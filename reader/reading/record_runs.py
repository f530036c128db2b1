"""Records in lists ("runs"): the unit the archive's readers hand on, a block at a time.

A block read with its index is already one list; an object streamed without an index is cut
into lists of ``STREAM_RUN`` records, lazily. A list per block costs far less than a generator
step per record for callers that handle many records.

>>> from blockgz.blocks.decode import Record
>>> records = [Record(n, b"v%d" % n) for n in range(5)]
>>> [len(run) for run in runs_of([records[:2], iter(records[2:])])]
[2, 3]
>>> [r.offset for r in flattened(iter([records[:2], records[2:]]))]
[0, 1, 2, 3, 4]
>>> enveloped(records), enveloped([])
(False, False)
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator

from blockgz.blocks.decode import Record
from blockgz.blocks.envelope import ENVELOPE_START

#: Records per list when an object without an index is streamed (see ``seek_blocks``).
STREAM_RUN = 4096


def enveloped(records: list[Record]) -> bool:
    """Whether a block's records look like the export's envelope (its first one does)."""
    first = records[0].value if records else None
    return isinstance(first, (bytes, bytearray)) and first.startswith(ENVELOPE_START)


def runs_of(blocks: Iterable[Iterable[Record]]) -> Iterator[list[Record]]:
    """Each block's records as a list (already one), or a stream in lists of ``STREAM_RUN``."""
    for records in blocks:
        if isinstance(records, list):
            yield records
        else:
            yield from in_runs(records)


def in_runs(records: Iterable[Record]) -> Iterator[list[Record]]:
    """Lists of up to ``STREAM_RUN`` records, in order (a stream stays lazy)."""
    it = iter(records)
    while run := list(itertools.islice(it, STREAM_RUN)):
        yield run


def flattened(blocks: Iterator[list[Record]]) -> Iterator[Record]:
    """The records of the lists, one at a time."""
    return itertools.chain.from_iterable(blocks)
