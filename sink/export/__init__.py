"""``blockgz export``: the streaming job that wires the Kafka source to the sink.

* :mod:`blockgz.sink.export.config`: the job's config file (Connect ``.properties`` or JSON), split
  into source, sink and Spark settings;
* :mod:`blockgz.sink.export.job`: build the query, run it, follow its progress, stop cleanly;
* :mod:`blockgz.sink.export.checkpoint`: the checkpoint directory (writable, its epoch);
* :mod:`blockgz.sink.export.start`: where the run starts (resuming from the manifests);
* :mod:`blockgz.sink.export.lease`: the job's lease, taken before anything is written;
* :mod:`blockgz.sink.export.progress`: the live table (or log lines) per topic-partition;
"""
