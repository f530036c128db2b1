"""An export's commit log, under the keys of :mod:`blockgz.archive`.

Its modules import one way, each only those listed before it:

* :mod:`~blockgz.commits.cluster_snapshots` (the source cluster's topics and consumer groups,
  for a restore);
* :mod:`~blockgz.commits.head` (what is committed, in one GET: rewritten at each manifest);
* :mod:`~blockgz.commits.manifests` (one per committed batch), :mod:`~blockgz.commits.intents`
  (the directories a task is about to write), :mod:`~blockgz.commits.catalog` (the manifests,
  compacted), :mod:`~blockgz.commits.manifest_sequence` (a manifest missing from the
  sequence), :mod:`~blockgz.commits.recovery` (what a batch that never committed left),
  :mod:`~blockgz.commits.manifest_log` (what is committed and where each partition resumes);
* :mod:`~blockgz.commits.writer_lease` (one writer per archive).
"""
