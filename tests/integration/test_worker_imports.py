"""Spark's Python workers of a blockgz session import pyspark from the installed package, not
from the zip copy Spark puts first on their path (issue 44: each new worker compiled pyspark's
sources from the zip, ~0.6 CPU-s, several workers per streaming query)."""

from __future__ import annotations


def _where(_: object) -> tuple[str, str]:
    import py4j
    import pyspark

    return pyspark.__file__, py4j.__file__


def test_python_workers_import_the_installed_pyspark(spark):
    import py4j
    import pyspark

    found = spark.sparkContext.parallelize([0], 1).map(_where).collect()
    assert found == [(pyspark.__file__, py4j.__file__)]
    assert ".zip" not in found[0][0]
