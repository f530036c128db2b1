"""Reading an archive: :class:`~blockgz.reader.reading.archive.Archive` (seek, records, windows)
and what it stands on: the listing and catalog, locating the object and block holding an
offset, overlapping objects and strays, companion files."""
