"""Writing Kafka records as objects: the ``blockgz`` Spark data source and what it calls.

Along the data path: :mod:`~sink.write.datasource` (the Spark data source and its tasks) →
:mod:`~sink.write.partition_writer` (partitioning and rotation per topic-partition, through the
stages of :mod:`~sink.write.stages` and the open files of :mod:`~sink.write.open_files`) →
:mod:`~sink.write.encoders` (what a record becomes) → :mod:`~sink.write.object_writer` (one
object: none, gzip or block-GZIP, uploaded) → :mod:`~sink.write.commit` (task commit messages
and the batch manifest). :mod:`~sink.write.config` holds the typed settings.
"""
