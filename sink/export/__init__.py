"""``blockgz export``: the streaming job that wires the Kafka source to the sink.

* :mod:`blockgz.sink.export.config`: the job's config file (Connect ``.properties`` or JSON), split
  into source, sink and Spark settings;
* :mod:`blockgz.sink.export.job`: build the query, run it, follow its progress, stop cleanly;
* :mod:`blockgz.sink.export.progress`: the live table (or log lines) per topic-partition;
"""
