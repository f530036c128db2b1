"""What every data format of an export is: :class:`Format`, and the encoders it hands out.

A format (``format.class``; also ``keys.format.class`` and ``headers.format.class`` for the
``.keys``/``.headers`` files beside a value file) knows its names and Confluent's class name,
its extension, what it can hold, how the writer turns a record into its stored bytes
(:meth:`Format.encoder`), which object writer writes it (:meth:`Format.open_writer`), how a
keys/headers entry is stored and read back, and what readers make of its objects. The writer
(``sink``) and the readers (``reader``, ``blockgz seek``) only ask it; none of them compares
format names. Formats are found through :mod:`blockgz.formats.by_name`.

Settings come in as any object with the sink config's attributes (:class:`FormatSettings`), so
this package knows nothing of the sink.

>>> from blockgz.formats.by_name import FORMATS
>>> fmt = FORMATS.get("io.confluent.connect.s3.format.json.JsonFormat")
>>> fmt.name, fmt.default_extension, fmt.compresses_inside
('json', '.json', False)
>>> fmt.decode_entry(b'"user-1"')
b'user-1'
"""

from __future__ import annotations

import base64
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import IO, TYPE_CHECKING, Any, ClassVar, Protocol

from blockgz.blocks.framing import NEWLINE, Framing
from blockgz.errors import ConfigError

if TYPE_CHECKING:
    from blockgz.formats.compression import CompressionType
    from blockgz.formats.output import OutputObject
    from blockgz.store.base import ObjectStore

#: Reads the values of a container object's records (an Avro file's) from its bytes, a readable
#: file, in order. Which one an object takes, its format says
#: (:meth:`Format.stream_decoder`); ``None`` where one is asked for: framed
#: records.
StreamDecoder = Callable[[IO[bytes]], Iterable[Any]]

#: The companion files' roles (``t+0+0000000042.keys.json`` ...).
KEYS = "keys"
HEADERS = "headers"
#: The ``.timestamps`` companion: each record's Kafka timestamp and timestamp type
#: (``store.kafka.timestamps``, on by default), so every archive can be restored in time.
TIMESTAMPS = "timestamps"
#: Every companion role, as it heads a companion's extension (``keys.avro``).
COMPANION_ROLES = (KEYS, HEADERS, TIMESTAMPS)
#: The role of the value files themselves.
VALUE = "value"


class FormatSettings(Protocol):
    """The sink settings a format reads (``blockgz.sink.write.config.SinkSettings`` has them
    all)."""

    # Read-only (properties): a frozen dataclass such as SinkSettings qualifies.
    @property
    def compression(self) -> str: ...

    @property
    def compression_level(self) -> int: ...

    @property
    def block_size(self) -> int: ...

    @property
    def block_records(self) -> int | None: ...

    @property
    def bytearray_extension(self) -> str: ...

    @property
    def bytearray_framing(self) -> str: ...

    @property
    def json_envelope(self) -> bool: ...

    @property
    def unwrap_payload(self) -> bool: ...

    @property
    def json_decimal_format(self) -> str: ...

    @property
    def avro_codec(self) -> str: ...

    @property
    def avro_index(self) -> bool: ...

    @property
    def parquet_codec(self) -> str: ...

    @property
    def parquet_block_size(self) -> int: ...

    @property
    def connect_meta_data(self) -> bool: ...

    @property
    def null_behavior(self) -> str: ...

    @property
    def store_keys(self) -> bool: ...

    @property
    def framing(self) -> Framing: ...

    @property
    def decodes_values(self) -> bool: ...

    @property
    def compression_type(self) -> CompressionType: ...


class RecordEncoder(ABC):
    """Turns a record into the bytes stored for it; ``None`` values are tombstones.

    A record is any object with Kafka's fields (``topic``, ``partition``, ``offset``,
    ``timestamp_ms``, ``key``, ``value``, ``headers``), ``json()`` (the value parsed or
    decoded), ``schema`` and ``fail(message)`` (an error naming the record), as
    ``blockgz.sink.records.KafkaRecord`` has.
    """

    #: Whether :meth:`passes_through` can ever say yes (else runs are not even tried).
    may_pass_through = False

    @abstractmethod
    def encode(self, record: Any) -> Any: ...

    @abstractmethod
    def encode_tombstone(self, record: Any) -> bytes:
        """What ``behavior.on.null.values=write`` stores for a record whose value is null."""

    def rejected(self, values: list[bytes]) -> list[int]:
        """The indexes of the values that cannot be stored as they are (in one pass): the
        batch path writes the runs between them, each of them goes record by record."""
        return list(range(len(values)))

    def passes_through(self, values: list[bytes], framed: bytes) -> bool:
        """Whether each of ``values`` (none null) is stored exactly as it is.

        ``framed`` is the values joined and terminated by the separator. ``True`` lets the
        sink write a whole batch at once; ``False`` sends it through :meth:`encode` record by
        record, which also names the record behind any error. Encoders that change values
        keep this default.
        """
        return False


class Format(ABC):
    """One data format: its names, extension, capabilities, writer parts and reader parts.

    Subclass it, set the class attributes, implement :meth:`encoder`, and register an instance
    with :data:`blockgz.formats.by_name.FORMATS` (see ``tests/unit/test_formats.py`` for a
    format made in a test). The defaults describe a format of framed records (one record after
    another, separated or length-prefixed, compressed as ``s3.compression.type`` says).
    """

    #: The short name (``format.class=json``) and the names it is also known by (Confluent's
    #: class names first).
    name: ClassVar[str]
    aliases: ClassVar[tuple[str, ...]] = ()
    #: The extension of its objects, before any ``.gz`` (``.json``).
    default_extension: ClassVar[str]
    #: Whether it compresses inside the object (Avro): ``s3.compression.type`` must be
    #: ``none``, no ``.gz`` is added, and ``s3.compression.block.size/.records`` size its blocks.
    compresses_inside: ClassVar[bool] = False
    #: Whether values are stored as the bytes Kafka holds (no converter decodes them).
    stores_value_bytes: ClassVar[bool] = False
    #: Whether values need a schema (a converter that gives one).
    needs_value_schema: ClassVar[bool] = False
    #: Whether its values are JSON text (``blockgz seek --output json`` prints them as JSON).
    json_text: ClassVar[bool] = False
    #: The roles it can hold beside a value file (``keys``, ``headers``).
    companion_roles: ClassVar[frozenset[str]] = frozenset({KEYS, HEADERS})
    #: Whether its value files hold each record's Kafka timestamp themselves (Parquet's
    #: ``__kafka_timestamp`` column): no ``.timestamps`` file is written beside them.
    keeps_timestamps: ClassVar[bool] = False
    #: Options that apply to this format alone (given with another format, they are refused).
    own_options: ClassVar[frozenset[str]] = frozenset()
    #: Whether records are framed by ``format.bytearray.framing``/``.separator`` (else by a
    #: newline, or by the format itself).
    takes_framing: ClassVar[bool] = False
    #: Whether the sink's batch path can lay out a run of keys/headers entries in it.
    writes_companion_runs: ClassVar[bool] = True
    #: Whether each object holds records of one schema (a new schema starts a new object).
    one_schema_per_object: ClassVar[bool] = False
    #: Whether its objects carry their own index (a Parquet footer's row groups): readers ask
    #: :meth:`read_index` instead of looking for an ``.index.json`` sidecar.
    indexes_itself: ClassVar[bool] = False

    # -- names and extensions ----------------------------------------------------------------
    def extension(self, settings: FormatSettings) -> str:
        """The extension of its objects under ``settings``, before any ``.gz``."""
        return self.default_extension

    def extensions(self, bytearray_extension: str = "") -> tuple[str, ...]:
        """Every extension (no leading dot, before any ``.gz``) its objects may have."""
        return (self.default_extension.lstrip("."),)

    def object_extension(self, settings: FormatSettings) -> str:
        """The whole extension of an object: :meth:`extension` plus the compression's suffix.

        >>> from blockgz.formats.by_name import FORMATS
        >>> class S: bytearray_extension, compression_type = ".bin", None
        >>> FORMATS.get("avro").object_extension(S())
        '.avro'
        """
        if self.compresses_inside:
            return self.extension(settings)
        return self.extension(settings) + settings.compression_type.suffix

    def __repr__(self) -> str:
        return f"<format {self.name}>"

    # -- checks ------------------------------------------------------------------------------
    def check(self, settings: Any, options: Any) -> None:  # noqa: B027 - optional
        """Refuse ``settings`` (read from ``options``, a :class:`~blockgz.options.Options`) that
        this format cannot honour. The default checks nothing."""

    # -- the writer --------------------------------------------------------------------------
    def framing(self, settings: FormatSettings) -> Framing:
        """How its records sit in an object."""
        return settings.framing if self.takes_framing else NEWLINE

    @abstractmethod
    def encoder(self, settings: FormatSettings) -> RecordEncoder:
        """The value encoder of a sink with ``settings``."""

    def open_writer(
        self,
        store: ObjectStore,
        key: str,
        settings: FormatSettings,
        *,
        schema: Any = None,
        companion: bool = False,
        topic: str = "",
        partition: int = 0,
        encoded_partition: str = "",
    ) -> OutputObject:
        """A writer of one object of this format at ``key`` (``companion``: a keys or headers
        file). The default: framed records, compressed as ``s3.compression.type`` says."""
        from blockgz.formats.output import ObjectWriter

        writer = ObjectWriter(
            store,
            key,
            settings.compression_type,
            settings.compression_type.codec(settings.compression_level),
            framing=self.framing(settings),
            block_size=settings.block_size,
            block_records=settings.block_records,
            topic=topic,
            partition=partition,
            encoded_partition=encoded_partition,
        )
        if not companion:
            writer.schema = schema
        return writer

    # -- keys and headers files --------------------------------------------------------------
    def encode_key(self, record: Any, schema: Any, key: Any, *, decoded: bool, writer: Any) -> Any:
        """A keys file's entry for ``key`` (of ``schema``; ``decoded`` by a key converter)."""
        raise record.fail(f"keys.format.class={self.name} cannot hold keys")

    def encode_headers(self, record: Any, headers: Any) -> Any:
        """A headers file's entry for the record's ``headers`` (``None``: none)."""
        raise record.fail(f"headers.format.class={self.name} cannot hold headers")

    def encode_timestamp(self, timestamp: int, kind: int) -> Any:
        """A timestamps file's entry: Kafka's timestamp (epoch ms, ``-1``: none) and its type
        (Kafka's ids: ``0`` CreateTime, ``1`` LogAppendTime, ``-1`` none)."""
        raise NotImplementedError(f"timestamps.format.class={self.name} cannot hold timestamps")

    def encode_timestamp_column(self, stamps: Any, kinds: Any) -> tuple[Any, Any] | None:
        """A run's timestamps and types (int64 numpy arrays) laid out at once as ``(data,
        ends)``, or ``None`` to make them one by one (:meth:`encode_timestamp`)."""
        return None

    def encode_column(self, role: str, column: Any) -> tuple[Any, Any] | None:
        """A run's keys or headers (an Arrow column) laid out at once as ``(data, ends)``, or
        ``None`` to make them one by one (:meth:`column_entries`)."""
        return None

    def column_entries(self, role: str, entries: list[Any]) -> list[Any]:
        """A run's raw keys or headers (Python values) as this format's entries."""
        raise NotImplementedError(f"{self.name} cannot write {role} from a run")

    # -- the readers -------------------------------------------------------------------------
    def stream_decoder(self) -> StreamDecoder | None:
        """How a reader decodes an object of this format read whole (without its index):
        ``None`` for framed records (split by the framing, after any ``.gz`` is inflated),
        else a function from the object's bytes (a readable file) to its records' values, in
        order: a container format's own reader. The default: framed records.

        >>> from blockgz.formats.by_name import FORMATS
        >>> FORMATS.get("json").stream_decoder() is None
        True
        """
        return None

    def read_index(self, store: ObjectStore, key: str, size: int = -1) -> Any:
        """The index an object of a format that :attr:`indexes_itself` carries (a
        :class:`~blockgz.blocks.index.BlockIndex`), read from the object; ``size``: its size
        when known (``-1``: asked). Other formats have sidecars instead."""
        raise NotImplementedError(f"{self.name} objects have no index inside")

    def decode_entry(self, entry: Any) -> Any:
        """A keys/headers entry as stored -> Python (text to bytes; lists as they are)."""
        if isinstance(entry, str):  # an Avro "string" key
            return entry.encode()
        return entry

    def int_pair_block(
        self, data: bytes | bytearray, count: int
    ) -> tuple[list[int], list[int]] | None:
        """A block of ``count`` entries that are all pairs of ints (a timestamps file's), its
        uncompressed bytes ``data`` parsed at once into the first and the second numbers of
        each; ``None``: decode it entry by entry (this format has no faster way).

        >>> from blockgz.formats.by_name import FORMATS
        >>> FORMATS.get("avro").int_pair_block(b"", 0) is None
        True
        """
        return None

    def decode_entries(self, entries: list[Any]) -> list[Any]:
        """:meth:`decode_entry` of each of a block's entries (a format may do it faster).

        >>> from blockgz.formats.by_name import FORMATS
        >>> FORMATS.get("avro").decode_entries(["k", b"b", None])
        [b'k', b'b', None]
        """
        decode = self.decode_entry
        return [decode(e) for e in entries]


def require_schema_values(settings: Any, format_name: str) -> None:
    """Refuse a schema format (Avro, Parquet) whose values come without a schema, naming the
    converters that give one."""
    if not settings.value_converter.has_schema:
        raise ConfigError(
            f"format.class={format_name} needs values with a schema; set value.converter to "
            "io.confluent.connect.avro.AvroConverter (with "
            "value.converter.schema.registry.url), org.apache.kafka.connect.json."
            "JsonConverter (schemas.enable=true), StringConverter or ByteArrayConverter"
        )


def text_or_base64(data: bytes | None) -> Any:
    """Bytes as JSON: UTF-8 text when they decode, else ``{"base64": ...}`` (nothing lost).

    >>> text_or_base64(b"k"), text_or_base64(b"\\xff")
    ('k', {'base64': '/w=='})
    """
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def from_text(doc: Any) -> Any:
    """Text back to bytes, ``{"base64": ...}`` to its bytes; other JSON as it is.

    >>> from_text("k"), from_text({"base64": "/w=="}), from_text(3)
    (b'k', b'\\xff', 3)
    """
    if isinstance(doc, str):
        return doc.encode()
    if isinstance(doc, dict) and set(doc) == {"base64"}:
        return base64.b64decode(doc["base64"])
    return doc
