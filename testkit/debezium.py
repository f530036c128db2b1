"""Debezium change events of a MySQL ``customers`` table, as Debezium's JSON converter emits
them (``{"schema", "payload"}`` with schemas enabled), written by hand after the MySQL
connector's documented example (server ``dbserver1``, database ``inventory``).

The table has the tutorial's columns (``id``, ``first_name``, ``last_name``, ``email``) and a
few more, so every temporal and numeric type Debezium's converters emit is in one event:
``io.debezium.time.Date``/``Timestamp``/``MicroTimestamp``/``MicroTime``/``ZonedTimestamp``/
``Year``, Connect's ``Decimal``, ``io.debezium.data.VariableScaleDecimal`` (a struct),
``io.debezium.data.Enum``/``Json``/``Bits``. ``before`` and ``after`` share the one named
struct ``dbserver1.inventory.customers.Value``, as in every Debezium envelope.
"""

from __future__ import annotations

import base64
from typing import Any

VALUE_NAME = "dbserver1.inventory.customers.Value"
ENVELOPE_NAME = "dbserver1.inventory.customers.Envelope"


def _f(field: str, kind: str, optional: bool = False, **more: Any) -> dict[str, Any]:
    return {"type": kind, "optional": optional, "field": field, **more}


def _value_struct(field: str) -> dict[str, Any]:
    return {
        "type": "struct",
        "fields": [
            _f("id", "int32"),
            _f("first_name", "string"),
            _f("last_name", "string"),
            _f("email", "string"),
            _f("birth_date", "int32", True, name="io.debezium.time.Date", version=1),
            _f("created_at", "int64", True, name="io.debezium.time.Timestamp", version=1),
            _f("seen_at", "int64", True, name="io.debezium.time.MicroTimestamp", version=1),
            _f("opens_at", "int64", True, name="io.debezium.time.MicroTime", version=1),
            _f("updated_at", "string", True, name="io.debezium.time.ZonedTimestamp", version=1),
            _f("since", "int32", True, name="io.debezium.time.Year", version=1),
            _f(
                "balance",
                "bytes",
                True,
                name="org.apache.kafka.connect.data.Decimal",
                version=1,
                parameters={"scale": "2", "connect.decimal.precision": "10"},
            ),
            {
                "type": "struct",
                "fields": [_f("scale", "int32"), _f("value", "bytes")],
                "optional": True,
                "name": "io.debezium.data.VariableScaleDecimal",
                "version": 1,
                "doc": "Variable scaled decimal",
                "field": "score",
            },
            _f(
                "tier",
                "string",
                True,
                name="io.debezium.data.Enum",
                version=1,
                parameters={"allowed": "gold,silver,bronze"},
            ),
            _f("prefs", "string", True, name="io.debezium.data.Json", version=1),
            _f(
                "flags",
                "bytes",
                True,
                name="io.debezium.data.Bits",
                version=1,
                parameters={"length": "8"},
            ),
        ],
        "optional": True,
        "name": VALUE_NAME,
        "field": field,
    }


SOURCE_STRUCT = {
    "type": "struct",
    "fields": [
        _f("version", "string"),
        _f("connector", "string"),
        _f("name", "string"),
        _f("ts_ms", "int64"),
        _f(
            "snapshot",
            "string",
            True,
            name="io.debezium.data.Enum",
            version=1,
            parameters={"allowed": "true,last,false,incremental"},
            default="false",
        ),
        _f("db", "string"),
        _f("sequence", "string", True),
        _f("table", "string", True),
        _f("server_id", "int64"),
        _f("gtid", "string", True),
        _f("file", "string"),
        _f("pos", "int64"),
        _f("row", "int32"),
        _f("thread", "int64", True),
        _f("query", "string", True),
    ],
    "optional": False,
    "name": "io.debezium.connector.mysql.Source",
    "field": "source",
}

VALUE_SCHEMA = {
    "type": "struct",
    "fields": [
        _value_struct("before"),
        _value_struct("after"),
        SOURCE_STRUCT,
        _f("op", "string"),
        _f("ts_ms", "int64", True),
        {
            "type": "struct",
            "fields": [
                _f("id", "string"),
                _f("total_order", "int64"),
                _f("data_collection_order", "int64"),
            ],
            "optional": True,
            "name": "event.block",
            "version": 1,
            "field": "transaction",
        },
    ],
    "optional": False,
    "name": ENVELOPE_NAME,
    "version": 1,
}

KEY_SCHEMA = {
    "type": "struct",
    "fields": [_f("id", "int32")],
    "optional": False,
    "name": "dbserver1.inventory.customers.Key",
}


def _b64(number: int, length: int) -> str:
    return base64.b64encode(number.to_bytes(length, "big", signed=True)).decode()


def row(customer_id: int, email: str) -> dict[str, Any]:
    """One row of the table as Debezium's JSON payload holds it."""
    return {
        "id": customer_id,
        "first_name": "Sally",
        "last_name": "Thomas",
        "email": email,
        "birth_date": 10_957,  # 2000-01-01
        "created_at": 1_700_000_000_123,
        "seen_at": 1_700_000_000_123_456,
        "opens_at": 32_400_000_000,  # 09:00
        "updated_at": "2023-11-14T22:13:20.123Z",
        "since": 2019,
        "balance": _b64(123_456, 3),  # 1234.56
        "score": {"scale": 3, "value": _b64(-98_765, 3)},  # -98.765
        "tier": "gold",
        "prefs": '{"news":true}',
        "flags": base64.b64encode(b"\x05").decode(),
    }


def _source(position: int) -> dict[str, Any]:
    return {
        "version": "3.0.0.Final",
        "connector": "mysql",
        "name": "dbserver1",
        "ts_ms": 1_700_000_000_000,
        "snapshot": "false",
        "db": "inventory",
        "sequence": None,
        "table": "customers",
        "server_id": 223344,
        "gtid": None,
        "file": "mysql-bin.000003",
        "pos": position,
        "row": 0,
        "thread": 7,
        "query": None,
    }


def update_event(customer_id: int = 1004) -> dict[str, Any]:
    """An update (``op=u``): ``before`` and ``after`` both set."""
    payload = {
        "before": row(customer_id, "annek@noanswer.org"),
        "after": row(customer_id, "anne@example.com"),
        "source": _source(364),
        "op": "u",
        "ts_ms": 1_700_000_000_500,
        "transaction": None,
    }
    return {"schema": VALUE_SCHEMA, "payload": payload}


def create_event(customer_id: int = 1005) -> dict[str, Any]:
    """An insert (``op=c``): ``before`` is null."""
    payload = {
        "before": None,
        "after": row(customer_id, "new@example.com"),
        "source": _source(154),
        "op": "c",
        "ts_ms": 1_700_000_000_400,
        "transaction": {"id": "tx-1", "total_order": 1, "data_collection_order": 1},
    }
    return {"schema": VALUE_SCHEMA, "payload": payload}


def key_event(customer_id: int) -> dict[str, Any]:
    """The record key, as Debezium's JSON converter writes it with schemas."""
    return {"schema": KEY_SCHEMA, "payload": {"id": customer_id}}
