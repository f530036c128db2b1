"""Where a record goes: Confluent's partitioners and what they need.

* :mod:`blockgz.sink.partitioning.partitioners`: default, field, time-based, daily, hourly, custom;
* :mod:`blockgz.sink.partitioning.settings`: the partitioner options, read once
  (``PartitionerSettings``);
* :mod:`blockgz.sink.partitioning.timestamps`: ``timestamp.extractor`` (Wallclock, Record,
  RecordField);
* :mod:`blockgz.sink.partitioning.timeformat`: Joda ``path.format`` patterns and locales;
* :mod:`blockgz.sink.partitioning.zones`: time zones and Joda's zone arithmetic (bucket starts);
* :mod:`blockgz.sink.partitioning.isotime`: ISO-8601 text to epoch milliseconds;
* :mod:`blockgz.sink.partitioning.json_fields`: dotted field lookup in JSON values;
* :mod:`blockgz.sink.partitioning.pathsafe`: Hive-style escaping of values that become key segments.
"""
