"""Formats by name: :data:`FORMATS`, a :class:`~blockgz.named.Registry` with the built-ins.

A lookup accepts a name or an alias (Confluent's class name), in any case, and raises
:class:`~blockgz.errors.ConfigError` naming the option and the allowed values. Adding a format
is a module with a :class:`~blockgz.formats.base.Format` subclass plus ``FORMATS.register``
(compressions: :data:`blockgz.formats.compression.COMPRESSIONS`).

>>> FORMATS.get("io.confluent.connect.s3.format.bytearray.ByteArrayFormat").name
'bytearray'
>>> FORMATS.names()
('json', 'bytearray', 'avro', 'parquet')
>>> FORMATS.get("orc")
Traceback (most recent call last):
...
blockgz.errors.ConfigError: format.class: 'orc' is not allowed; allowed: json, bytearray, ...
>>> FORMATS.get("json", option="keys.format.class").json_text
True
>>> format_of_extension("keys.bin.gz").name, format_of_extension("txt")
('bytearray', None)
"""

from __future__ import annotations

from typing import Any, Protocol

from blockgz.blocks.codecs.families import strip_suffix
from blockgz.errors import ConfigError, UnknownFormatError
from blockgz.formats.base import COMPANION_ROLES, Format, StreamDecoder
from blockgz.named import Registry


class ObjectName(Protocol):
    """What :func:`format_of` reads of an object (a
    :class:`blockgz.archive.object_ref.ObjectRef`; the formats do not import it, it asks them)."""

    @property
    def key(self) -> str: ...

    @property
    def extension(self) -> str: ...

    @property
    def bytearray_extension(self) -> str: ...


#: ``format.class`` (and ``keys.format.class``, ``headers.format.class``).
FORMATS: Registry[Format] = Registry("format.class")


def format_of_extension(extension: str, bytearray_extension: str = "") -> Format | None:
    """The format whose objects end with ``extension`` (no leading dot; a ``keys.``/``headers.``
    role and a ``.gz`` or ``.zst`` are allowed), ``None`` when no registered format names it.
    ``bytearray_extension`` is the layout's ``format.bytearray.extension``. A bare ``gz``
    (DeviantArt's connector) names records kept as their bytes."""
    cached = _OF_EXTENSION.get((extension, bytearray_extension, FORMATS.version), _UNSEEN)
    if cached is not _UNSEEN:
        return cached  # readers ask per record: answered from a dict
    core = "" if extension == "gz" else strip_suffix(extension)
    head, _, rest = core.partition(".")
    if head in COMPANION_ROLES and rest:
        core = rest
    found = _by_extension(bytearray_extension).get(core)
    _OF_EXTENSION[(extension, bytearray_extension, FORMATS.version)] = found
    return found


_UNSEEN: Any = object()
_OF_EXTENSION: dict[tuple[str, str, int], Format | None] = {}
_EXTENSIONS: dict[tuple[str, int], dict[str, Format]] = {}


def _by_extension(bytearray_extension: str) -> dict[str, Format]:
    """Extension -> format (readers ask per object: looked up once per registry version)."""
    found = _EXTENSIONS.get((bytearray_extension, FORMATS.version))
    if found is None:
        found = {}
        for fmt in FORMATS:
            for ext in fmt.extensions(bytearray_extension):
                found.setdefault(ext, fmt)
        _EXTENSIONS[(bytearray_extension, FORMATS.version)] = found
    return found


def format_of(ref: ObjectName) -> Format:
    """The format of the object ``ref`` names (its layout's ``format.bytearray.extension``
    included); raises :class:`~blockgz.errors.UnknownFormatError` when no registered format
    names its extension, rather than reading it as bytes.

    >>> from blockgz.archive.layout import Layout
    >>> key = "t+0+0000000000.keys.dat"
    >>> format_of(Layout(bytearray_extension=".dat").parse_data_key(key)).name
    'bytearray'
    >>> format_of(Layout().parse_data_key(key, any_extension=True))
    Traceback (most recent call last):
    ...
    blockgz.errors.UnknownFormatError: t+0+0000000000.keys.dat: no format blockgz knows ends ...
    """
    fmt = format_of_extension(ref.extension, ref.bytearray_extension)
    if fmt is None:
        known = ", ".join(
            f".{ext}" for f in FORMATS for ext in f.extensions(ref.bytearray_extension) if ext
        )
        raise UnknownFormatError(
            f"{ref.key}: no format blockgz knows ends with .{ref.extension} (known: {known}, "
            "gzipped or not); it is not read (written by a newer blockgz? upgrade to read it)"
        )
    return fmt


def stream_decoder_of(extension: str, bytearray_extension: str = "") -> StreamDecoder | None:
    """How an object ending with ``extension`` is decoded when read whole: its format's
    :meth:`~blockgz.formats.base.Format.stream_decoder` (``extension`` and
    ``bytearray_extension`` as :func:`format_of_extension` takes them); ``None``, framed
    records, also when no registered format names the extension.

    >>> stream_decoder_of("keys.avro").__name__
    'reader'
    >>> stream_decoder_of("json.gz"), stream_decoder_of("txt")
    (None, None)
    """
    fmt = format_of_extension(extension, bytearray_extension)
    return None if fmt is None else fmt.stream_decoder()


def format_indexing_itself(key: str) -> Format | None:
    """The format of the object at ``key`` when it is one whose objects carry their own index
    (:attr:`~blockgz.formats.base.Format.indexes_itself`: Parquet), else ``None``.

    >>> format_indexing_itself("t/t+0+0000000000.snappy.parquet").name
    'parquet'
    >>> format_indexing_itself("t/t+0+0000000000.json.gz") is None
    True
    """
    for fmt in FORMATS:
        if fmt.indexes_itself and any(key.endswith("." + ext) for ext in fmt.extensions()):
            return fmt
    return None


def check_companion_role(fmt: Format, role: str, option: str) -> None:
    """Refuse ``fmt`` for the ``role`` (keys, headers) files when it cannot hold them.

    >>> check_companion_role(FORMATS.get("json"), "keys", "keys.format.class")
    >>> check_companion_role(FORMATS.get("bytearray"), "headers", "headers.format.class")
    Traceback (most recent call last):
    ...
    blockgz.errors.ConfigError: headers.format.class=bytearray is not allowed (as in Confluent: ...
    """
    if role not in fmt.companion_roles:
        allowed = ", ".join(f.name for f in FORMATS if role in f.companion_roles)
        raise ConfigError(
            f"{option}={fmt.name} is not allowed (as in Confluent: {role} are key/value "
            f"lists); allowed: {allowed}"
        )


def _register_builtins() -> None:
    from blockgz.formats.avro.avro_format import AvroFormat
    from blockgz.formats.bytearray.bytearray_format import ByteArrayFormat
    from blockgz.formats.json.json_format import JsonFormat
    from blockgz.formats.parquet.parquet_format import ParquetFormat

    for fmt in (JsonFormat(), ByteArrayFormat(), AvroFormat(), ParquetFormat()):
        FORMATS.register(fmt)


_register_builtins()
