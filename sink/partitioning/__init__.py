"""Where a record goes: Confluent's partitioners and what they need.

* :mod:`sink.partitioning.partitioners`: default, field, time-based, daily, hourly, custom;
* :mod:`sink.partitioning.settings`: the partitioner options, read once (``PartitionerSettings``);
* :mod:`sink.partitioning.timestamps`: ``timestamp.extractor`` (Wallclock, Record, RecordField);
* :mod:`sink.partitioning.timeformat`: Joda ``path.format`` patterns and locales;
* :mod:`sink.partitioning.zones`: time zones and Joda's zone arithmetic (bucket starts);
* :mod:`sink.partitioning.isotime`: ISO-8601 text to epoch milliseconds;
* :mod:`sink.partitioning.json_fields`: dotted field lookup in JSON values;
* :mod:`sink.partitioning.pathsafe`: Hive-style escaping of values that become key segments.
"""
