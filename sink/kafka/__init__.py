"""Reading Kafka: the ``blockgz-kafka`` Spark source, in Python on confluent-kafka.

* :mod:`blockgz.sink.kafka.options` validates the source's options (Spark's Kafka source names);
* :mod:`blockgz.sink.kafka.offsets` plans where a query starts and how far each micro-batch reads;
* :mod:`blockgz.sink.kafka.clients` makes its consumers and asks Kafka again through a broker
  restart;
* :mod:`blockgz.sink.kafka.ranges` reads one topic-partition's offset range as Arrow batches;
* :mod:`blockgz.sink.kafka.holding` (the rules), :mod:`blockgz.sink.kafka.oldest` (the times
  they need, from Kafka) and :mod:`blockgz.sink.kafka.held_ends` (the two together) plan how
  far a batch reads when partial files are held;
* :mod:`blockgz.sink.kafka.source` is the Spark data source itself.

Nothing here imports the sink's writer (``blockgz.sink.write``), and the writer does not import
this.
"""
