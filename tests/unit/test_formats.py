"""Formats and compressions come from one registry each (:mod:`blockgz.formats`).

* Nothing outside ``blockgz/formats`` compares a format or compression name: it asks the
  registry or the format's attributes.
* A format made here, in the test, is written by the sink and read back by the reader with no
  other change: adding a format is one module plus its registration.
* An object whose extension names no format is not read as bytearray: readers report it.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from blockgz.archive.layout import Layout
from blockgz.errors import ConfigError, UnknownFormatError
from blockgz.formats.base import KEYS, Format, RecordEncoder
from blockgz.formats.by_name import FORMATS, format_of
from blockgz.formats.compression import COMPRESSIONS
from blockgz.reader import open_archive
from blockgz.reader.reading.companion_entries import with_entries
from blockgz.sink.records import KafkaRecord, kafka_arrow_schema
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("blockgz", "sink", "reader")
#: The names a format or a compression is chosen by, and Confluent's class names.
NAMES = {
    spelling
    for registry in (FORMATS, COMPRESSIONS)
    for item in registry
    for spelling in (item.name, *item.aliases)
}
#: Where those words mean something else: the reader's ``value.format`` (binary, json, avro)
#: says how values are returned, and ``blockgz.log.format`` how the export logs, not which format
#: an object is in.
NOT_FORMATS = {"value_format", "value.format", "log_format"}


# -- no name comparisons outside the formats -----------------------------------------------------
def _names_in(node: ast.AST) -> set[str]:
    """The string constants ``node`` is, or holds (``x in ("a", "b")``)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {n for e in node.elts for n in _names_in(e)}
    return set()


def name_comparisons(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line`` of each comparison of a format or compression name in ``path``."""
    source = path.read_text()
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        names = {n for op in operands for n in _names_in(op)} & NAMES
        text = ast.get_source_segment(source, node) or ""
        about = any(w in text for w in ("format", "fmt", "compression", "extension"))
        if names and about and not any(w in text for w in NOT_FORMATS):
            found.append(f"{path.relative_to(root)}:{node.lineno}: {text}")
    return found


def test_no_format_or_compression_name_is_compared_outside_the_formats():
    found = [
        hit
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "formats" not in path.relative_to(ROOT).parts
        for hit in name_comparisons(path)
    ]
    assert found == []


def test_the_name_check_sees_a_comparison(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "def f(config, fmt, value_format):\n"
        '    a = config.format == "avro"\n'
        '    b = fmt in ("json", "io.confluent.connect.s3.format.bytearray.ByteArrayFormat")\n'
        '    c = config.compression != "none"\n'
        '    return value_format == "avro"  # the reader\'s value.format: not a format\n'
    )
    found = [hit.split(": ", 1)[0] for hit in name_comparisons(sample, tmp_path)]
    assert found == ["sample.py:2", "sample.py:3", "sample.py:4"]


# -- the registries -------------------------------------------------------------------------------
def test_lookups_take_names_and_class_names_and_list_the_allowed_ones():
    assert FORMATS.get("io.confluent.connect.s3.format.avro.AvroFormat").name == "avro"
    assert FORMATS.get("JSON").name == "json"
    with pytest.raises(ConfigError, match=r"^keys.format.class: 'csv' is not allowed; allowed: "):
        FORMATS.get("csv", option="keys.format.class")
    with pytest.raises(ConfigError, match="allowed: none, gzip, blockgzip, zstd, blockzstd"):
        SinkSettings.from_options({"path": "/tmp/x", "s3.compression.type": "lz4"})


def test_a_name_is_registered_once():
    with pytest.raises(ConfigError, match="registered already"):
        FORMATS.register(FORMATS.get("json"))


def test_what_a_format_can_hold_is_its_own_attribute():
    with pytest.raises(ConfigError, match=r"headers.format.class=bytearray is not allowed"):
        SinkSettings.from_options({"path": "/tmp/x", "headers.format.class": "bytearray"})
    with pytest.raises(
        ConfigError, match=r"format.json.envelope only applies to format.class=json"
    ):
        SinkSettings.from_options(
            {"path": "/tmp/x", "format.class": "bytearray", "format.json.envelope": "true"}
        )
    assert (
        SinkSettings.from_options(
            {"path": "/tmp/x", "format.class": "avro", "value.converter": "string"}
        ).extension
        == ".avro"
    )


# -- a format added in a test ---------------------------------------------------------------------
class HexEncoder(RecordEncoder):
    def encode(self, record: Any) -> bytes:
        return record.value.hex().encode()

    def encode_tombstone(self, record: Any) -> bytes:
        return b""


class HexFormat(Format):
    """Each value (and key) as a line of hex digits, in ``.hex`` objects."""

    name = "hex"
    aliases = ("com.example.HexFormat",)
    default_extension = ".hex"
    stores_value_bytes = True
    companion_roles = frozenset({KEYS})
    writes_companion_runs = False

    def encoder(self, settings: Any) -> RecordEncoder:
        return HexEncoder()

    def encode_key(self, record: Any, schema: Any, key: Any, *, decoded: bool, writer: Any) -> Any:
        return key.hex().encode()

    def decode_entry(self, entry: Any) -> Any:
        return bytes.fromhex(entry.decode())


@pytest.fixture
def hex_format():
    FORMATS.register(HexFormat())
    yield
    FORMATS.unregister("hex")


def kafka_batch(records: list[KafkaRecord]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "key": [r.key for r in records],
            "value": [r.value for r in records],
            "topic": [r.topic for r in records],
            "partition": [r.partition for r in records],
            "offset": [r.offset for r in records],
            "timestamp": [r.timestamp_ms * 1000 for r in records],
            "timestampType": [0] * len(records),
        },
        schema=kafka_arrow_schema(False),
    )


@pytest.mark.parametrize("compression", ["none", "blockgzip"])
def test_a_format_registered_in_a_test_is_written_and_read_back(tmp_path, hex_format, compression):
    records = [KafkaRecord("t", 0, 10 + i, 1000, b"k%d" % i, b"\x00\n%d" % i) for i in range(7)]
    config = SinkSettings.from_options(
        {
            "path": str(tmp_path),
            "format.class": "com.example.HexFormat",
            "s3.compression.type": compression,
            "store.kafka.keys": "true",
            "keys.format.class": "hex",
            "flush.size": "4",
            "store.kafka.timestamps": "false",
        }
    )
    message = write_task(config, iter([kafka_batch(records)]))

    gz = ".gz" if compression == "blockgzip" else ""
    names = sorted(p.name for p in (tmp_path / "topics/t/partition=0").glob("t+*"))
    assert names == [
        f"t+0+0000000010.hex{gz}",
        f"t+0+0000000010.keys.hex{gz}",
        f"t+0+0000000014.hex{gz}",
        f"t+0+0000000014.keys.hex{gz}",
    ]
    assert sorted((f.role, f.records) for f in message.files) == [
        ("keys", 3),
        ("keys", 4),
        ("value", 3),
        ("value", 4),
    ]
    with open_archive(str(tmp_path)) as archive:
        got = list(archive.seek("t", 0, 10))
    assert [(r.offset, r.value, r.key) for r in got] == [
        (r.offset, r.value.hex().encode(), r.key) for r in records
    ]


class JsonArrayFormat(Format):
    """A container made up here: each object one JSON array of values, ``.jarr``, which only
    its own decoder reads (as only fastavro reads an ``.avro`` file)."""

    name = "jarr"
    default_extension = ".jarr"
    companion_roles = frozenset()

    def encoder(self, settings: Any) -> RecordEncoder:
        raise NotImplementedError("read-only in this test")

    def stream_decoder(self):
        return json.load


def test_an_object_read_whole_is_decoded_as_its_format_says(tmp_path):
    """The readers ask the object's format how to decode it whole (no ``.avro`` test of its
    name): an archive read and ``verify --scan`` of a format registered here."""
    from blockgz.reader.audit.verify import TopicCheck, check_object
    from blockgz.reader.reading.archive import Archive
    from blockgz.store import LocalStore

    store = LocalStore(str(tmp_path))
    key = "topics/t/partition=0/t+0+0000000005.jarr"
    store.put(key, b'["a", {"b": 1}]')
    FORMATS.register(JsonArrayFormat())
    try:
        with open_archive(str(tmp_path)) as archive:
            got = [(r.offset, r.value) for r in archive.seek("t", 0, 5)]
            check = TopicCheck()
            check_object(Archive(store), archive.ls("t")[0], check, scan=True)
    finally:
        FORMATS.unregister("jarr")
    assert got == [(5, "a"), (6, {"b": 1})]
    assert check.problems == []
    assert check.lines == [
        f"{store.url(key)}: ok, read whole (plain, no index by design), 2 records"
    ]


# -- unknown extensions ---------------------------------------------------------------------------
def test_an_unknown_extension_names_no_format():
    """On main, ``ObjectRef.format`` called any unknown extension ``bytearray``."""
    layout = Layout()
    ref = layout.parse_data_key("t+0+0000000000.keys.txt", any_extension=True)
    assert ref is not None and ref.format is None
    assert layout.parse_data_key("t+0+0000000000.keys.bin.gz").format == "bytearray"
    custom = Layout(bytearray_extension=".txt").parse_data_key("t+0+0000000000.keys.txt")
    assert format_of(custom).name == "bytearray"  # the layout's format.bytearray.extension


def test_readers_report_a_companion_of_unknown_format_instead_of_reading_it_as_bytes():
    """On main, the entries of ``t+0+0000000000.keys.txt`` came back as the record's key."""
    from blockgz.blocks.decode import Record

    ref = Layout().parse_data_key("d/t+0+0000000000.keys.txt", any_extension=True)
    with pytest.raises(UnknownFormatError, match=r"d/t\+0\+0000000000.keys.txt: no format"):
        with_entries(Record.kept(0, b"v"), (ref,), [b"written by something else"])


def test_verify_reports_an_object_of_unknown_format(tmp_path):
    """On main, ``verify --scan`` read such an object whole as bytearray lines and said ok."""
    from blockgz.reader.audit.verify import TopicCheck, check_object
    from blockgz.reader.reading.archive import Archive, ObjectSummary
    from blockgz.store import LocalStore

    store = LocalStore(str(tmp_path))
    key = "topics/t/partition=0/t+0+0000000000.orc"
    store.put(key, b"ORC\n")
    row = ObjectSummary(key, "t", 0, 0, 0, 1, 5, False)  # as a newer export's manifest lists it
    check = TopicCheck()
    check_object(Archive(store), row, check, scan=True)
    assert check.lines == []
    assert check.problems == [
        f"unknown format: {key}: no format blockgz knows ends with .orc (known: .json, .bin, "
        ".avro, .parquet, .snappy.parquet, .gz.parquet, .lz4hadoop.parquet, .lz4raw.parquet, "
        ".br.parquet, .zstd.parquet, gzipped or not); it is not read (written by a newer "
        "blockgz? upgrade to read it)"
    ]
