"""Read an Iceberg table with Spark and Iceberg's Spark runtime jar, in a process of its own.

``python -m testkit.iceberg_spark TABLE JAR[,JAR...] [key=value ...]`` starts a local
SparkSession with the jars on the driver's classpath (and the ``spark.*`` settings given),
loads the table and prints one JSON line: ``{"spark": "<Spark's version>", "rows": N,
"offsets": [...]}``, or ``{"spark": ..., "error": "<the Java exception's first line>"}``.
``TABLE`` is a metadata file's location (``….metadata.json``: Iceberg's
``format("iceberg").load(path)``, no catalog needed) or a table's name in a catalog the
settings configure (``catalog.namespace.table``).

Any pyspark runs it (it imports pyspark and the standard library only): the test session's, or
another Spark line's from :mod:`testkit.spark_line`.

A process of its own because a JVM's classpath is fixed when it starts: the test session's
SparkSession cannot take the runtime jar later.
"""

from __future__ import annotations

import json
import os
import sys


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession

    location, jars, *settings = argv
    builder = (
        SparkSession.builder.master("local[1]")
        .appName("blockgz-iceberg-read")
        .config("spark.driver.extraClassPath", jars.replace(",", os.pathsep))
        .config("spark.ui.enabled", "false")
    )
    for setting in settings:
        key, _, value = setting.partition("=")
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    version = spark.version
    try:
        if location.endswith(".json"):
            frame = spark.read.format("iceberg").load(location)
        else:
            frame = spark.table(location)
        offsets = sorted(r[0] for r in frame.select("__kafka_offset").collect())
        result = {"rows": len(offsets), "offsets": offsets}
    except Exception as exc:  # the JVM's error, whatever its class: reported, not raised
        lines = [line for line in str(exc).splitlines() if "Error" in line or "Exception" in line]
        result = {"error": (lines or [str(exc)])[0].strip(": ")}
    finally:
        spark.stop()
    print(json.dumps({"spark": version, **result}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
