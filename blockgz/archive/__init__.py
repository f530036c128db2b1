"""The archive's keys and commit log: everything an export keeps besides the data itself.

Its modules import one way, each only those listed before it:

* :mod:`~blockgz.archive.sidecars` (where an object's index lives),
  :mod:`~blockgz.archive.timestamps_keys` (where a value file's record timestamps live),
  :mod:`~blockgz.archive.written` (one written object, as a manifest lists it) and
  :mod:`~blockgz.archive.object_ref` (one data object, as its key names it), which import
  nothing of the archive, so the object writers and readers below the archive can use them;
* :mod:`~blockgz.archive.job_keys`, :mod:`~blockgz.archive.layout` (the one place keys are
  built and parsed, behind the :class:`~blockgz.archive.layout.KeyLayout` protocol),
  :mod:`~blockgz.archive.deviantart`, :mod:`~blockgz.archive.reader_layout`;
* :mod:`~blockgz.archive.offsets`, :mod:`~blockgz.archive.versions`,
  :mod:`~blockgz.archive.snapshots` (the source cluster's topics and consumer groups, for a
  restore);
* :mod:`~blockgz.archive.manifests` (one per committed batch), :mod:`~blockgz.archive.intents`
  (the directories a task is about to write), :mod:`~blockgz.archive.catalog` (the manifests,
  compacted), :mod:`~blockgz.archive.manifest_sequence` (a manifest missing from the
  sequence), :mod:`~blockgz.archive.recovery` (what a batch that never committed left),
  :mod:`~blockgz.archive.log` (what is committed and where each partition resumes);
* :mod:`~blockgz.archive.lease` (one writer per archive).

This package imports none of its modules, so importing one loads only what it needs.
"""
