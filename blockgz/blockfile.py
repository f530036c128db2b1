"""Read a block-GZIP file on local disk through its index: one ``pread`` per block.

>>> import pathlib, tempfile
>>> from blockgz.files import compress_file
>>> tmp = pathlib.Path(tempfile.mkdtemp())
>>> _ = (tmp / "e.json").write_bytes(b"".join(b'{"n":%d}\\n' % n for n in range(100)))
>>> _ = compress_file(tmp / "e.json", tmp / "e.json.gz", block_size=64, first_offset=1000)
>>> with BlockGzipFile(tmp / "e.json.gz") as f:
...     [r.value for r in f.seek(1042, count=2)]
[b'{"n":42}', b'{"n":43}']
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from blockgz.decode import Record, chunk_records, inflate_chunk, seek_records
from blockgz.errors import ObjectNotFoundError
from blockgz.index import BlockIndex, data_key_for, sidecar_key


def data_path_for(target: str | os.PathLike[str]) -> Path:
    """Accept a data file or its ``.index.json`` and return the data file's path."""
    path = Path(target)
    return path.with_name(data_key_for(path.name))


def load_index(index_path: str | os.PathLike[str]) -> BlockIndex:
    """Read and validate an index sidecar from disk."""
    try:
        text = Path(index_path).read_bytes()
    except FileNotFoundError as exc:
        raise ObjectNotFoundError(
            f"{index_path}: no index sidecar; build one with `blockgz index DATAFILE`"
        ) from exc
    return BlockIndex.from_json(text, source=str(index_path))


class BlockGzipFile:
    """A block-GZIP file and its index, opened for random access by Kafka offset."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        index: BlockIndex | None = None,
        *,
        check_size: bool = True,
    ):
        self.path = data_path_for(path)
        try:
            self._fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError as exc:
            raise ObjectNotFoundError(f"{self.path}: no such file") from exc
        try:
            self.index = index or load_index(sidecar_key(str(self.path)))
            if check_size:
                self.index.check_object_size(os.fstat(self._fd).st_size, name=str(self.path))
        except BaseException:
            os.close(self._fd)
            raise

    def read_raw(self, block: int) -> bytes:
        """The compressed bytes of one block, exactly as stored."""
        chunk = self.index.chunks[block]
        return os.pread(self._fd, chunk.byte_length, chunk.byte_offset)

    def read_block(self, block: int) -> bytes:
        """The uncompressed bytes of one block."""
        chunk = self.index.chunks[block]
        return inflate_chunk(self.read_raw(block), chunk, block=block, source=str(self.path))

    def block_records(self, block: int, start: int = 0, stop: int | None = None) -> list[Record]:
        """Records ``[start:stop]`` of one block (all of them by default)."""
        chunk = self.index.chunks[block]
        raw = self.read_raw(block)
        source = str(self.path)
        return chunk_records(
            raw, chunk, self.index.framing, block=block, source=source, start=start, stop=stop
        )

    def seek(self, offset: int, count: int | None = None) -> Iterator[Record]:
        """Records from ``offset`` on (the next existing one if it was compacted away)."""
        return seek_records(self.index, self.block_records, offset, count, source=str(self.path))

    def records(self) -> Iterator[Record]:
        """Every record in the file, in order."""
        first = self.index.first_offset
        return iter(()) if first is None else self.seek(first)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> BlockGzipFile:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
