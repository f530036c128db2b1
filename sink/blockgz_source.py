"""``format("blockgz")``: one data source name for writing archives and reading them back.

Writing is the sink's (:class:`sink.write.datasource.BlockGzDataSource`); reading is the
reader's (:mod:`reader.spark_source`). This module sits above both, as the session that
registers it does.
"""

from __future__ import annotations

from reader.spark_source import ArchiveReadSource
from sink.write.datasource import BlockGzDataSource


class BlockGzSource(ArchiveReadSource, BlockGzDataSource):
    """``spark.read``/``write``/``writeStream`` ``.format("blockgz")``."""
