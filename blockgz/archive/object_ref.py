"""A data object of one topic-partition as its key names it: :class:`ObjectRef`.

Key layouts (:mod:`blockgz.archive.layout`, :mod:`blockgz.archive.deviantart`) parse keys into
it; the readers plan, seek and verify with it. It imports nothing of the archive.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from blockgz.written.files import WrittenFile


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """A data object of one topic-partition, known from its key (and a listing's size)."""

    key: str
    topic: str
    partition: int
    start_offset: int
    extension: str
    directory: str = ""
    size: int = -1
    has_index: bool = False
    #: The key of its index sidecar, when a listing or manifest found it (hidden or legacy name).
    index_key: str | None = None
    #: The ``.keys``/``.headers`` objects beside a value object (set by readers that list them).
    companions: tuple[ObjectRef, ...] = ()
    #: The last offset it holds, when known without reading it (from the export's catalog).
    last_offset: int | None = None
    #: The range of its records' Kafka timestamps (epoch ms), when the catalog knows it.
    min_timestamp: int | None = None
    max_timestamp: int | None = None
    #: The ``format.bytearray.extension`` of the layout that named it (see :attr:`format`).
    bytearray_extension: str = ""
    #: The converter whose output it holds, as its manifest entry recorded it
    #: (:attr:`blockgz.written.files.WrittenFile.converter`); ``None``: not known.
    converter: str | None = None
    #: The manifest entry that committed it (size, CRC-32, its sidecar's size and CRC-32,
    #: identity), which readers check what they fetch against; ``None``: found by a listing.
    committed: WrittenFile | None = field(default=None, compare=False, repr=False)

    @property
    def compressed(self) -> bool:
        """Whether its extension ends with a compression suffix (``.gz``, ``.zst``)."""
        from blockgz.blocks.codecs.families import codec_for_key

        return codec_for_key("." + self.extension) is not None

    @property
    def role(self) -> str:
        """``value``, or ``keys`` / ``headers`` / ``timestamps`` for ``…+0000000042.keys.json``
        and the like.

        >>> ObjectRef("t+0+0000000042.keys.avro", "t", 0, 42, "keys.avro").role
        'keys'
        """
        head = self.extension.split(".", 1)[0]
        return head if head in ("keys", "headers", "timestamps") else "value"

    @property
    def format(self) -> str | None:
        """The name of the format its extension names (``json``, ``avro``; ``bytearray`` for
        ``.bin`` and the layout's ``format.bytearray.extension``), or ``None`` when no
        registered format names it: such an object is not read as records of any format
        (readers report it: :func:`blockgz.formats.by_name.format_of`).

        >>> [ObjectRef(f"t+0+0000000042.{ext}", "t", 0, 42, ext).format
        ...  for ext in ("json.gz", "keys.bin", "avro", "txt")]
        ['json', 'bytearray', 'avro', None]
        """
        from blockgz.formats.by_name import format_of_extension

        fmt = format_of_extension(self.extension, self.bytearray_extension)
        return None if fmt is None else fmt.name

    @property
    def is_avro(self) -> bool:
        """A value object of a format that compresses inside and has a sidecar (an Avro
        container file: its blocks are indexed as a block-GZIP object's are)."""
        from blockgz.formats.by_name import format_of_extension

        fmt = format_of_extension(self.extension)
        return (
            self.role == "value"
            and fmt is not None
            and fmt.compresses_inside
            and not fmt.indexes_itself
        )

    @property
    def indexes_itself(self) -> bool:
        """A value object that carries its own index (a Parquet file's footer), read from
        the object instead of a sidecar.

        >>> ObjectRef("t+0+0000000042.snappy.parquet", "t", 0, 42, "snappy.parquet").indexes_itself
        True
        """
        from blockgz.formats.by_name import format_of_extension

        fmt = format_of_extension(self.extension)
        return self.role == "value" and fmt is not None and fmt.indexes_itself

    @property
    def seekable(self) -> bool:
        """Whether the format can have an index sidecar (block-GZIP or Avro) or carries its
        own (Parquet)."""
        return self.compressed or self.is_avro or self.indexes_itself
