"""An object read to its end, records counted: what ``verify --scan`` and the deep audit do with
an object that has no index.

>>> import tempfile
>>> from blockgz.blocks.framing import NEWLINE
>>> from blockgz.store import LocalStore
>>> store = LocalStore(tempfile.mkdtemp())
>>> store.put("t+0+0000000000.json", b'{"n":0}\\n{"n":1}\\n')
>>> read_whole(store, "t+0+0000000000.json", 0, NEWLINE)[0].rsplit(": ", 1)[1]
'ok, read whole (no index), 2 records'
"""

from __future__ import annotations

import zlib

from blockgz.blocks.framing import Framing
from blockgz.errors import BlockGzError
from blockgz.objects.stream import StreamDecoder, stream_records
from blockgz.store import ObjectStore

#: What reading an object whole may raise when its bytes are bad.
_UNREADABLE = (BlockGzError, OSError, EOFError, zlib.error, ValueError)


def read_whole(
    store: ObjectStore,
    key: str,
    start: int,
    framing: Framing,
    why: str = "no index",
    *,
    decode: StreamDecoder | None = None,
) -> tuple[str, str | None]:
    """Read an object to its end, counting records: ``(ok line, None)`` or ``("", problem)``.
    ``decode``: its format's reader of a whole object (Avro's), as
    :func:`~blockgz.objects.stream.stream_records` takes it; ``None``: ``framing``'s records."""
    url = store.url(key)
    try:
        records = sum(1 for _ in stream_records(store, key, start, framing=framing, decode=decode))
    except _UNREADABLE as exc:
        return "", f"{url}: cannot be read whole: {exc}"
    return f"{url}: ok, read whole ({why}), {records} records", None
