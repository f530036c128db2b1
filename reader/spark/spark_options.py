"""The options of ``spark.read.format("blockgz")``, declared once (no Spark import here, so
``blockgz options`` and the docs' reference list them without pyspark installed).

>>> SPARK_READ_OPTIONS.read({"blockgz.split.size": "32MiB"}, "blockgz.split.size")
33554432
"""

from __future__ import annotations

from typing import Any

from blockgz.option_defs import OptionDef, OptionSet
from blockgz.reader.spark.scan_plan import DEFAULT_SPLIT_BYTES

VALUE_FORMATS = ("binary", "json", "avro")


def _spark(name: str, kind: Any, default: Any, doc: str, **more: Any) -> OptionDef:
    return OptionDef(name, kind, default, doc, "reader", **more)


#: Options of ``spark.read.format("blockgz")`` (the archive's own come on top).
SPARK_READ_OPTIONS = OptionSet(
    _spark("path", "text", "", 'the archive: `.load("s3://bucket/prefix")` or a directory'),
    _spark("topics", "text", "", "the topics read, a comma list (default: all)"),
    _spark("topics.regex", "text", "", "a regex of the topics read"),
    _spark(
        "blockgz.split.size",
        "size",
        DEFAULT_SPLIT_BYTES,
        "compressed bytes per task (bytes, or with a unit: `32MiB`)",
        low=1,
        shown="`64MiB`",
    ),
    _spark(
        "value.schema",
        "text",
        "",
        'a DDL field list such as `"id BIGINT, name STRING"`: values are parsed as JSON '
        "into a struct of it instead of returned as bytes",
    ),
    _spark(
        "value.format",
        "choice",
        "binary",
        "`binary`; `json` with `value.schema`; `avro`: values in the type of the newest "
        "writer schema (or, with `schema.registry.url`, the registry's)",
        allowed=VALUE_FORMATS,
    ),
    _spark(
        "value.subject",
        "text",
        "",
        "the registry subject of wire-format Avro values",
        shown="`<topic>-value`",
    ),
    _spark(
        "value.converter.",
        "text",
        "",
        "the connector's registry settings (`value.converter.schema.registry.url`, ...)",
        origin="connect",
        prefix=True,
    ),
)
