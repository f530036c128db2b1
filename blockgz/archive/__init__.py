"""The archive's keys: where an export puts each object, sidecar and record of its own.

Its modules import one way, each only those listed before it:

* :mod:`~blockgz.archive.sidecars` (where an object's index lives),
  :mod:`~blockgz.archive.timestamps_keys` (where a value file's record timestamps live),
  :mod:`~blockgz.archive.written` (one written object, as a manifest lists it) and
  :mod:`~blockgz.archive.object_ref` (one data object, as its key names it), which import
  nothing of the archive, so the object writers and readers below the archive can use them;
* :mod:`~blockgz.archive.job_keys`, :mod:`~blockgz.archive.layout` (the one place keys are
  built and parsed, behind the :class:`~blockgz.archive.layout.KeyLayout` protocol),
  :mod:`~blockgz.archive.deviantart`, :mod:`~blockgz.archive.reader_layout`;
* :mod:`~blockgz.archive.partition_offsets`, :mod:`~blockgz.archive.versions`.

The commit log written under these keys is :mod:`blockgz.commits`, one layer up. This package
imports none of its modules, so importing one loads only what it needs.
"""
