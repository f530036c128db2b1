"""Binary-safe bytearray: ``format.bytearray.framing=length-prefixed`` keeps any bytes.

Values holding the separator (Protobuf, images, anything binary) are written with a 4-byte
length before each, in every compression, and read back exactly by the reader, the index and
``blockgz cat``; the separator framing stays the default, as in Confluent.
"""

from __future__ import annotations

import base64
import json
import random

import pytest
from click.testing import CliRunner

from blockgz.blocks.framing import LengthPrefixed
from blockgz.cli import main
from blockgz.errors import BadRecordError, ConfigError
from blockgz.objects.indexed import IndexedReader
from blockgz.objects.stream import stream_records
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from blockgz.store import LocalStore
from testkit.batches import arrow_batches

LENGTH = {"format.class": "bytearray", "format.bytearray.framing": "length-prefixed"}


def binary_values(n: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    values = [b"", b"\n", b"a\nb\r\n", b"\x00" * 5, b"\xff\xfe\n\n"]
    values += [rng.randbytes(rng.randrange(0, 300)) for _ in range(n - len(values))]
    return values


def records(values: list[bytes]) -> list[KafkaRecord]:
    return [KafkaRecord("t", 0, 10 + i, 0, None, v) for i, v in enumerate(values)]


@pytest.mark.parametrize("compression", ["none", "gzip", "blockgzip"])
def test_any_bytes_round_trip(tmp_path, compression):
    values = binary_values(200)
    options = {
        "path": str(tmp_path),
        **LENGTH,
        "s3.compression.type": compression,
        "flush.size": "120",
        **({"s3.compression.block.size": "2KiB"} if compression == "blockgzip" else {}),
    }
    batches = iter(arrow_batches(records(values)))
    files = write_task(SinkSettings.from_options(options), batches).files
    assert [f.records for f in files if f.role == "value"] == [120, 80]
    store = LocalStore(tmp_path)
    got = []
    for f in [f for f in files if f.role == "value"]:
        if compression == "blockgzip":
            with IndexedReader.open_object(store, f.key) as obj:
                assert isinstance(obj.index.framing, LengthPrefixed)
                got += list(obj.records())
        else:
            got += list(stream_records(store, f.key, f.first_offset, framing=LengthPrefixed()))
    assert [r.value for r in got] == values
    assert [r.offset for r in got] == list(range(10, 210))
    if compression == "blockgzip":  # a seek lands inside the length-prefixed blocks
        with IndexedReader.open_object(store, files[0].key) as obj:
            assert [r.value for r in obj.seek(100, count=3)] == values[90:93]


def test_the_separator_default_still_refuses_a_newline_and_says_what_to_do(tmp_path):
    options = {"path": str(tmp_path), "format.class": "bytearray"}
    with pytest.raises(BadRecordError) as info:
        write_task(SinkSettings.from_options(options), iter(arrow_batches(records([b"a\nb"]))))
    assert "t-0@10" in str(info.value)
    assert "format.bytearray.framing=length-prefixed" in str(info.value)


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"format.class": "json", "format.bytearray.framing": "length-prefixed"}, ["bytearray"]),
        ({**LENGTH, "format.bytearray.separator": "|"}, ["separator", "length"]),
        ({"format.class": "bytearray", "format.bytearray.framing": "varint"}, ["separator, len"]),
    ],
)
def test_framing_config_is_checked(tmp_path, options, words):
    with pytest.raises(ConfigError) as info:
        SinkSettings.from_options({"path": str(tmp_path), **options})
    for word in words:
        assert word in str(info.value)


def test_cat_and_seek_print_binary_values_as_base64(tmp_path):
    values = binary_values(20)
    options = {"path": str(tmp_path), **LENGTH}
    files = write_task(SinkSettings.from_options(options), iter(arrow_batches(records(values))))
    path = tmp_path / files.files[0].key
    runner = CliRunner()
    result = runner.invoke(
        main,
        ["cat", "--output", "json", "-O", "format.bytearray.framing=length-prefixed", str(path)],
    )
    assert result.exit_code == 0, result.output
    docs = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["offset"] for d in docs] == list(range(10, 30))
    decoded = [
        base64.b64decode(d["value_base64"]) if "value_base64" in d else d["value"].encode()
        for d in docs
    ]
    assert decoded == values
    result = runner.invoke(
        main,
        [
            "seek",
            "--scan",
            "--offset",
            "12",
            "--count",
            "1",
            "--output",
            "json",
            "-O",
            "format.bytearray.framing=length-prefixed",
            str(path),
        ],
    )
    assert json.loads(result.stdout) == {"offset": 12, "value": "a\nb\r\n"}
