"""Records of one object from an offset on: through its index, or streamed when asked to.

>>> import gzip, tempfile
>>> from pathlib import Path
>>> path = Path(tempfile.mkdtemp()) / "t+0+0000000100.json.gz"
>>> _ = path.write_bytes(gzip.compress(b"a\\nb\\nc\\n"))   # plain gzip: no index
>>> [r.offset for r in seek_object(path, 101, scan=True)]
[101, 102]
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Mapping
from typing import Any

from blockgz.archive.layout import Layout, parse_archive_key
from blockgz.blocks.decode import Record
from blockgz.blocks.framing import framing_from_options
from blockgz.errors import MissingIndexError, OffsetNotFoundError
from blockgz.objects.indexed import open_indexed, resolve_data_key
from blockgz.objects.stream import StreamDecoder, stream_records
from blockgz.options import as_options


def seek_object(
    target: str | os.PathLike[str],
    offset: int,
    count: int | None = None,
    *,
    scan: bool = False,
    options: Mapping[str, Any] | None = None,
    decode: StreamDecoder | None = None,
) -> Iterator[Record]:
    """Records of the object at ``target`` (path or ``s3://`` URL) from ``offset`` on.

    With its ``.index.json``, only the blocks needed are read. Without one, ``scan=True``
    streams the object from its start, taking offsets from the start offset in its name (0 if
    the name has none; ``format.bytearray.framing`` in ``options`` says how its records are
    framed, or ``decode`` reads them, as the object's format says:
    :func:`~blockgz.formats.by_name.stream_decoder_of`); otherwise
    :class:`~blockgz.errors.MissingIndexError` says so.
    """
    try:
        with open_indexed(target, options) as obj:
            yield from obj.seek(offset, count)
            return
    except MissingIndexError:
        if not scan:
            raise
    from blockgz.store import split_object_url

    store, key = split_object_url(os.fspath(target), options)
    key = resolve_data_key(store, key)
    layout = Layout.from_options(as_options(options))
    ref = parse_archive_key(layout, key, any_extension=True)  # a hidden timestamps file too
    start = ref.start_offset if ref is not None else 0
    records = stream_records(
        store, key, start, framing=framing_from_options(options), decode=decode
    )
    found = False
    for record in itertools.islice((r for r in records if r.offset >= offset), count):
        found = True
        yield record
    if not found:
        raise OffsetNotFoundError(
            f"{store.url(key)}: offset {offset} is past the end (streamed from offset {start})"
        )
