"""The loopback Schema Registry stand-in, driven by confluent-kafka's real client and serdes."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from blockgz.local_servers.schema_registry import CONTENT_TYPE
from testkit.schema_registries import FaultyRegistry


def record(*fields: dict, name: str = "Order") -> Schema:
    """An Avro record schema with these fields."""
    avsc = {"type": "record", "name": name, "namespace": "shop", "fields": list(fields)}
    return Schema(json.dumps(avsc), "AVRO")


ID = {"name": "id", "type": "long"}
ITEM = {"name": "item", "type": "string"}
V1 = record(ID, ITEM)
V2_WITH_DEFAULT = record(ID, ITEM, {"name": "qty", "type": "int", "default": 1})
V2_NO_DEFAULT = record(ID, ITEM, {"name": "qty", "type": "int"})
V2_ITEM_INT = record(ID, {"name": "item", "type": "int"})


@pytest.fixture(scope="module")
def server():
    with FaultyRegistry() as registry:
        yield registry


@pytest.fixture
def registry(server):
    """The module's registry, emptied for each test."""
    server.reset()
    return server


def client(registry: FaultyRegistry, **conf) -> SchemaRegistryClient:
    """A fresh client (so nothing comes from another client's cache)."""
    return SchemaRegistryClient({"url": registry.url, **conf})


def raises_registry_error(status: int, error_code: int):
    class Check:
        def __enter__(self):
            self.ctx = pytest.raises(SchemaRegistryError)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            suppressed = self.ctx.__exit__(*exc)
            err = self.info.value
            assert (err.http_status_code, err.error_code) == (status, error_code), err
            return suppressed

    return Check()


def http(registry, method: str, path: str, body: dict | None = None, headers=None):
    """A raw request: (status, content type, decoded JSON body)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(
        registry.url + path,
        data=data,
        method=method,
        headers={"Content-Type": CONTENT_TYPE, **(headers or {})},
    )
    try:
        with urllib.request.urlopen(request) as response:
            return response.status, response.headers["Content-Type"], json.load(response)
    except urllib.error.HTTPError as err:
        with err:
            return err.code, err.headers["Content-Type"], json.load(err)


# -- the client API ---------------------------------------------------------------------------


def test_register_and_read_back(registry):
    sr = client(registry)
    schema_id = sr.register_schema("orders-value", V1)
    assert schema_id == 1
    assert json.loads(sr.get_schema(schema_id).schema_str) == json.loads(V1.schema_str)

    other = client(registry)  # a second, independent client sees it (mock:// would not)
    assert json.loads(other.get_schema(schema_id).schema_str) == json.loads(V1.schema_str)
    latest = other.get_latest_version("orders-value")
    assert (latest.subject, latest.version, latest.schema_id) == ("orders-value", 1, 1)
    assert other.get_version("orders-value", 1).schema_id == 1
    assert other.get_versions("orders-value") == [1]
    assert other.get_subjects() == ["orders-value"]
    assert other.get_schema_types() == ["AVRO"]


def test_register_is_idempotent_and_ids_are_global(registry):
    sr = client(registry)
    first = sr.register_schema("a-value", V1)
    sr.clear_caches()  # so the client asks the registry again
    again = sr.register_schema("a-value", V1)
    reformatted = Schema(json.dumps(json.loads(V1.schema_str), indent=4), "AVRO")
    assert sr.register_schema("b-value", reformatted) == first == again
    assert registry.request_count("/subjects/a-value/versions", method="POST") == 2
    assert sr.get_versions("a-value") == [1]
    versions = sr.get_schema_versions(first)
    assert [(v.subject, v.version) for v in versions] == [("a-value", 1), ("b-value", 1)]
    assert sr.register_schema("a-value", V2_WITH_DEFAULT) == first + 1


def test_lookup_schema(registry):
    sr = client(registry)
    sr.register_schema("orders-value", V1)
    sr.clear_caches()
    found = sr.lookup_schema("orders-value", V1)
    assert (found.subject, found.version, found.schema_id) == ("orders-value", 1, 1)
    assert registry.request_count("/subjects/orders-value", method="POST") == 1
    with raises_registry_error(404, 40403):
        sr.lookup_schema("orders-value", V2_WITH_DEFAULT)
    with raises_registry_error(404, 40401):
        sr.lookup_schema("nothing-value", V1)


def test_not_found_errors(registry):
    sr = client(registry)
    sr.register_schema("orders-value", V1)
    with raises_registry_error(404, 40403):
        sr.get_schema(99)
    with raises_registry_error(404, 40401):
        sr.get_latest_version("nothing-value")
    with raises_registry_error(404, 40402):
        sr.get_version("orders-value", 7)
    with raises_registry_error(422, 42202):
        sr.get_version("orders-value", 0)


def test_invalid_schemas_are_rejected(registry):
    sr = client(registry)
    with raises_registry_error(422, 42201):
        sr.register_schema("x-value", Schema('{"type": "record", "name": "NoFields"}', "AVRO"))
    with raises_registry_error(422, 42201):
        sr.register_schema("x-value", Schema("{not json", "AVRO"))
    with raises_registry_error(422, 42201) as err:
        sr.register_schema("x-value", Schema('{"type": "object"}', "JSON"))
    assert "only AVRO" in err.value.error_message
    assert sr.get_subjects() == []


def test_delete_subject_is_soft_then_permanent(registry):
    sr = client(registry)
    sr.register_schema("orders-value", V1)
    sr.register_schema("orders-value", V2_WITH_DEFAULT)
    assert sr.delete_subject("orders-value") == [1, 2]
    assert sr.get_subjects() == []
    assert sr.get_subjects(deleted=True) == ["orders-value"]
    sr.clear_caches()
    assert sr.get_schema(2).schema_str  # old data still decodes
    assert sr.delete_subject("orders-value", permanent=True) == [1, 2]
    assert sr.get_subjects(deleted=True) == []


def test_delete_version_and_other_lookups(registry):
    sr = client(registry)
    sr.set_compatibility("s-value", "NONE")
    sr.register_schema("s-value", V1)
    sr.register_schema("s-value", V2_ITEM_INT)
    assert sr.delete_version("s-value", 2) == 2
    assert sr.get_versions("s-value") == [1]
    with raises_registry_error(404, 40406):
        sr.delete_version("s-value", 2)
    with raises_registry_error(404, 40405):
        sr.delete_subject("s-value", permanent=True)
    assert sr.delete_version("s-value", 2, permanent=True) == 2
    assert sr.get_versions("s-value", deleted=True) == [1]
    assert sr.get_subjects_by_schema_id(1) == ["s-value"]
    latest = sr.get_latest_version("s-value")
    by_guid = sr.get_schema_by_guid(latest.guid)
    assert json.loads(by_guid.schema_str) == json.loads(latest.schema.schema_str)


def test_schema_references(registry):
    sr = client(registry)
    address = {"type": "record", "name": "Address", "namespace": "shop", "fields": [ITEM]}
    sr.register_schema("address", Schema(json.dumps(address), "AVRO"))
    customer = {
        "type": "record",
        "name": "Customer",
        "namespace": "shop",
        "fields": [{"name": "home", "type": "shop.Address"}],
    }
    ref = SchemaReference("shop.Address", "address", 1)
    customer_id = sr.register_schema("customers-value", Schema(json.dumps(customer), "AVRO", [ref]))
    sr.clear_caches()
    fetched = sr.get_schema(customer_id)
    assert [(r.name, r.subject, r.version) for r in fetched.references] == [
        ("shop.Address", "address", 1)
    ]
    with raises_registry_error(422, 42201):  # the reference is needed to resolve the name
        sr.register_schema("orphans-value", Schema(json.dumps(customer), "AVRO"))


# -- serializer and deserializer ----------------------------------------------------------------


def test_avro_round_trip_and_wire_format(registry):
    ctx = SerializationContext("orders", MessageField.VALUE)
    sr = client(registry)
    serialize = AvroSerializer(sr, V1.schema_str)
    data = serialize({"id": 7, "item": "tea"}, ctx)
    schema_id = sr.get_latest_version("orders-value").schema_id
    assert data[0] == 0 and int.from_bytes(data[1:5], "big") == schema_id

    deserialize = AvroDeserializer(client(registry))  # a fresh client: fetches by id
    assert deserialize(data, ctx) == {"id": 7, "item": "tea"}
    assert deserialize(data, ctx) == {"id": 7, "item": "tea"}
    assert registry.request_count(f"/schemas/ids/{schema_id}") == 1  # cached after the first


def test_serializer_without_auto_register_looks_the_schema_up(registry):
    sr = client(registry)
    sr.register_schema("orders-value", V1)
    sr.clear_caches()
    registry.clear_requests()
    conf = {"auto.register.schemas": False}
    serialize = AvroSerializer(sr, V1.schema_str, conf=conf)
    data = serialize({"id": 1, "item": "x"}, SerializationContext("orders", MessageField.VALUE))
    assert int.from_bytes(data[1:5], "big") == 1
    assert registry.requests == [
        ("GET", "/associations/resources/-/orders"),  # the default subject strategy's question
        ("POST", "/subjects/orders-value"),
    ]


def test_deserializer_reads_old_data_with_the_latest_schema(registry):
    ctx = SerializationContext("orders", MessageField.VALUE)
    sr = client(registry)
    old = AvroSerializer(sr, V1.schema_str)({"id": 1, "item": "x"}, ctx)
    sr.register_schema("orders-value", V2_WITH_DEFAULT)
    deserialize = AvroDeserializer(sr, conf={"use.latest.version": True})
    assert deserialize(old, ctx) == {"id": 1, "item": "x", "qty": 1}


# -- compatibility -------------------------------------------------------------------------------


def test_backward_is_the_default(registry):
    sr = client(registry)
    assert sr.get_compatibility() == "BACKWARD"
    sr.register_schema("orders-value", V1)
    assert sr.test_compatibility("orders-value", V2_WITH_DEFAULT) is True
    assert sr.test_compatibility("orders-value", V2_NO_DEFAULT) is False
    with raises_registry_error(409, 409) as err:
        sr.register_schema("orders-value", V2_NO_DEFAULT)
    assert "incompatible" in err.value.error_message
    with raises_registry_error(409, 409):
        sr.register_schema("orders-value", V2_ITEM_INT)
    assert sr.register_schema("orders-value", V2_WITH_DEFAULT) == 2
    assert sr.get_versions("orders-value") == [1, 2]


def test_none_accepts_anything_and_is_per_subject(registry):
    sr = client(registry)
    sr.register_schema("orders-value", V1)
    assert sr.set_compatibility("orders-value", "NONE") == {"compatibility": "NONE"}
    assert sr.get_compatibility("orders-value") == "NONE"
    assert sr.get_compatibility() == "BACKWARD"
    assert sr.register_schema("orders-value", V2_ITEM_INT) == 2
    with raises_registry_error(404, 40408):
        sr.get_compatibility("other-value")
    status, _, body = http(registry, "GET", "/config/other-value?defaultToGlobal=true")
    assert (status, body) == (200, {"compatibilityLevel": "BACKWARD"})


def test_forward_and_full(registry):
    sr = client(registry)
    sr.set_compatibility(level="FORWARD")
    sr.register_schema("fwd-value", V2_NO_DEFAULT)
    assert sr.test_compatibility("fwd-value", V1) is False  # v2 readers need qty
    sr.register_schema("fwd2-value", V1)
    sr.register_schema("fwd2-value", V2_NO_DEFAULT)  # old readers skip qty
    assert sr.get_versions("fwd2-value") == [1, 2]
    with raises_registry_error(409, 409):
        sr.register_schema("fwd2-value", V2_ITEM_INT)

    assert sr.set_compatibility("full-value", "full") == {"compatibility": "FULL"}
    sr.register_schema("full-value", V1)
    with raises_registry_error(409, 409):
        sr.register_schema("full-value", V2_NO_DEFAULT)  # forward yes, backward no
    sr.register_schema("full-value", V2_WITH_DEFAULT)
    assert sr.get_versions("full-value") == [1, 2]


def test_transitive_checks_every_version(registry):
    sr = client(registry)
    a_string = record(ID, {"name": "a", "type": "string"})
    no_a = record(ID)
    a_int = record(ID, {"name": "a", "type": "int", "default": 0})
    for subject, level in (("plain-value", "BACKWARD"), ("trans-value", "BACKWARD_TRANSITIVE")):
        sr.set_compatibility(subject, level)
        sr.register_schema(subject, a_string)
        sr.register_schema(subject, no_a)
    assert sr.register_schema("plain-value", a_int) == 3
    assert sr.test_compatibility("trans-value", a_int) is True  # against the latest only
    assert sr.test_compatibility("trans-value", a_int, version=1) is False
    assert sr.test_compatibility_all_versions("trans-value", a_int) is False
    with raises_registry_error(409, 409):
        sr.register_schema("trans-value", a_int)


def test_verbose_compatibility_messages(registry):
    client(registry).register_schema("orders-value", V1)
    status, _, body = http(
        registry,
        "POST",
        "/compatibility/subjects/orders-value/versions/latest?verbose=true",
        {"schema": V2_ITEM_INT.schema_str},
    )
    assert status == 200 and body["is_compatible"] is False
    assert any("TYPE_MISMATCH" in message for message in body["messages"])


def test_invalid_compatibility_level(registry):
    with raises_registry_error(422, 42203):
        client(registry).set_compatibility(level="SIDEWAYS")


# -- HTTP details, auth, faults -----------------------------------------------------------------


def test_http_shape(registry):
    status, content_type, body = http(registry, "POST", "/subjects/s/versions", {"schema": '"int"'})
    assert (status, content_type) == (200, CONTENT_TYPE)
    assert {"id": 1, "version": 1, "subject": "s"}.items() <= body.items()
    status, _, body = http(registry, "GET", "/schemas/ids/1?subject=s&format=x")
    assert status == 200 and body["schema"] == '"int"' and "schemaType" not in body
    status, content_type, body = http(registry, "GET", "/no/such/path")
    assert (status, content_type, body["error_code"]) == (404, CONTENT_TYPE, 404)
    status, _, body = http(registry, "PUT", "/subjects")
    assert (status, body["error_code"]) == (405, 405)


def test_basic_auth():
    with FaultyRegistry(users={"alice": "secret"}) as registry:
        with raises_registry_error(401, 40101):
            client(registry).get_subjects()
        with raises_registry_error(401, 40101):
            client(registry, **{"basic.auth.user.info": "alice:wrong"}).get_subjects()
        sr = client(registry, **{"basic.auth.user.info": "alice:secret"})
        assert sr.register_schema("orders-value", V1) == 1
        token = base64.b64encode(b"alice:secret").decode()
        status, _, body = http(
            registry, "GET", "/subjects", headers={"Authorization": f"Basic {token}"}
        )
        assert (status, body) == (200, ["orders-value"])


def test_fail_next_and_request_counting(registry):
    sr = client(registry, **{"max.retries": 0})
    sr.register_schema("orders-value", V1)
    sr.clear_caches()
    registry.clear_requests()
    registry.fail_next(1, status=503)
    with raises_registry_error(503, 50001):
        sr.get_schema(1)
    assert sr.get_schema(1).schema_str

    registry.fail_next(1, status=503, path="/schemas/ids")
    retrying = client(registry, **{"max.retries": 1, "retries.wait.ms": 1})
    assert retrying.get_schema(1).schema_str  # the retry gets through
    assert registry.request_count("/schemas/ids/1") == 4
    assert registry.request_count("/schemas/ids/1", method="POST") == 0
    assert registry.requests == [("GET", "/schemas/ids/1")] * 4


def test_outage_keeps_the_state_and_the_url(registry):
    sr = client(registry, **{"max.retries": 0})
    schema_id = sr.register_schema("orders-value", V1)
    sr.clear_caches()
    url = registry.url
    with registry.outage():
        assert not registry.running
        with pytest.raises(Exception) as err:  # httpx's (or httpx2's) ConnectError
            sr.get_schema(schema_id)
        assert type(err.value).__name__ == "ConnectError"
    assert registry.url == url
    assert sr.get_schema(schema_id).schema_str
