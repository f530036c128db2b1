"""Kafka's columns as Spark names and types them, in Arrow: shared by the sink and the reader.

>>> [f.name for f in kafka_arrow_schema(False)]
['key', 'value', 'topic', 'partition', 'offset', 'timestamp', 'timestampType']
"""

from __future__ import annotations

from typing import Any


def kafka_arrow_schema(include_headers: bool, value_type: Any = None):
    """The Arrow schema Spark expects from a Python source producing Kafka rows.

    Spark compares with ``equals``: timestamps are ``us`` in UTC, ``partition`` is int32
    and the headers list's item field is named ``element``. ``value_type`` replaces
    ``binary`` for a parsed value (an Arrow struct).
    """
    import pyarrow as pa

    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary() if value_type is None else value_type),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        fields.append(pa.field("headers", pa.list_(pa.field("element", header))))
    return pa.schema(fields)
