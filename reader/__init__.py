"""The read side of blockgz: find the object and block holding an offset, fetch just that.

    >>> from reader import open_archive
    >>> callable(open_archive)
    True

``open_archive("s3://bucket/prefix", {"store.url": ...})`` returns an :class:`Archive`
whose ``seek(topic, partition, offset)`` yields :class:`blockgz.Record` from that offset on.
One object alone is read with :func:`blockgz.open_indexed`.
"""

from blockgz.reader.reading.archive import Archive, ObjectSummary, open_archive

__all__ = ["Archive", "ObjectSummary", "open_archive"]
