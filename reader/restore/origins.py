"""What each archived value and key was in Kafka, from the converter its file records.

The export records in each file's manifest entry which converter its entries went through
(:attr:`blockgz.written.files.WrittenFile.converter`): the stored entry and the converter
together say what bytes the topic held. :func:`origin_of` turns (format, converter) into one of

* ``raw``: the entry is the bytes as they were (a bytearray file; JSON text kept as it came;
  a ByteArrayConverter's Avro ``bytes``);
* ``text:<encoding>``: the entry is the StringConverter's text (an Avro ``string``, or
  bytes that are its UTF-8): Kafka held it in ``<encoding>``;
* ``json-text:<encoding>`` / ``json-base64``: the entry is a JSON string (a JSON file's value
  rendered as Connect's JsonFormat does) holding that text, or the bytes in base64;
  ``base64``: a JSON keys file's entry, read back as that base64's text;
* ``avro``: an Avro datum, sent back in Confluent's wire format with the target registry's
  id (:class:`~blockgz.reader.restore.value_bytes.AvroToWire`);
* ``registry-or-plain``: an Avro entry whose converter was not recorded (archives written
  before it was): decided by its schema, as before (``bytes``/``string`` plain, else Avro);
* or a refusal: the sentence saying what the archive lacks to give back the bytes.

Files whose converter is not recorded are read as they were before: JSON and bytearray
entries as their bytes.

>>> origin_of("json", "bytearray", "value"), origin_of("json", "string:utf-16", "keys")
('json-base64', 'text:utf-16')
>>> origin_of("avro", "json+schemas", "value")  # doctest: +ELLIPSIS
'refuse:the values went through JsonConverter with schemas.enable=true: ...'
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from blockgz.formats.by_name import FORMATS

REFUSE = "refuse:"

_WHAT = {"value": "values", "keys": "keys"}


def origin_of(format_name: str | None, converter: str | None, role: str) -> str:
    """How entries of a ``role`` file of format ``format_name``, written through
    ``converter`` (``None``: not recorded), become Kafka's bytes (see the module's notes)."""
    what = _WHAT[role]
    fmt = FORMATS.get(format_name) if format_name else None
    kind, _, encoding = (converter or "").partition(":")
    if fmt is None:
        return "raw"
    refused = _refusal(fmt, kind, role, what)
    if refused is not None:
        return refused
    if fmt.stores_value_bytes and role == "value":
        return "raw"
    if fmt.compresses_inside:  # Avro entries: a datum of the file's schema
        return _avro_entry(kind, encoding, what)
    if kind == "avro":
        return (
            f"{REFUSE}the {what} were Avro in Kafka and the archive kept them as "
            f"{fmt.name} without the writer schema's registry id (export with format.class=avro "
            "or bytearray to restore them)"
        )
    if fmt.json_text and role == "keys":  # read back as text's UTF-8, base64 as its text
        return _json_key(kind, encoding)
    if fmt.json_text:  # a JSON value: Connect's rendering of the converter's datum
        return {"string": f"json-text:{encoding}", "bytearray": "json-base64"}.get(kind, "raw")
    if kind == "string":  # a bytearray keys file: the key's text as UTF-8
        return _text_origin(encoding)
    if kind == "json":
        return f"{REFUSE}the keys went through JsonConverter, which a bytearray file cannot hold"
    return "raw"


def _refusal(fmt: Any, kind: str, role: str, what: str) -> str | None:
    """The refusal whatever the format: Parquet values, and converters whose output the
    archive did not keep (payloads of envelopes); ``None`` when neither applies."""
    if fmt.indexes_itself and role == "value":  # Parquet: columns of the decoded value
        return (
            f"{REFUSE}the {what} are Parquet columns: the file keeps the decoded fields, not "
            "the bytes Kafka held nor their registry schema id, so restoring them is not "
            "supported (export with format.class=avro or bytearray to restore a topic)"
        )
    if kind == "none+payload":
        return (
            f"{REFUSE}the {what} were Connect {{schema, payload}} envelopes and the archive "
            "kept only their payloads (value.converter.schemas.enable without a converter)"
        )
    if kind == "json+schemas":
        return (
            f"{REFUSE}the {what} went through JsonConverter with schemas.enable=true: the "
            "archive kept the payloads, not the {schema, payload} JSON Kafka held (export with "
            "format.class=json and no converter, or bytearray, to keep the bytes)"
        )
    return None


def _avro_entry(kind: str, encoding: str, what: str) -> str:
    """An Avro file's entry, a datum of the file's schema, written through ``kind``."""
    if kind == "avro":
        return "avro"
    if kind == "string":
        return f"text:{encoding}"
    if kind in ("bytearray", "none"):
        return "raw"
    if kind == "json":
        return f"{REFUSE}the {what} were schemaless JSON, which an Avro file cannot hold"
    return "registry-or-plain"


def _json_key(kind: str, encoding: str) -> str:
    """A JSON keys file's entry, read back as its text's UTF-8 (base64 as its text)."""
    if kind == "string":
        return _text_origin(encoding)
    if kind == "bytearray":
        return "base64"
    if kind == "json":
        return f"{REFUSE}the keys went through JsonConverter, which a keys file cannot hold"
    return "raw"


def _text_origin(encoding: str) -> str:
    """Text kept as UTF-8 that Kafka held in ``encoding`` (as it is when that is UTF-8)."""
    return f"text:{encoding}" if encoding not in ("", "utf-8") else "raw"


def converter_of(origin: str) -> Callable[[Any], bytes | None] | None:
    """The function from a stored entry (as the reader gives it) to Kafka's bytes for
    ``origin``; ``None`` when entries go as they are (``raw``) or through the registry.

    >>> converter_of("json-base64")(b'"AAE="'), converter_of("text:utf-16")("a")
    (b'\\x00\\x01', b'\\xff\\xfea\\x00')
    >>> converter_of("json-text:latin-1")(b'"caf\\xc3\\xa9"')
    b'caf\\xe9'
    """
    how, _, encoding = origin.partition(":")
    encoding = encoding or "utf-8"
    if how == "json-base64":
        return lambda entry: None if entry is None else base64.b64decode(_json_string(entry))
    if how == "json-text":
        return lambda entry: None if entry is None else _json_string(entry).encode(encoding)
    if how == "base64":
        return lambda entry: None if entry is None else base64.b64decode(entry)
    if how == "text":
        return lambda entry: None if entry is None else _text(entry).encode(encoding)
    return None


def _json_string(entry: Any) -> str:
    """A JSON value that must be a string (Connect's rendering of a ``string``/``bytes``)."""
    doc = json.loads(entry)
    if not isinstance(doc, str):
        raise ValueError(f"expected a JSON string, found {bytes(entry[:40])!r}")
    return doc


def _text(entry: Any) -> str:
    return bytes(entry).decode() if isinstance(entry, (bytes, bytearray)) else str(entry)
