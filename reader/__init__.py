"""The read side of blockgz: find the object and block holding an offset, fetch just that.

    >>> from reader import open_archive
    >>> callable(open_archive)
    True

``open_archive("s3://bucket/prefix", **{"store.url": ...})`` returns an :class:`Archive`
whose ``seek(topic, partition, offset)`` yields :class:`blockgz.Record` from that offset on.
"""

from reader.archive import Archive, ObjectSummary, open_archive
from reader.objects import IndexedObject

open = open_archive  # `reader.open(url)`, as DESIGN.md names it; mirrors gzip.open

__all__ = ["Archive", "IndexedObject", "ObjectSummary", "open", "open_archive"]
