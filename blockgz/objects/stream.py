"""Read a whole object as a stream: plain bytes, gzip of any number of members, zstd of any
number of frames, or a container (Avro) decoded by the reader its format gives.

For objects that cannot be seeked (uncompressed, plain gzip or zstd, block-GZIP or block-zstd
without its index, an Avro file without one, as Confluent's sink writes them): bytes are
fetched in large ranged reads (a dropped connection resumes where it stopped) and decompressed
or decoded on the fly.

    >>> import gzip, tempfile
    >>> from blockgz.store import LocalStore
    >>> store = LocalStore(tempfile.mkdtemp())
    >>> store.put("a.json.gz", gzip.compress(b"x\\n") + gzip.compress(b"y\\n"))
    >>> with stream_object(store, "a.json.gz", compressed=True) as f:
    ...     f.read()
    b'x\\ny\\n'
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import BinaryIO

from blockgz.blocks.codecs.families import GZIP, codec_for_key
from blockgz.blocks.decode import Record
from blockgz.blocks.framing import NEWLINE, Framing, LengthPrefixed
from blockgz.errors import CorruptBlockError
from blockgz.formats.base import StreamDecoder
from blockgz.objects.committed import checked_chunks
from blockgz.store.base import ObjectStore
from blockgz.written.files import WrittenFile


class ChunkStream(io.RawIOBase):
    """A readable file over an iterator of byte chunks."""

    def __init__(self, chunks: Iterator[bytes]):
        self._chunks = chunks
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def stream_object(
    store: ObjectStore,
    key: str,
    *,
    compressed: bool | None = None,
    committed: WrittenFile | None = None,
) -> BinaryIO:
    """The object's bytes as a file, decompressed when ``compressed`` (any number of members
    or frames) by the codec its suffix names (``.gz``, ``.zst``; gzip for another name).
    ``compressed`` defaults to the key ending in a compression suffix. With the manifest
    entry that ``committed`` it, reading its last byte checks its size and CRC-32
    (:func:`~blockgz.objects.committed.checked_chunks`)."""
    chunks = store.iter_chunks(key)
    if committed is not None:
        chunks = checked_chunks(chunks, store.url(key), committed)
    raw = io.BufferedReader(ChunkStream(chunks), 1024 * 1024)
    family = codec_for_key(key)
    if compressed is None:
        compressed = family is not None
    if not compressed:
        return raw
    return (family or GZIP).open_stream(raw)


def stream_records(
    store: ObjectStore,
    key: str,
    start_offset: int,
    *,
    compressed: bool | None = None,
    framing: Framing = NEWLINE,
    decode: StreamDecoder | None = None,
    committed: WrittenFile | None = None,
) -> Iterator[Record]:
    """A non-seekable object, streamed record by record: ``framing``'s records, or with
        ``decode`` the values it reads from the object's bytes (an Avro file's records as Python
        values; the caller asks the object's format which:
        :func:`~blockgz.formats.by_name.stream_decoder_of`). Offsets count up from
        ``start_offset`` (the one in its name), so they are exact only when the object's offsets
        are contiguous. ``compressed`` defaults to the key ending in ``.gz`` or ``.zst``; with
    ``committed`` (its manifest entry), a stream that differs from it in size or CRC-32 ends with
    an :class:`~blockgz.errors.ArchiveIntegrityError`.

        >>> import tempfile
        >>> from blockgz.store import LocalStore
        >>> store = LocalStore(tempfile.mkdtemp())
        >>> frame = LengthPrefixed().encode
        >>> store.put("t+0+0000000007.bin", frame(b"a\\nb") + frame(b""))
        >>> list(stream_records(store, "t+0+0000000007.bin", 7, framing=LengthPrefixed()))
        [Record(offset=7, value=b'a\\nb'), Record(offset=8, value=b'')]
    """
    if decode is not None:
        with stream_object(store, key, compressed=compressed, committed=committed) as stream:
            for n, value in enumerate(decode(stream)):
                yield Record(start_offset + n, value)
        return
    if isinstance(framing, LengthPrefixed):
        with stream_object(store, key, compressed=compressed, committed=committed) as stream:
            yield from _length_prefixed(stream, start_offset, store.url(key))
        return
    if framing != NEWLINE:
        with stream_object(store, key, compressed=compressed, committed=committed) as stream:
            data = stream.read()
        for n, value in enumerate(framing.split(data)):
            yield Record(start_offset + n, value)
        return
    with stream_object(store, key, compressed=compressed, committed=committed) as stream:
        for n, line in enumerate(stream):
            yield Record(start_offset + n, line[:-1] if line.endswith(b"\n") else line)


def _length_prefixed(stream: BinaryIO, start_offset: int, where: str) -> Iterator[Record]:
    """Records of a length-prefixed stream (4-byte big-endian length, then the bytes)."""
    offset = start_offset
    while header := stream.read(4):
        if len(header) < 4:
            raise CorruptBlockError(f"{where}: ends inside a record's length (offset {offset})")
        size = int.from_bytes(header, "big")
        value = stream.read(size)
        if len(value) < size:
            raise CorruptBlockError(f"{where}: ends inside the record at offset {offset}")
        yield Record(offset, value)
        offset += 1
