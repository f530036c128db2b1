"""The archive's keys: where an export puts each object, sidecar and record of its own.

Its modules import one way, each only those listed before it:

* :mod:`~blockgz.archive.timestamps_keys` (where a value file's record timestamps live) and
  :mod:`~blockgz.archive.object_ref` (one data object, as its key names it), which import
  nothing of the archive;
* :mod:`~blockgz.archive.job_keys`, :mod:`~blockgz.archive.layout` (the one place keys are
  built and parsed, behind the :class:`~blockgz.archive.layout.KeyLayout` protocol),
  :mod:`~blockgz.archive.deviantart`, :mod:`~blockgz.archive.reader_layout`;
* :mod:`~blockgz.archive.partition_offsets`, :mod:`~blockgz.archive.versions`.

The archive sits above the record formats (:mod:`blockgz.formats`: a key's extension names its
format) and below the commit log written under these keys, :mod:`blockgz.commits`. An object's
sidecar name and manifest entry are :mod:`blockgz.written`'s, below both. This package imports
none of its modules, so importing one loads only what it needs.
"""
