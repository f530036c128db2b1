"""``format.class=json`` (Confluent's ``JsonFormat``): one JSON value per line, ``.json``.

* Values are written as one JSON line, as Confluent's JsonFormat does for schemaless JSON
  (:class:`JsonValueEncoder`). A value must be valid JSON; it is written byte for byte unless
  it spans lines, in which case it is re-serialised compactly.
  ``value.converter.schemas.enable=true`` unwraps Connect's ``{"schema": ..., "payload": ...}``
  envelope and writes the payload, as Confluent does.
* ``format.json.envelope=true`` wraps each value with its Kafka metadata instead
  (:class:`JsonEnvelopeEncoder`).
* Values a converter decoded are written as Confluent's JsonFormat writes Connect records
  (:class:`ConnectJsonEncoder`).
* Keys files: the decoded key as Connect's JSON; raw keys as text, or ``{"base64": ...}``.
  Headers files: ``[{"key": ..., "value": text or {"base64"}}]`` or ``null``. Timestamps files:
  ``[<epoch ms>,<type>]``.

>>> from types import SimpleNamespace as Record
>>> enc = JsonValueEncoder()
>>> enc.encode(Record(value=b'{"a": 1}', json=lambda: {"a": 1}))
b'{"a": 1}'
>>> JsonFormat().decode_entry(b'{"base64": "AAE="}')
b'\\x00\\x01'
"""

from __future__ import annotations

import json as stdlib_json
from typing import Any

import orjson

from blockgz.formats.base import (
    HEADERS,
    KEYS,
    TIMESTAMPS,
    Format,
    FormatSettings,
    RecordEncoder,
    from_text,
    text_or_base64,
)
from blockgz.formats.json.check import all_valid, invalid_rows, valid_json
from blockgz.formats.json.connect_render import render_json

#: The option only this format takes.
ENVELOPE_OPTION = "format.json.envelope"


class JsonFormat(Format):
    """One JSON value per line, as Confluent's JsonFormat writes it (or wrapped with its Kafka
    metadata under ``format.json.envelope``)."""

    name = "json"
    aliases = ("io.confluent.connect.s3.format.json.JsonFormat",)
    default_extension = ".json"
    json_text = True
    own_options = frozenset({ENVELOPE_OPTION})
    companion_roles = frozenset({KEYS, HEADERS, TIMESTAMPS})

    def encoder(self, settings: FormatSettings) -> RecordEncoder:
        if settings.decodes_values:
            return ConnectJsonEncoder(
                decimal_format=settings.json_decimal_format, envelope=settings.json_envelope
            )
        if settings.json_envelope:
            return JsonEnvelopeEncoder(unwrap_payload=settings.unwrap_payload)
        return JsonValueEncoder(unwrap_payload=settings.unwrap_payload)

    def encode_key(self, record: Any, schema: Any, key: Any, *, decoded: bool, writer: Any) -> Any:
        if not decoded:
            return orjson.dumps(text_or_base64(key))
        return b"null" if key is None else render_json(schema.json, key)

    def encode_headers(self, record: Any, headers: Any) -> Any:
        return orjson.dumps(
            None
            if headers is None
            else [{"key": k, "value": text_or_base64(v)} for k, v in headers]
        )

    def encode_timestamp(self, timestamp: int, kind: int) -> Any:
        return b"[%d,%d]" % (timestamp, kind)

    def encode_timestamp_column(self, stamps: Any, kinds: Any) -> tuple[Any, Any] | None:
        from blockgz.formats.arrow_entries import json_timestamp_lines

        return json_timestamp_lines(stamps, kinds)

    def encode_column(self, role: str, column: Any) -> tuple[Any, Any] | None:
        if role == KEYS:
            from blockgz.formats.arrow_entries import json_text_lines

            return json_text_lines(column)
        return None

    def column_entries(self, role: str, entries: list[Any]) -> list[Any]:
        dumps = orjson.dumps
        if role == HEADERS:
            return [
                b"null"
                if h is None
                else dumps([{"key": e["key"], "value": text_or_base64(e["value"])} for e in h])
                for h in entries
            ]
        return [dumps(text_or_base64(k)) for k in entries]

    def decode_entry(self, entry: Any) -> Any:
        """JSON parsed: text and ``{"base64": ...}`` back to bytes, a headers list as it is."""
        doc = stdlib_json.loads(entry)  # as readers always did (numbers beyond 64 bits too)
        return doc if isinstance(doc, list) else from_text(doc)

    def int_pair_block(
        self, data: bytes | bytearray, count: int
    ) -> tuple[list[int], list[int]] | None:
        """JSON lines of ``[int,int]`` parsed at once (:func:`int_pair_lines`)."""
        return int_pair_lines(data, count)

    def decode_entries(self, entries: list[Any]) -> list[Any]:
        """:meth:`decode_entry` of each entry, the lines straight to the stdlib decoder's
        ``raw_decode`` (what ``json.loads`` does after per-call checks that cost more than
        the parse of a short line: a replay decodes a timestamps entry per record). A line
        it does not take whole (whitespace around it, not UTF-8, not JSON) goes through
        :meth:`decode_entry`, so it is decoded, or refused, as it is alone.

        >>> JsonFormat().decode_entries([b'"k"', b'{"base64": "AAE="}', b"[1,0]", b" 2"])
        [b'k', b'\\x00\\x01', [1, 0], 2]
        """
        pairs = _int_pairs(entries)
        if pairs is not None:
            return pairs
        parse, alone = _DECODER.raw_decode, self.decode_entry
        out = []
        for entry in entries:
            try:
                text = entry.decode()
                doc, end = parse(text)
            except (ValueError, AttributeError):  # AttributeError: not bytes
                out.append(alone(entry))
                continue
            if end != len(text):
                out.append(alone(entry))
            else:
                out.append(doc if isinstance(doc, list) else from_text(doc))
        return out


def _int_pairs(entries: list[Any]) -> list[list[int]] | None:
    """Entries that are all ``[int,int]`` (a ``.timestamps`` file's lines: ``[ms,type]``)
    parsed at once (:func:`int_pair_lines`), their numbers as JSON reads them; ``None`` when
    some entry is anything else (then each is decoded alone).

    >>> _int_pairs([b"[1700000000000,0]", b"[-1,-1]"]), _int_pairs([b"[1, 2.5]"])
    ([[1700000000000, 0], [-1, -1]], None)
    >>> _int_pairs([b"[18446744073709551616,0]"]), _int_pairs([b"[1,0],[2", b"0]"])
    (None, None)
    """
    if not entries or not all(type(e) is bytes for e in entries):
        return None
    pairs = int_pair_lines(b"\n".join(entries) + b"\n", len(entries))
    return None if pairs is None else [[ms, kind] for ms, kind in zip(*pairs, strict=True)]


def int_pair_lines(data: bytes | bytearray, count: int) -> tuple[list[int], list[int]] | None:
    """``count`` lines of ``[int,int]`` (a block of a ``.timestamps`` file, ``[ms,type]`` a
    line) parsed at once into their first and their second numbers, as JSON reads them; ``None``
    when some line is anything else (then each line is decoded alone).

    A restore reads a million such lines a minute of Kafka traffic: this checks their shape
    with a few passes in C (the brackets and commas in order, one pair a line, no number
    missing) and parses their numbers as one JSON list, with no Python step per line.

    >>> int_pair_lines(b"[1700000000000,0]\\n[-1,-1]\\n", 2)
    ([1700000000000, -1], [0, -1])
    >>> [int_pair_lines(d, 1) for d in (b"[1,2,3]\\n", b"[,2]\\n", b"[1, 2.5]\\n", b" [1,2]\\n")]
    [None, None, None, None]
    """
    if count == 0:
        return ([], []) if data == b"" else None
    if data.translate(None, _NOT_STRUCTURAL) != b"[,]\n" * count:  # the shape, in order
        return None
    if (  # nothing before a "[" or after a "]" on its line, and no number missing
        not data.startswith(b"[")
        or data.count(b"\n[") != count - 1
        or data.count(b"]\n") != count
        or b"[," in data
        or b",]" in data
    ):
        return None
    try:
        flat = orjson.loads(b"[" + data.translate(None, b"[").replace(b"]\n", b",")[:-1] + b"]")
    except orjson.JSONDecodeError:
        return None
    # orjson reads a number beyond 64 bits as a float (JSON's stdlib decoder keeps it exact)
    if len(flat) != 2 * count or set(map(type, flat)) != {int}:
        return None
    return flat[0::2], flat[1::2]


_NOT_STRUCTURAL = bytes(b for b in range(256) if b not in b"[,]\n")


#: One JSON document parsed (the stdlib's: numbers beyond 64 bits as :meth:`decode_entry`).
_DECODER = stdlib_json.JSONDecoder()


class JsonValueEncoder(RecordEncoder):
    """The value as one line of JSON (validated; re-serialised only when it spans lines)."""

    def __init__(self, *, unwrap_payload: bool = False):
        self.unwrap_payload = unwrap_payload
        self.may_pass_through = not unwrap_payload

    def encode(self, record: Any) -> bytes:
        value = record.value
        assert value is not None
        if self.unwrap_payload:
            return orjson.dumps(_payload(record))
        if b"\n" in value or b"\r" in value:
            return orjson.dumps(record.json())  # parsed (cached for partitioners), one line
        if not valid_json(value):
            record.json()  # raises, naming the record and what is wrong
        return value

    def encode_tombstone(self, record: Any) -> bytes:
        return b"null"

    def rejected(self, values: list[bytes]) -> list[int]:
        if not self.may_pass_through:
            return super().rejected(values)
        bad = invalid_rows(values)
        joined = b"".join(values)
        if b"\n" in joined or b"\r" in joined:  # valid, but written re-serialised on one line
            bad = sorted({*bad, *(i for i, v in enumerate(values) if b"\n" in v or b"\r" in v)})
        return bad

    def passes_through(self, values: list[bytes], framed: bytes) -> bool:
        """Single-line, valid JSON values are stored byte for byte."""
        if not self.may_pass_through or framed.count(b"\n") != len(values) or b"\r" in framed:
            return False
        return all_valid(values, framed)  # else encode() names the record


class JsonEnvelopeEncoder(RecordEncoder):
    """``{"topic", "partition", "offset", "timestamp", "key", "headers"?, "value"}`` per line.

    Keys and header values are UTF-8 text when they decode as such, otherwise
    ``{"base64": "..."}``, so nothing is lost either way.
    """

    def __init__(self, *, unwrap_payload: bool = False):
        self.unwrap_payload = unwrap_payload

    def _wrap(self, record: Any, value: Any) -> bytes:
        doc: dict[str, Any] = {
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "timestamp": record.timestamp_ms,
            "key": text_or_base64(record.key),
        }
        if record.headers:
            doc["headers"] = [[k, text_or_base64(v)] for k, v in record.headers]
        doc["value"] = value
        return orjson.dumps(doc)

    def encode(self, record: Any) -> bytes:
        value = _payload(record) if self.unwrap_payload else record.json()
        return self._wrap(record, value)

    def encode_tombstone(self, record: Any) -> bytes:
        return self._wrap(record, None)


class ConnectJsonEncoder(RecordEncoder):
    """A decoded value with a schema as one line of Connect's JSON (see
    :func:`~blockgz.formats.json.connect_render.render_json`); with ``envelope`` wrapped like
    :class:`JsonEnvelopeEncoder`. Values without a schema are written as plain JSON."""

    def __init__(self, *, decimal_format: str = "BASE64", envelope: bool = False):
        self.decimal_format = decimal_format
        self.envelope = JsonEnvelopeEncoder() if envelope else None

    def encode(self, record: Any) -> bytes:
        schema = record.schema
        if schema is None:
            line = orjson.dumps(record.json())
        else:
            try:
                line = render_json(schema.json, record.json(), self.decimal_format)
            except (TypeError, ValueError, AttributeError) as exc:
                raise record.fail(f"cannot write the value as JSON ({exc})") from exc
        if self.envelope is not None:
            return self.envelope._wrap(record, orjson.Fragment(line))
        return line

    def encode_tombstone(self, record: Any) -> bytes:
        if self.envelope is not None:
            return self.envelope.encode_tombstone(record)
        return b"null"


def _payload(record: Any) -> Any:
    doc = record.json()
    if not isinstance(doc, dict) or "payload" not in doc:
        raise record.fail(
            "value.converter.schemas.enable=true but the value is not a "
            '{"schema": ..., "payload": ...} envelope'
        )
    return doc["payload"]
