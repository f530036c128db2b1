"""What replay sends as each value and key of an Avro archive whose entries were never Avro in
Kafka (the String and ByteArray converters): the bytes as produced, with no registry asked,
also from an archive whose files do not record their converter (written before blockgz
recorded it)."""

from __future__ import annotations

import pytest

from blockgz.errors import ConfigError
from blockgz.reader import open_archive
from blockgz.reader.restore.value_bytes import AvroToWire, KafkaBytes
from blockgz.registry import RegistrySettings
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from testkit.batches import arrow_batches

#: Never contacted: plain entries need no id.
NOWHERE = RegistrySettings(url="http://127.0.0.1:9")


def avro_archive(root, records) -> None:
    config = SinkSettings.from_options(
        {
            "path": str(root),
            "format.class": "io.confluent.connect.s3.format.avro.AvroFormat",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "store.kafka.keys": "true",
            "keys.format.class": "avro",
            "flush.size": "2",
        }
    )
    write_task(config, iter(arrow_batches(records)))


def test_string_values_and_bytes_keys_go_back_as_they_were_produced(tmp_path):
    records = [
        KafkaRecord("t", 0, n, 1000 + n, None if n == 2 else b"\x00key%d" % n,
                    f"caf\u00e9 {n}".encode(), None)
        for n in range(5)
    ]  # fmt: skip
    avro_archive(tmp_path, records)
    with open_archive(str(tmp_path)) as archive:
        # No manifest records the converters: the schemas decide, and a registry is asked for.
        assert KafkaBytes.check(archive, "t", [0], NOWHERE, "t2").wire is not None
        with pytest.raises(ConfigError, match="kept its keys and values as Avro"):
            KafkaBytes.check(archive, "t", [0], None, "t2")
        wire = AvroToWire(archive, "t", NOWHERE, "t-restored")
        values, keys = [], []
        for _, block in archive.record_blocks("t", [0]):
            values += wire(0, block)
            keys += wire.keys(0, block)
    assert values == [r.value for r in records]
    assert keys == [r.key for r in records]
