"""One block-GZIP object in a store: its index, one ranged GET per block, records out.

>>> import tempfile
>>> from blockgz import BlockGzipWriter
>>> from blockgz.store import LocalStore
>>> store = LocalStore(tempfile.mkdtemp())
>>> with store.open_upload("t+0+0000000000.json.gz") as up, BlockGzipWriter(up, block_size=8) as w:
...     for n in range(10):
...         w.write(b"r%d" % n)
>>> store.put("t+0+0000000000.json.index.json", w.index.to_json().encode())
>>> [r.value for r in IndexedObject(store, "t+0+0000000000.json.gz").seek(7)]
[b'r7', b'r8', b'r9']
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator

from blockgz.decode import Record, chunk_records, seek_records
from blockgz.errors import ObjectNotFoundError
from blockgz.index import BlockIndex, data_key_for, sidecar_key
from blockgz.store.base import ObjectStore
from blockgz.verify import VerifyReport, verify_blocks


class IndexedObject:
    """A block-GZIP object and its sidecar in ``store``; the index is fetched once, lazily."""

    def __init__(self, store: ObjectStore, key: str, index: BlockIndex | None = None):
        self.store = store
        self.key = data_key_for(key)
        self._index = index

    @property
    def url(self) -> str:
        return self.store.url(self.key)

    @property
    def index(self) -> BlockIndex:
        if self._index is None:
            index_key = sidecar_key(self.key)
            try:
                text = self.store.get(index_key)
            except ObjectNotFoundError:
                raise ObjectNotFoundError(
                    f"{self.url}: no index sidecar ({self.store.url(index_key)}); the object is "
                    "not seekable until `blockgz index` builds one"
                ) from None
            self._index = BlockIndex.from_json(text, source=self.store.url(index_key))
        return self._index

    def read_raw(self, block: int) -> bytes:
        """The block's compressed bytes: one ranged GET."""
        chunk = self.index.chunks[block]
        return self.store.get_range(self.key, chunk.byte_offset, chunk.byte_end)

    def fetch_records(self, block: int, start: int = 0, stop: int | None = None) -> list[Record]:
        """One ranged GET for the block; records ``[start:stop]``, checked against the index."""
        chunk = self.index.chunks[block]
        raw = self.read_raw(block)
        framing, url = self.index.framing, self.url
        return chunk_records(raw, chunk, framing, block=block, source=url, start=start, stop=stop)

    def seek(self, offset: int, count: int | None = None) -> Iterator[Record]:
        """Records from ``offset`` on within this object (one ranged GET per block)."""
        return seek_records(self.index, self.fetch_records, offset, count, source=self.url)

    def verify(self, on_block: Callable[[int], None] | None = None) -> VerifyReport:
        """Check every block against the index (one ranged GET each)."""
        size = self.store.head(self.key).size
        return verify_blocks(
            self.index, self.read_raw, size=size, source=self.url, on_block=on_block
        )


class ChunkStream(io.RawIOBase):
    """A readable file over an iterator of byte chunks (for streaming decompression)."""

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


def stream_object(store: ObjectStore, key: str, *, compressed: bool) -> io.BufferedIOBase:
    """The object's bytes as a file, decompressed if it is gzip (any number of members)."""
    raw = io.BufferedReader(ChunkStream(store.iter_chunks(key)), 1024 * 1024)
    if not compressed:
        return raw
    from isal import igzip

    return igzip.IGzipFile(fileobj=raw, mode="rb")
