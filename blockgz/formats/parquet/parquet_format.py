"""``format.class=parquet`` (Confluent's ``ParquetFormat``): Parquet files that seek by offset.

Values need a schema (a value converter that gives one: Avro with a registry, Connect JSON
with ``schemas.enable=true``, String, ByteArray); each file holds records of one schema (a
schema change rotates files as ``schema.compatibility`` says, as for Avro) and compresses
inside (``parquet.codec``, default ``snappy`` as in Confluent), so ``s3.compression.type``
stays ``none``. Extensions are Confluent's: ``.snappy.parquet``, ``.gz.parquet``,
``.zstd.parquet``, ``.lz4hadoop.parquet``, ``.lz4raw.parquet``, ``.br.parquet``, and
``.parquet`` for ``none``.

**Seekable without a sidecar.** Row groups are cut every ``parquet.block.size`` uncompressed
bytes (parquet-mr's name for the row group size; 4 MiB here, :data:`DEFAULT_ROW_GROUP_SIZE`)
or ``s3.compression.block.records`` rows, as blocks of the other formats are.
``s3.compression.block.size`` is refused with Parquet rather than read as a second name: a
row group wants larger than a block, since every seek also reads the footer, which grows
with the number of row groups.
Each row holds its offset in ``__kafka_offset`` and its Kafka time in ``__kafka_timestamp``
(:mod:`~blockgz.formats.parquet.schema`); their statistics in the footer say which offsets and
times each row group holds, so the footer is the index (:mod:`~blockgz.formats.parquet.read`):
a seek is a ranged read of the footer and one of the row group. Spark, pyarrow, pandas,
DuckDB and Athena read the files as they are (the two columns are ordinary columns).

**Keys and headers** go where Confluent puts them: ``store.kafka.keys`` /
``store.kafka.headers`` write ``.keys.*`` / ``.headers.*`` files beside each value file
(``keys.format.class``, Avro by default), not extra columns. That keeps a value file's
columns the value's schema (plus the two Kafka columns), so tables over the files do not
change when keys are stored, files written with and without keys read alike, and the
restore path reads keys the one way it reads them for every format. Parquet itself is not
offered for the keys/headers files (``keys.format.class=parquet`` is refused): a key or a
header list has no columns of its own worth a columnar file.

>>> fmt = ParquetFormat()
>>> fmt.compresses_inside, fmt.indexes_itself, fmt.one_schema_per_object
(True, True, True)
>>> from types import SimpleNamespace as Settings
>>> fmt.extension(Settings(parquet_codec="snappy")), fmt.extension(Settings(parquet_codec="none"))
('.snappy.parquet', '.parquet')
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from blockgz.blocks.index import BlockIndex
from blockgz.errors import ConfigError, MissingDependencyError
from blockgz.formats.base import (
    Format,
    FormatSettings,
    RecordEncoder,
    StreamDecoder,
    require_schema_values,
)

if TYPE_CHECKING:
    from blockgz.formats.output import OutputObject
    from blockgz.store.base import ObjectStore

#: ``parquet.codec`` -> the extension Confluent's ParquetFormat gives its files.
PARQUET_EXTENSIONS = {
    "none": ".parquet",
    "snappy": ".snappy.parquet",
    "gzip": ".gz.parquet",
    "lz4": ".lz4hadoop.parquet",
    "lz4_raw": ".lz4raw.parquet",
    "brotli": ".br.parquet",
    "zstd": ".zstd.parquet",
}
#: The ``parquet.codec`` values (Confluent's, less ``lzo``: pyarrow writes no LZO).
PARQUET_CODECS = tuple(PARQUET_EXTENSIONS)
#: ``parquet.block.size``: uncompressed (Arrow) bytes per row group. parquet-mr's default is
#: 128 MiB; a seek fetches one row group, and a 1 GiB object's footer (its index, read by
#: every seek) grows with the row groups: 4 MiB keeps both small (~2 MB compressed per row
#: group, a few hundred KiB of footer per GiB).
DEFAULT_ROW_GROUP_SIZE = 4 * 1024 * 1024


def need_pyarrow() -> None:
    """Raise :class:`~blockgz.errors.MissingDependencyError` unless pyarrow can be imported
    (it writes and reads Parquet; it comes with the ``spark`` extra)."""
    try:
        import pyarrow.parquet  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            "Parquet objects are written and read with pyarrow: pip install 'blockgz[spark]' "
            "(or pyarrow)"
        ) from exc


class ParquetFormat(Format):
    """Parquet files (``.snappy.parquet`` ...): one schema per file, row groups cut by size,
    each row group's offsets and times in its column statistics; never gzip-wrapped."""

    name = "parquet"
    aliases = ("io.confluent.connect.s3.format.parquet.ParquetFormat",)
    default_extension = ".snappy.parquet"
    compresses_inside = True
    needs_value_schema = True
    one_schema_per_object = True
    indexes_itself = True
    #: Keys and headers go to companion files of another format (see the module docstring).
    companion_roles = frozenset()
    keeps_timestamps = True  # the __kafka_timestamp column

    def extension(self, settings: FormatSettings) -> str:
        return PARQUET_EXTENSIONS[settings.parquet_codec]

    def extensions(self, bytearray_extension: str = "") -> tuple[str, ...]:
        return tuple(ext.lstrip(".") for ext in PARQUET_EXTENSIONS.values())

    def check(self, settings: Any, options: Any) -> None:
        require_schema_values(settings, "parquet")
        if settings.compression_type.compresses:
            raise ConfigError(
                f"s3.compression.type={settings.compression} cannot be used with "
                "format.class=parquet (as in Confluent): Parquet compresses inside, per page; "
                "set parquet.codec to one of " + ", ".join(PARQUET_CODECS)
            )
        if options.given("s3.compression.block.size"):
            raise ConfigError(
                "s3.compression.block.size does not apply to format.class=parquet: set "
                "parquet.block.size (uncompressed bytes per row group, the unit a seek fetches; "
                "default 4MiB)"
            )
        if settings.null_behavior == "write" and not settings.store_keys:
            raise ConfigError(
                "behavior.on.null.values=write with format.class=parquet needs "
                "store.kafka.keys=true (a tombstone is kept as its key, as for Avro: a Parquet "
                "value file holds records of its schema); or set behavior.on.null.values to "
                "fail or ignore"
            )

    def encoder(self, settings: FormatSettings) -> RecordEncoder:
        return ParquetValueEncoder()

    def open_writer(
        self, store: ObjectStore, key: str, settings: FormatSettings, **kw: Any
    ) -> OutputObject:
        """A Parquet file (:meth:`Format.open_writer`'s arguments)."""
        need_pyarrow()
        from blockgz.formats.parquet.writer import ParquetObjectWriter

        schema = kw.pop("schema", None)
        kw.pop("companion", None)
        assert schema is not None  # the config check makes sure values have schemas
        return ParquetObjectWriter(
            store,
            key,
            schema,
            codec=settings.parquet_codec,
            block_size=settings.parquet_block_size,
            block_records=settings.block_records,
            **kw,
        )

    def stream_decoder(self) -> StreamDecoder:
        """A Parquet file's values read whole (pyarrow), in order."""
        need_pyarrow()
        from blockgz.formats.parquet.read import parquet_values

        return parquet_values

    def read_index(self, store: ObjectStore, key: str, size: int = -1) -> BlockIndex:
        """The object's footer as its index: one ranged GET (two for a large footer); a
        HEAD first when ``size`` is not known."""
        need_pyarrow()
        from blockgz.formats.parquet.read import parquet_index

        if size < 0:
            size = store.head(key).size
        return parquet_index(
            lambda start, end: store.get_range(key, start, end), size, source=store.url(key)
        )


class ParquetValueEncoder(RecordEncoder):
    """The decoded value itself: the Parquet writer lays values out in columns."""

    def encode(self, record: Any) -> Any:
        return record.json()

    def encode_tombstone(self, record: Any) -> bytes:
        raise record.fail("a null value cannot be written to a Parquet file")
