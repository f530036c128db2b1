"""Writing Kafka records as objects: the ``blockgz`` Spark data source and what it calls.

Along the data path: :mod:`~blockgz.sink.write.datasource` (the Spark data source and its tasks) →
:mod:`~blockgz.sink.write.partition_writer` (partitioning and rotation per topic-partition, through
the stages of :mod:`~blockgz.sink.write.stages` and the open files of
:mod:`~blockgz.sink.write.open_files`) → :mod:`~blockgz.sink.write.encoders` (what a record
becomes) → :mod:`~blockgz.formats.output` (one object: none, gzip or block-GZIP, uploaded) →
:mod:`~blockgz.sink.write.commit` (task commit messages and the batch manifest).
:mod:`~blockgz.sink.write.config` holds the typed settings, read through the declarations of
:mod:`~blockgz.sink.write.options`.
"""
