"""The write task runs Connect's transforms: objects hold the transformed records under the
routed topic, offsets stay those read, and a rejected record follows errors.tolerance."""

from __future__ import annotations

import json

import pytest

from blockgz.errors import BadRecordError, ConfigError
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from blockgz.store import LocalStore
from testkit.batches import arrow_batches

K = "org.apache.kafka.connect.transforms."
CHAIN = {
    "transforms": "add,route",
    "transforms.add.type": K + "InsertField$Value",
    "transforms.add.static.field": "origin",
    "transforms.add.static.value": "dc1",
    "transforms.route.type": K + "RegexRouter",
    "transforms.route.regex": "orders-(.*)",
    "transforms.route.replacement": "archived-$1",
}


def run(tmp_path, records, **options):
    config = SinkSettings.from_options({"path": str(tmp_path), "flush.size": "10", **options})
    return write_task(config, iter(arrow_batches(records, [7])))


def archived(tmp_path) -> dict[str, list]:
    found: dict[str, list] = {}
    for path in sorted((tmp_path / "topics").rglob("*.json")):
        if not path.name.startswith("."):
            rows = [json.loads(line) for line in path.read_bytes().splitlines()]
            found.setdefault(path.relative_to(tmp_path / "topics").parts[0], []).extend(rows)
    return found


def test_chain_inserts_the_field_and_routes_the_objects(tmp_path):
    records = [KafkaRecord("orders-eu", 0, n, 1000 + n, None, b'{"n": %d}' % n) for n in range(20)]
    message = run(tmp_path, records, **CHAIN)
    assert archived(tmp_path) == {"archived-eu": [{"n": n, "origin": "dc1"} for n in range(20)]}
    assert {f.topic for f in message.files} == {"archived-eu"}
    assert all(f.key.startswith("topics/archived-eu/") for f in message.files)
    assert all("archived-eu+0+" in f.key.rsplit("/", 1)[1] for f in message.files)
    assert message.next_offsets == {"orders-eu": {0: 20}}  # the topic read


def test_avro_shaped_values_from_the_json_converter_are_transformed_as_structs(tmp_path):
    schema = {"type": "struct", "name": "shop.Order", "optional": False,
              "fields": [{"field": "id", "type": "int64", "optional": False},
                         {"field": "pin", "type": "string", "optional": True}]}  # fmt: skip
    values = [json.dumps({"schema": schema, "payload": {"id": n, "pin": "1234"}}).encode()
              for n in range(3)]  # fmt: skip
    records = [KafkaRecord("t", 0, n, 5, None, v) for n, v in enumerate(values)]
    run(tmp_path, records, **{
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "transforms": "mask,ins",
        "transforms.mask.type": K + "MaskField$Value", "transforms.mask.fields": "pin",
        "transforms.ins.type": K + "InsertField$Value", "transforms.ins.offset.field": "off",
    })  # fmt: skip
    assert archived(tmp_path)["t"] == [{"id": n, "pin": "", "off": n} for n in range(3)]


def test_filter_drops_and_offsets_still_advance(tmp_path):
    records = [KafkaRecord("t", 0, n, 5, None, b"null" if n % 2 else b'{"n": 1}')
               for n in range(6)]  # fmt: skip
    records = [KafkaRecord(r.topic, 0, r.offset, 5, None, None if r.value == b"null" else r.value)
               for r in records]  # fmt: skip
    message = run(tmp_path, records, **{
        "transforms": "f", "transforms.f.type": K + "Filter", "transforms.f.predicate": "t",
        "predicates": "t", "predicates.t.type": K + "predicates.RecordIsTombstone",
    })  # fmt: skip
    assert archived(tmp_path) == {"t": [{"n": 1}] * 3}
    assert message.next_offsets == {"t": {0: 6}}


def test_rejected_records_fail_the_batch_or_go_to_the_dead_letter_queue(tmp_path):
    records = [KafkaRecord("t", 0, 0, 5, None, b'{"n": 1}'),
               KafkaRecord("t", 0, 1, 5, None, b"[1, 2]")]  # fmt: skip
    extract = {"transforms": "x", "transforms.x.type": K + "InsertField$Value",
               "transforms.x.topic.field": "topic"}  # fmt: skip
    with pytest.raises(BadRecordError, match=r"t-0@1: transform x: only maps"):
        run(tmp_path / "a", records, **extract)
    message = run(tmp_path / "b", records, **extract, **{
        "errors.tolerance": "all", "blockgz.deadletterqueue.store": "true"})  # fmt: skip
    assert archived(tmp_path / "b") == {"t": [{"n": 1, "topic": "t"}]}
    assert message.dead_letters == {"t": {0: 1}}
    store = LocalStore(tmp_path / "b")
    (info,) = list(store.list("_blockgz/blockgz/deadletters/"))
    doc = json.loads(store.get(info.key))
    assert doc["offset"] == 1 and doc["error"]["stage"] == "TRANSFORMATION"


def test_two_topics_routed_to_one_topic_partition_are_refused(tmp_path):
    records = [KafkaRecord("orders-eu", 0, 0, 5, None, b"{}"),
               KafkaRecord("orders-us", 0, 0, 5, None, b"{}")]  # fmt: skip
    with pytest.raises(ConfigError, match="route orders-eu-0 and orders-us-0 to the same"):
        run(tmp_path, records, **{**CHAIN, "transforms.route.replacement": "all"})


def test_a_transform_blockgz_does_not_run_is_refused_with_the_sink_config():
    with pytest.raises(ConfigError, match=r"com.acme.X: blockgz does not run this transform"):
        SinkSettings.from_options({"path": "/tmp/x", "transforms": "a",
                                 "transforms.a.type": "com.acme.X"})  # fmt: skip


def test_bytearray_values_stay_bytes_through_a_router(tmp_path):
    records = [KafkaRecord("orders-eu", 0, n, 5, None, b"\xff\x00raw%d" % n) for n in range(3)]
    options = {
        **CHAIN,
        "format.class": "io.confluent.connect.s3.format.bytearray.ByteArrayFormat",
        "transforms": "route",
    }
    run(tmp_path, records, **options)
    (path,) = [p for p in (tmp_path / "topics").rglob("*.bin") if not p.name.startswith(".")]
    assert path.parent.parent.name == "archived-eu"
    assert path.read_bytes() == b"".join(b"\xff\x00raw%d\n" % n for n in range(3))


def test_keys_are_decoded_by_the_key_converter_and_kept_when_untouched(tmp_path):
    records = [KafkaRecord("t", 0, n, 5, b'{"id": %d, "r": "eu"}' % n, b"{}") for n in range(2)]
    json_keys = {
        "format.json.envelope": "true",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
    }
    extract = {
        "transforms": "k",
        "transforms.k.type": K + "ExtractField$Key",
        "transforms.k.field": "id",
    }
    run(tmp_path / "a", records, **json_keys, **extract)
    assert [row["key"] for row in archived(tmp_path / "a")["t"]] == ["0", "1"]
    untouched = {
        **extract,
        "transforms.k.type": K + "InsertField$Value",
        "transforms.k.topic.field": "x",
    }
    run(tmp_path / "b", records, **json_keys, **untouched)
    assert [row["key"] for row in archived(tmp_path / "b")["t"]] == [
        '{"id": 0, "r": "eu"}',
        '{"id": 1, "r": "eu"}',
    ]


def test_a_topic_only_chain_takes_whole_batches_with_the_same_objects(tmp_path):
    records = [KafkaRecord("orders-eu", 0, n, 1000 + n, None, b'{"n": %d}' % n) for n in range(30)]
    route = {**CHAIN, "transforms": "route"}
    # The same routing under a predicate that is not about the topic: record by record.
    by_record = {
        **route,
        "transforms.route.predicate": "h",
        "transforms.route.negate": "true",
        "predicates": "h",
        "predicates.h.type": K + "predicates.HasHeaderKey",
        "predicates.h.name": "never",
    }
    whole = run(tmp_path / "a", records, **route)
    single = run(tmp_path / "b", records, **by_record)
    assert [f.key for f in whole.files] == [f.key for f in single.files]
    for f in whole.files:
        assert (tmp_path / "a" / f.key).read_bytes() == (tmp_path / "b" / f.key).read_bytes()
    assert whole.next_offsets == single.next_offsets == {"orders-eu": {0: 30}}
    assert {f.topic for f in whole.files} == {"archived-eu"}
