"""``errors.tolerance=all`` with the object-store dead-letter queue: nothing lost, nothing twice.

Write tasks run on local directories here (the Kafka queue and the crash between a send and
the manifest are in ``tests/integration/test_faithful_export.py``).
"""

from __future__ import annotations

import base64
import json
import random

import pytest

from blockgz.errors import BadRecordError, ConfigError
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.commit import write_manifest
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from blockgz.store import LocalStore
from testkit.batches import arrow_batches

STORE_DLQ = {"errors.tolerance": "all", "blockgz.deadletterqueue.store": "true"}


def mixed_records(n: int, bad_share: float, seed: int = 3) -> tuple[list[KafkaRecord], set[int]]:
    """JSON records with a ``country``; ``bad_share`` of them are not JSON or lack the field."""
    rng = random.Random(seed)
    records, bad = [], set()
    for offset in range(n):
        roll = rng.random()
        if roll < bad_share / 2:
            value = b"\xffnot json"
            bad.add(offset)
        elif roll < bad_share:
            value = json.dumps({"i": offset}).encode()  # no country: the partitioner fails
            bad.add(offset)
        else:
            value = json.dumps({"i": offset, "country": ["DE", "FR"][offset % 2]}).encode()
        records.append(KafkaRecord("t", 0, offset, 1000 + offset, b"k%d" % offset, value))
    return records, bad


def run(tmp_path, records, **options):
    config = SinkSettings.from_options(
        {
            "path": str(tmp_path),
            "partitioner.class": "field",
            "partition.field.name": "country",
            "flush.size": "25",
            **options,
        }
    )
    return config, write_task(config, iter(arrow_batches(records, [97, 250])))


def dead_lettered(tmp_path) -> list[dict]:
    store = LocalStore(tmp_path)
    docs = []
    for info in store.list("_blockgz/blockgz/deadletters/"):
        docs += [json.loads(line) for line in store.get(info.key).splitlines()]
    return docs


def archived_offsets(tmp_path) -> list[int]:
    offsets = []
    for path in (tmp_path / "topics").rglob("*.json"):
        if ".timestamps." in path.name:
            continue
        offsets += [json.loads(line)["i"] for line in path.read_bytes().splitlines()]
    return offsets


def test_ten_percent_bad_records_good_plus_dead_letters_equal_the_input(tmp_path):
    records, bad = mixed_records(1000, 0.10)
    config, message = run(tmp_path, records, **STORE_DLQ)
    archived = archived_offsets(tmp_path)
    dead = dead_lettered(tmp_path)
    assert sorted(archived + [d["offset"] for d in dead]) == list(range(1000))
    assert {d["offset"] for d in dead} == bad and 80 < len(bad) < 120
    assert message.dead_letters == {"t": {0: len(bad)}}
    assert message.next_offsets == {"t": {0: 1000}}
    # The original key and value survive, with the reason.
    sample = next(d for d in dead if d["offset"] in bad)
    assert base64.b64decode(sample["key"]) == b"k%d" % sample["offset"]
    assert base64.b64decode(sample["value"]) == records[sample["offset"]].value
    assert sample["error"]["class"] == "BadRecordError"
    assert sample["error"]["stage"] == "TASK_PUT"
    # The manifest counts them, and counts every input record once.
    store, prefix = config.make_store()
    log = config.manifest_log(store, prefix)
    write_manifest(log, 0, [message])
    manifest = log.read_batch(0)
    assert manifest.dead_letters == {"t": {0: len(bad)}}
    assert manifest.records == 1000


@pytest.mark.parametrize(
    ("layout", "name"),
    [
        ({}, "t+0+0000000007.jsonl"),
        (
            {"file.delim": "-", "filename.offset.zero.pad.width": "20"},
            "t-0-00000000000000000007.jsonl",
        ),
        ({"filename.offset.zero.pad.width": "3"}, "t+0+007.jsonl"),
    ],
)
def test_dead_letter_keys_follow_the_layouts_file_delim_and_padding(tmp_path, layout, name):
    records = [KafkaRecord("t", 0, 7, 1000, b"k", b"\xffnot json")]
    config, message = run(tmp_path, records, **STORE_DLQ, **layout)
    assert message.dead_letters == {"t": {0: 1}}
    keys = [info.key for info in LocalStore(tmp_path).list("_blockgz/blockgz/deadletters/")]
    assert keys == [f"_blockgz/blockgz/deadletters/t/0/{name}"]
    # The same name as a data object of that first offset would have under the layout.
    assert name == config.layout.file_name("t", 0, 7, ".jsonl")


def test_a_replay_writes_the_same_dead_letter_objects(tmp_path):
    records, _ = mixed_records(300, 0.2)
    run(tmp_path / "a", records, **STORE_DLQ)
    run(tmp_path / "b", records, **STORE_DLQ)
    # Intents are named per task attempt (blockgz.commits.intents), so each run has its own.
    a, b = (
        {
            p.relative_to(root): p.read_bytes()
            for p in root.rglob("*.*")
            if "intents" not in p.relative_to(root).parts
        }
        for root in (tmp_path / "a", tmp_path / "b")
    )
    assert a and a == b


def test_without_tolerance_the_first_bad_record_fails_the_batch(tmp_path):
    records, bad = mixed_records(200, 0.1)
    with pytest.raises(BadRecordError, match=rf"t-0@{min(bad)}:"):
        run(tmp_path, records)
    assert not list(tmp_path.rglob("*.json")), "a failed task leaves nothing behind"


def test_skipped_nulls_are_reported_to_the_queue(tmp_path):
    records = [KafkaRecord("t", 0, n, 0, None, b'{"country": "DE"}') for n in range(5)]
    records[2] = KafkaRecord("t", 0, 2, 0, b"gone", None)
    _, message = run(tmp_path, records, **STORE_DLQ, **{"behavior.on.null.values": "ignore"})
    assert message.dead_letters == {"t": {0: 1}} and message.skipped_nulls == 0
    (doc,) = dead_lettered(tmp_path)
    assert doc["offset"] == 2 and doc["value"] is None
    _, message = run(
        tmp_path / "quiet",
        records,
        **STORE_DLQ,
        **{"behavior.on.null.values": "ignore", "report.null.values.to.dlq": "false"},
    )
    assert message.dead_letters == {} and message.skipped_nulls == 1


def test_avro_files_left_empty_by_a_bad_first_record_are_dropped(tmp_path):
    records = [KafkaRecord("t", 0, 0, 0, None, b"\x00\xff")] + [
        KafkaRecord("t", 0, n, 0, None, b"abc") for n in range(1, 4)
    ]
    records[0] = KafkaRecord("t", 0, 0, 0, None, b"\xff\xfe")  # not UTF-8
    config = SinkSettings.from_options(
        {
            "path": str(tmp_path),
            "format.class": "avro",
            "value.converter": "string",
            **STORE_DLQ,
        }
    )
    message = write_task(config, iter(arrow_batches(records)))
    assert message.dead_letters == {"t": {0: 1}}
    (file,) = [f for f in message.files if f.role == "value"]
    assert (file.first_offset, file.records) == (1, 3)
    assert dead_lettered(tmp_path)[0]["error"]["stage"] == "VALUE_CONVERTER"


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"errors.tolerance": "all"}, ["errors.deadletterqueue.topic.name", "store=true"]),
        ({"errors.tolerance": "some"}, ["none, all"]),
        (
            {"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq"},
            ["kafka.bootstrap.servers"],
        ),
    ],
)
def test_dead_letter_config_is_checked(tmp_path, options, words):
    with pytest.raises(ConfigError) as info:
        SinkSettings.from_options({"path": str(tmp_path), **options})
    for word in words:
        assert word in str(info.value)


def test_the_batch_path_around_bad_records_writes_what_the_record_path_writes(tmp_path):
    """Bad records split a batch into runs; the objects and dead letters are the same as when
    every record goes through the record path (a batch of two partitions takes that path)."""

    def two_partitions(n):
        records, _ = mixed_records(n, 0.05)
        for r in records[n // 2 :]:
            r.partition = 1
            r.offset -= n // 2
        return records

    def tree(root):
        return {
            str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
        }

    options = {"flush.size": "30", "s3.compression.type": "blockgzip", **STORE_DLQ}
    records = two_partitions(600)
    per_partition = (
        [r for r in records if r.partition == 0],
        [r for r in records if r.partition == 1],
    )
    # A: batches holding both partitions (record by record).
    mixed = [r for pair in zip(*per_partition, strict=True) for r in pair]
    config = SinkSettings.from_options({"path": str(tmp_path / "a"), **options})
    write_task(config, iter(arrow_batches(mixed, [40] * 30)))
    # B: one partition per batch (the batch path, split around the bad records).
    config = SinkSettings.from_options({"path": str(tmp_path / "b"), **options})
    batches = arrow_batches(per_partition[0], [70] * 10) + arrow_batches(
        per_partition[1], [70] * 10
    )
    message = write_task(config, iter(batches))
    assert tree(tmp_path / "a") == tree(tmp_path / "b")
    assert sum(message.dead_letters["t"].values()) > 10
