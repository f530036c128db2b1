"""``blockgz export``: the streaming job that wires the Kafka source to the sink.

The job's config file and options are read below it, in :mod:`blockgz.sink.jobconfig`.

* :mod:`blockgz.sink.export.job`: build the query, run it, follow its progress, stop cleanly;
* :mod:`blockgz.sink.export.checkpoint`: the checkpoint directory (writable, its epoch);
* :mod:`blockgz.sink.export.start`: where the run starts (resuming from the manifests);
* :mod:`blockgz.sink.export.lease`: the job's lease, taken before anything is written;
* :mod:`blockgz.sink.export.progress`: the live table (or log lines) per topic-partition;
"""
