"""``format.class=bytearray`` (Confluent's ``ByteArrayFormat``): the value's bytes as they are.

Records are framed by ``format.bytearray.separator`` (a newline by default) or, with
``format.bytearray.framing=length-prefixed``, by their length; objects end with
``format.bytearray.extension`` (``.bin``). A keys file holds the raw key bytes, framed as the
value file; a null key cannot be written, and headers cannot be held at all (as in Confluent:
they are key/value lists).

>>> from types import SimpleNamespace as Record
>>> ByteArrayEncoder(b"\\n").encode(Record(value=b"\\x00raw"))
b'\\x00raw'
>>> ByteArrayFormat().extensions(".dat")
('bin', 'dat', '')
"""

from __future__ import annotations

from typing import Any

from blockgz.blocks.framing import FRAMING_OPTION, Separated
from blockgz.errors import ConfigError
from blockgz.formats.base import KEYS, Format, FormatSettings, RecordEncoder

#: The options only this format takes.
SEPARATOR_OPTION = "format.bytearray.separator"
EXTENSION_OPTION = "format.bytearray.extension"
#: The value converters whose values are the bytes Kafka holds (none: no converter).
_RAW_CONVERTERS = (None, "bytearray")


class ByteArrayFormat(Format):
    """The bytes Kafka holds, one record after another with ``format.bytearray.separator``
    between them (or length-framed); the ``.keys`` companion may use it too."""

    name = "bytearray"
    aliases = ("io.confluent.connect.s3.format.bytearray.ByteArrayFormat",)
    default_extension = ".bin"
    stores_value_bytes = True
    companion_roles = frozenset({KEYS})
    own_options = frozenset({FRAMING_OPTION, SEPARATOR_OPTION})
    takes_framing = True
    writes_companion_runs = False

    def extension(self, settings: FormatSettings) -> str:
        return settings.bytearray_extension

    def extensions(self, bytearray_extension: str = "") -> tuple[str, ...]:
        """``bin``, the layout's ``format.bytearray.extension``, and ``""``: an object named
        only ``.gz`` (DeviantArt's connector) holds records as their bytes."""
        found = [self.default_extension.lstrip(".")]
        if bytearray_extension and bytearray_extension.lstrip(".") not in found:
            found.append(bytearray_extension.lstrip("."))
        return (*found, "")

    def check(self, settings: Any, options: Any) -> None:
        kind = settings.value_converter.kind
        if kind not in _RAW_CONVERTERS:
            raise ConfigError(
                f"format.class={self.name} writes the value's bytes as they are, so "
                "value.converter must be org.apache.kafka.connect.converters.ByteArrayConverter "
                f"or left out; got {options.text('value.converter')!r} (use format.class=json or "
                "avro for decoded values)"
            )

    def encoder(self, settings: FormatSettings) -> RecordEncoder:
        framing = settings.framing  # length-prefixed: no separator
        return ByteArrayEncoder(framing.separator if isinstance(framing, Separated) else None)

    def encode_key(self, record: Any, schema: Any, key: Any, *, decoded: bool, writer: Any) -> Any:
        if key is None:
            raise record.fail(
                "the key is null, which a bytearray keys file cannot hold; set "
                "keys.format.class=json or avro"
            )
        data = key if isinstance(key, bytes) else str(key).encode()
        separator = writer.separator
        if separator is not None and separator in data:
            raise record.fail(
                f"the key contains the record separator {separator!r}; set "
                "format.bytearray.framing=length-prefixed or keys.format.class=json"
            )
        return data


class ByteArrayEncoder(RecordEncoder):
    """The raw value bytes. With a separator, a value holding it would break framing, so it is
    refused; with ``separator=None`` (length-prefixed framing) any bytes are fine."""

    def __init__(self, separator: bytes | None = b"\n"):
        self.separator = separator
        self.may_pass_through = separator is not None

    def encode(self, record: Any) -> bytes:
        value = record.value
        assert value is not None
        if self.separator is not None and self.separator in value:
            raise record.fail(
                f"value contains the record separator {self.separator!r}, which would split it "
                "into several records; set format.bytearray.framing=length-prefixed (any bytes), "
                "or a format.bytearray.separator that cannot occur in the values"
            )
        return value

    def encode_tombstone(self, record: Any) -> bytes:
        return b""

    def rejected(self, values: list[bytes]) -> list[int]:
        sep = self.separator
        if sep is None:
            return super().rejected(values)
        return [i for i, value in enumerate(values) if sep in value]

    def passes_through(self, values: list[bytes], framed: bytes) -> bool:
        """Values without the separator are stored as they are."""
        sep = self.separator
        if sep is None:
            return False
        if len(sep) == 1:
            return framed.count(sep) == len(values)
        # Overlapping multi-byte separators make counting ambiguous: look in each value.
        return not any(sep in value for value in values)
