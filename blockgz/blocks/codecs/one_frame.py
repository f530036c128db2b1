"""Decode one gzip member or zstd frame out of a longer buffer, in slices.

Walking a file member by member (to rebuild an index, or check one) must find where each member
ends without decompressing the rest of the file: a streaming decoder that stops at its member's
end (``eof``, ``unused_data``) is fed slices until it does. gzip
(:mod:`blockgz.blocks.codecs.gzip_members`)
and zstd (:mod:`blockgz.blocks.codecs.zstd`) share this loop.

>>> import zlib
>>> data = zlib.compress(b"one", wbits=31) + zlib.compress(b"two", wbits=31)
>>> used, out = decode_one(memoryview(data), 0, zlib.decompressobj(31), "gzip member", zlib.error)
>>> out, used == len(data) // 2 or used
(b'one', True)
"""

from __future__ import annotations

from typing import Any

from blockgz.errors import CorruptBlockError

#: Feed the decoder in slices, so finding a member's end costs O(member), not O(file).
FEED = 256 * 1024


def decode_one(
    view: memoryview,
    pos: int,
    decoder: Any,
    what: str,
    errors: type[BaseException] | tuple[type[BaseException], ...],
) -> tuple[int, bytes]:
    """Feed ``decoder`` (a streaming decompressor that stops at the end of one gzip member or
    zstd frame: ``eof``, ``unused_data``) from ``view[pos:]`` in slices until it ends; return
    the bytes it consumed and what it produced. A truncated or undecodable ``what`` (``"gzip
    member"``) is a :class:`CorruptBlockError` naming its byte offset."""
    consumed, parts = 0, []
    while not decoder.eof:
        piece = view[pos + consumed : pos + consumed + FEED]
        if not len(piece):
            raise CorruptBlockError(
                f"{what} at byte {pos} is truncated: the data ends inside it", byte_offset=pos
            )
        try:
            parts.append(decoder.decompress(piece))
        except errors as exc:
            raise CorruptBlockError(
                f"{what} at byte {pos} does not decompress ({exc})", byte_offset=pos
            ) from exc
        consumed += len(piece)
    return consumed - len(decoder.unused_data), b"".join(parts)
