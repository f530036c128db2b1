"""Connect-JSON order records: the JsonConverter's schema-and-payload envelope around
``{"id": n, "item": "i<n>"}``, for the exports and reads that need typed values (Avro, Parquet,
``value.schema``).

Record ``n`` is topic ``orders``, partition 0, offset ``n``, key ``k<n>``, timestamp ``T0 + n``
seconds, so offsets, ids and times of a test's records all follow from ``n``.

>>> import json
>>> record = order(7)
>>> (record.topic, record.partition, record.offset, record.key, record.timestamp_ms - T0)
('orders', 0, 7, b'k7', 7000)
>>> json.loads(record.value) == {"schema": ORDER, "payload": {"id": 7, "item": "i7"}}
True
>>> [r.offset for r in orders(3)]
[0, 1, 2]
>>> timestamp_of(7).isoformat()
'2025-11-22T08:26:47+00:00'
"""

from __future__ import annotations

import datetime as dt
import json

from blockgz.sink.records import KafkaRecord

#: The first record's timestamp (epoch ms), 2025-11-22T08:26:40Z.
T0 = 1_763_800_000_000
#: The Connect schema of the orders' values: a required ``int64`` id, an optional string item.
ORDER = {
    "type": "struct",
    "name": "Order",
    "optional": False,
    "fields": [
        {"field": "id", "type": "int64", "optional": False},
        {"field": "item", "type": "string", "optional": True},
    ],
}
#: Sink options that read the values as the JsonConverter's schema-and-payload envelope.
CONNECT_JSON = {
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "true",
}


def order(n: int) -> KafkaRecord:
    """Order ``n``: offset ``n`` of ``orders``/0, ``n`` seconds after :data:`T0`."""
    value = {"schema": ORDER, "payload": {"id": n, "item": f"i{n}"}}
    return KafkaRecord("orders", 0, n, T0 + n * 1000, b"k%d" % n, json.dumps(value).encode())


def orders(count: int) -> list[KafkaRecord]:
    """Orders ``0`` to ``count - 1``, a second apart."""
    return [order(n) for n in range(count)]


def timestamp_of(n: int) -> dt.datetime:
    """The timestamp of order ``n`` as an aware UTC datetime (what Spark's ``timestamp`` is)."""
    return dt.datetime.fromtimestamp((T0 + n * 1000) / 1000, dt.UTC)
