"""The place of a value file the sink never writes: :class:`NoValueFile`.

The writers of the objects the sink does write live with the formats
(:mod:`blockgz.formats.output`: framed records, :mod:`blockgz.formats.avro.writer`: Avro
container files); each format opens its own (:meth:`blockgz.formats.base.Format.open_writer`).
"""

from __future__ import annotations

from blockgz.formats.output import OutputObject


class NoValueFile(OutputObject):
    """The place of a value file that is never written: with ``behavior.on.null.values=write``
    and ``store.kafka.keys``, Confluent keeps a tombstone's key (and headers) in the files
    beside it under ``tombstone.encoded.partition`` and writes no value file. It counts the
    records (``flush.size`` rotates on them) and gives the companions their names.

    >>> place = NoValueFile("t/tombstone/t+0+0000000007.json", "t", 0, "tombstone")
    >>> place.write(None, 7); place.write(None, 9)
    >>> place.records, place.close()
    (2, None)
    """

    uncompressed_size = 0

    def write(self, data: object, offset: int, timestamp: int | None = None) -> None:
        self._count(offset, offset, 1)

    def close(self) -> None:
        """Nothing to finish: there is no object."""

    def abort(self) -> None:
        """Nothing to drop."""


__all__ = ["NoValueFile"]
