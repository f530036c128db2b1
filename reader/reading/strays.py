"""Strays: keys among an archive's data that are neither data objects nor their sidecars.

A ``orders+0+0000009999.json.gz.bak`` or a ``notes.txt`` in a partition folder is never read as
records (its name does not parse under the layout); ``blockgz ls`` and ``blockgz verify`` name
it so that someone can rename or remove it.

>>> from blockgz.archive.layout import Layout
>>> d = "topics/orders/partition=0/"
>>> [is_stray(Layout(), "", d + name) for name in (
...     "orders+0+0000009999.json.gz.bak",
...     ".orders+0+0000009999.json.index.json",
...     "orders+0+0000009999.json.index.json",
...     "orders+0+0000009999.json.gz.index.json",
... )]
[True, False, False, True]
"""

from __future__ import annotations

from blockgz.archive.layout import KeyLayout, parse_archive_key
from blockgz.written.sidecars import data_key_for, is_sidecar


def is_stray(layout: KeyLayout, prefix: str, key: str) -> bool:
    """Whether ``key``, which is no data object under ``layout``, is a stray rather than an
    index sidecar (hidden or old name), a hidden timestamps file, an export's own object or
    DeviantArt's cursor."""
    if is_sidecar(key):
        return parse_archive_key(layout, data_key_for(key)) is None
    if parse_archive_key(layout, key) is not None:  # a hidden timestamps file
        return False
    return not layout.is_bookkeeping(prefix, key)


def stray_line(url: str) -> str:
    """The line ``ls`` and ``verify`` print for a stray."""
    return (
        f"stray: {url} is not a data object under this layout (readers ignore it); "
        "rename or remove it"
    )


class Listing(list):
    """What :meth:`blockgz.reader.reading.archive.Archive.ls` returns: the objects, plus
    ``strays``, the
    keys under the listed prefix that are not data objects (readers ignore them)."""

    def __init__(self, objects=(), strays: list[str] | None = None):
        super().__init__(objects)
        self.strays: list[str] = list(strays or [])
