"""Helpers shared by the tests and the benchmarks; never shipped (not in the wheel).

* :mod:`testkit.s3` — a fault-injecting, request-logging proxy in front of an S3 server;
* :mod:`testkit.s3_requests` — that proxy's log named by S3 operation and AWS price class;
* :mod:`testkit.kafka_data` — producing numbered records and reading an export back;
* :mod:`testkit.archives` — building block-GZIP archives the way the sink lays them out;
* :mod:`testkit.connect_orders` — Connect-JSON order records (schema and payload) to export;
* :mod:`testkit.faults` — stopping or failing the export at a chosen point (crash tests);
* :mod:`testkit.servers` — a local server for a fixture, or the test skipped saying why;
* :mod:`testkit.spark_line` — another Spark line's pyspark in a cached environment of its own.
"""
