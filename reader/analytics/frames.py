"""What an :class:`~blockgz.reader.reading.archive.Archive` offers analytics code: whole topics,
windows,
Arrow tables and pandas DataFrames (a mixin of ``Archive``; it reads through its seek).
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from blockgz.blocks.decode import Record
from blockgz.errors import ConfigError, OffsetNotFoundError
from blockgz.times import epoch_ms
from blockgz.written.files import times_overlap

if TYPE_CHECKING:
    from blockgz.archive.layout import KeyLayout
    from blockgz.archive.object_ref import ObjectRef
    from blockgz.store import ObjectStore

#: A time: ISO-8601 text, a ``datetime`` (naive: UTC) or epoch ms (see :mod:`blockgz.times`).
Time = int | str | dt.datetime

_PAST_ANY_OFFSET = 2**63 - 1


class _Partitions(Protocol):
    """What analytics asks of an archive's catalogs (a
    :class:`~blockgz.reader.reading.catalog_source.CatalogSource`)."""

    def partitions(self) -> set[tuple[str, int]]: ...


class _Locator(Protocol):
    """What analytics asks of an archive's locator (the
    :class:`~blockgz.reader.reading.locate.ObjectLocator` of ``Archive``, a layer up: named
    here by what it does, so analytics does not import the reading package)."""

    def catalog_source(self) -> _Partitions | None: ...

    def relocate(self) -> bool: ...

    def learn_layout(self) -> bool: ...


class ArchiveAnalytics:
    """Topics, partitions and records of an archive, and its ranges as tables."""

    if TYPE_CHECKING:  # what Archive, the one class this mixes into, gives it
        locator: _Locator

        @property
        def store(self) -> ObjectStore: ...

        @property
        def prefix(self) -> str: ...

        @property
        def layout(self) -> KeyLayout: ...

        def objects(self, topic: str, partition: int) -> list[ObjectRef]: ...

        def seek_objects(
            self, topic: str, partition: int, offset: int
        ) -> tuple[list[ObjectRef], int]: ...

        def nothing_found(self, topic: str | None = None, partition: int | None = None) -> Any: ...

        def avro_schema(self, ref: ObjectRef) -> str: ...

        def seek_blocks(
            self,
            topic: str,
            partition: int,
            offset: int,
            count: int | None = None,
            *,
            times: tuple[int | None, int | None] | None = None,
            timestamps: bool = False,
        ) -> Iterator[list[Record]]: ...

    def topics(self) -> list[str]:
        """The topics the archive holds (from the catalog and the topics directory)."""
        found: set[str] = set()
        source = self.locator.catalog_source()
        if source is not None:
            found = {t for t, _ in source.partitions()}
        root = self.layout.topics_directory(self.prefix)
        if root is not None:
            found |= {d[len(root) :].rstrip("/") for d in self.store.list_prefixes(root)}
        if not found and (self.locator.relocate() or self.locator.learn_layout()):
            return self.topics()
        return sorted(found)

    def partitions(self, topic: str) -> list[int]:
        """The partitions of ``topic`` the archive holds (from the catalog, else the listing
        of the topic's directory)."""
        source = self.locator.catalog_source()
        found: set[int] = set()
        if source is not None:
            found = {p for t, p in source.partitions() if t == topic}
        if not found:
            for directory in self.store.list_prefixes(self.layout.topic_prefix(self.prefix, topic)):
                partition = self.layout.partition_of_directory(directory)
                if partition is not None:
                    found.add(partition)
        if not found and (self.locator.relocate() or self.locator.learn_layout()):
            return self.partitions(topic)
        return sorted(found)

    def records(
        self,
        topic: str,
        partitions: Iterable[int] | None = None,
        *,
        start: int | None = None,
        end: int | None = None,
        from_time: Time | None = None,
        to_time: Time | None = None,
    ) -> Iterator[tuple[int, Record]]:
        """``(partition, record)`` for every archived record of ``topic`` (or of the given
        ``partitions``), partition by partition in offset order, with ``start <= offset <
        end`` and ``from_time <= timestamp < to_time`` (needs an archive that kept
        timestamps: ``store.kafka.timestamps``, on by default, or ``format.json.envelope``).
        A time is ISO-8601 text (``"2025-11-20T01:00:00Z"``, or with an offset), a
        ``datetime`` or epoch ms; without a zone it is UTC; anything else is a
        :class:`~blockgz.errors.ConfigError`. Blocks are fetched ``prefetch`` ahead, so
        memory stays bounded whatever the size of the topic.
        With a time window, objects whose time range (from the export's catalog,
        ``committed=true``) and blocks whose time range (from their index) lies outside it are
        not read.

        >>> import tempfile
        >>> from reader import open_archive
        >>> with open_archive(tempfile.mkdtemp()) as archive:
        ...     list(archive.records("t", [], from_time="2025-11-20T01:00:00Z"))
        []
        """
        blocks = self.record_blocks(  # a bad time raises here
            topic, partitions, start=start, end=end, from_time=from_time, to_time=to_time
        )
        return ((partition, record) for partition, block in blocks for record in block)

    def record_blocks(
        self,
        topic: str,
        partitions: Iterable[int] | None = None,
        *,
        start: int | None = None,
        end: int | None = None,
        from_time: Time | None = None,
        to_time: Time | None = None,
    ) -> Iterator[tuple[int, list[Record]]]:
        """:meth:`records` a block at a time: ``(partition, records)`` with the records of
        one block inside the window (never an empty list). For code that handles millions
        of records (replay), where a list per block costs less than a step per record."""
        low, high = epoch_ms(from_time, name="from_time"), epoch_ms(to_time, name="to_time")
        return self._record_blocks(topic, partitions, start, end, low, high)

    def _record_blocks(
        self,
        topic: str,
        partitions: Iterable[int] | None,
        start: int | None,
        end: int | None,
        from_time: int | None,
        to_time: int | None,
    ) -> Iterator[tuple[int, list[Record]]]:
        timed = from_time is not None or to_time is not None
        for partition in self.partitions(topic) if partitions is None else partitions:
            begin = self.first_offset(topic, partition)
            if start is not None:
                begin = max(begin, start)
            stop = end
            stamps = None
            if timed:
                window = self.offsets_in_time(topic, partition, from_time, to_time)
                if window is None:
                    continue
                begin = max(begin, window[0])
                if window[1] is not None:  # None: some object's time range is unknown
                    stop = window[1] if stop is None else min(stop, window[1])
                stamps = (from_time, None if to_time is None else to_time - 1)
            try:
                blocks = self.seek_blocks(topic, partition, begin, times=stamps, timestamps=True)
                head = next(blocks)  # an offset past the end raises here
            except OffsetNotFoundError:
                continue
            for block in itertools.chain([head], blocks):
                ended = stop is not None and block[-1].offset >= stop
                if stop is not None and ended:
                    block = [r for r in block if r.offset < stop]
                if timed:
                    block = _stamped_within(block, from_time, to_time, f"{topic}/{partition}")
                if block:
                    yield partition, block
                if ended:
                    break

    def offsets_in_time(
        self, topic: str, partition: int, from_time: Time | None, to_time: Time | None
    ) -> tuple[int, int | None] | None:
        """``(first, end)``: the offsets outside which no record stamped ``from_time <= t <
        to_time`` can be, by the objects' time ranges; ``(0, None)`` when some object's range
        is unknown; ``None`` when no object can hold the window. Times as for :meth:`records`."""
        from_time = epoch_ms(from_time, name="from_time")
        to_time = epoch_ms(to_time, name="to_time")
        refs = self.objects(topic, partition)
        # (first, last, min time, max time) of each object whose range and times are known
        known = [
            (r.start_offset, r.last_offset, r.min_timestamp, r.max_timestamp)
            for r in refs
            if r.min_timestamp is not None
            and r.max_timestamp is not None
            and r.last_offset is not None
        ]
        if len(known) < len(refs):
            return 0, None
        high = None if to_time is None else to_time - 1
        inside = [
            (first, last)
            for first, last, low, top in known
            if times_overlap(low, top, from_time, high)
        ]
        if not inside:
            return None
        return min(first for first, _ in inside), max(last for _, last in inside) + 1

    def first_offset(self, topic: str, partition: int) -> int:
        """The partition's first archived offset (from the catalog or one listing)."""
        refs, first = self.seek_objects(topic, partition, _PAST_ANY_OFFSET)
        if not refs and first == _PAST_ANY_OFFSET:
            raise self.nothing_found(topic, partition)
        return first

    def read_arrow(
        self, topic: str, partition: int, start: int | None = None, end: int | None = None
    ) -> Any:
        """The records with ``start <= offset < end`` as a ``pyarrow.Table`` of Kafka's
        columns (see :mod:`blockgz.reader.analytics.tables`). When the partition's objects are
        Avro, the
        values are columns, one per field of the record schema, read into the newest writer schema
        (that of the object with the highest start offset; older values get the defaults of
        fields added since): see :func:`blockgz.reader.analytics.tables.avro_table_of`."""
        from blockgz.reader.analytics.tables import avro_table_of, table_of

        refs = self.objects(topic, partition)
        records = (r for _, r in self.records(topic, [partition], start=start, end=end))
        if refs and all(r.is_avro for r in refs):
            schema = self.avro_schema(max(refs, key=lambda r: r.start_offset))
            try:
                return avro_table_of(topic, partition, records, schema)
            except ConfigError:  # a union of several types: no Arrow type, JSON text it is
                records = (r for _, r in self.records(topic, [partition], start=start, end=end))
        return table_of(topic, partition, records)

    def to_pandas(
        self, topic: str, partition: int, start: int | None = None, end: int | None = None
    ) -> Any:
        """:meth:`read_arrow` as a pandas DataFrame (Avro values as columns, nested records
        as dicts)."""
        return self.read_arrow(topic, partition, start, end).to_pandas()


def _stamped_within(
    block: list[Record], from_time: int | None, to_time: int | None, where: str
) -> list[Record]:
    """The records of ``block`` with ``from_time <= timestamp < to_time``."""
    if any(r.timestamp is None for r in block):
        raise ConfigError(
            f"{where}: the archive kept no record timestamps, so a time window cannot be "
            "applied (exports keep them with store.kafka.timestamps=true, the default, or "
            "format.json.envelope=true); give offsets instead"
        )
    low = -_PAST_ANY_OFFSET if from_time is None else from_time
    high = _PAST_ANY_OFFSET if to_time is None else to_time
    return [r for r in block if low <= r.timestamp < high]  # type: ignore[operator]
