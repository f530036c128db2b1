"""A SparkSession on which ``format("blockgz")`` both writes archives and reads them back.

Writing is the sink's (:class:`blockgz.sink.write.datasource.BlockGzDataSource`), reading the
reader's (:class:`blockgz.reader.spark.archive_source.ArchiveReadSource`); Spark knows a data
source by one
name, so one class joins them, and it sits above both packages (``sink`` never imports
``reader``), as the command line does. :func:`spark_session` is
:func:`blockgz.sink.session.spark_session` (blockgz's writer and ``blockgz-kafka``) with it
registered.

Example (starts a JVM, so not run as a doctest)::

    spark = spark_session("local[2,3]")
    spark.read.format("blockgz").load("s3://bucket/exports").where("offset < 10").show()
"""

from __future__ import annotations

from typing import Any

from blockgz.reader.spark.archive_source import ArchiveReadSource
from blockgz.reader.spark.plan_guard import install_plan_guard
from blockgz.sink.session import register_data_sources as register_sink_sources
from blockgz.sink.session import spark_session as sink_spark_session
from blockgz.sink.write.datasource import BlockGzDataSource


class BlockGzSource(ArchiveReadSource, BlockGzDataSource):
    """``spark.read``/``write``/``writeStream`` ``.format("blockgz")``."""


def register_data_sources(spark: Any) -> None:
    """Register ``blockgz`` (writing and reading) and ``blockgz-kafka`` on ``spark``, turn
    on the Python filter pushdown the reader plans with, and add the guard that keeps
    Spark from reusing one query's pushed-down plan in another
    (:mod:`blockgz.reader.spark.plan_guard`)."""
    register_sink_sources(spark)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(BlockGzSource)
    install_plan_guard(spark, "blockgz")


def spark_session(*args: Any, **kwargs: Any) -> Any:
    """:func:`blockgz.sink.session.spark_session` (same arguments) that also reads
    ``format("blockgz")``."""
    spark = sink_spark_session(*args, **kwargs)
    register_data_sources(spark)
    return spark
