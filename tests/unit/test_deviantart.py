"""Archives written by DeviantArt's kafka-connect-s3 connector, read unchanged.

The fixtures are built from that connector's documented format (its README and
``BlockGZIPFileWriter``), not with blockgz's writer:

* each chunk is one gzip member as ``java.util.zip.GZIPOutputStream`` writes it (a 10-byte
  header with no name or time, raw deflate at the default level, CRC-32 and size);
* a record is written with a newline added only when it has none, and counted in the chunk's
  ``byte_length_uncompressed`` as Java's ``String.length()`` (UTF-16 code units) plus that
  newline; a chunk is closed before the record that would take it past the threshold, so a
  first record larger than the threshold leaves an empty member with ``num_records: 0``;
* the index is ``{"chunks": [...]}`` with no version and the five chunk fields, beside the data
  as ``<topic>-<partition:05>-<first offset:012>.index.json``, under ``<prefix><yyyy-MM-dd>/``.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from blockgz.archive.deviantart import DeviantArtLayout
from blockgz.blocks.decode import inflate_chunk
from blockgz.blocks.index import BlockIndex
from blockgz.cli import main
from blockgz.errors import ConfigError, CorruptBlockError, CorruptIndexError, ObjectNotFoundError
from blockgz.objects.indexed import IndexedReader
from blockgz.reader import open_archive

TOPIC = "system-test"  # a topic with the name delimiter in it, as in their README
#: What GZIPOutputStream writes first: magic, CM=deflate, no flags, MTIME 0, XFL 0, OS 0.
JAVA_GZIP_HEADER = bytes([0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0])


def java_member(text: str) -> bytes:
    """One gzip member as ``new GZIPOutputStream(out)`` ... ``finish()`` writes ``text``."""
    data = text.encode("utf-8")  # OutputStreamWriter(gzipStream, "UTF-8")
    deflater = zlib.compressobj(6, zlib.DEFLATED, -15)  # Deflater(DEFAULT_COMPRESSION, nowrap)
    body = deflater.compress(data) + deflater.flush()
    return JAVA_GZIP_HEADER + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


def java_length(text: str) -> int:
    """Java's ``String.length()``: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def deviantart_object(first_offset: int, records: list[str], threshold: int) -> tuple[bytes, str]:
    """The ``.gz`` bytes and ``.index.json`` text BlockGZIPFileWriter leaves for ``records``."""
    chunks = [{"first": first_offset, "num": 0, "offset": 0, "raw": 0, "text": ""}]
    data = b""

    def finish(chunk):
        nonlocal data
        member = java_member(chunk["text"])
        chunk["length"] = len(member)
        data += member

    for record in records:
        chunk = chunks[-1]
        has_newline = record.endswith("\n")
        raw = java_length(record) + (0 if has_newline else 1)
        if chunk["raw"] + raw > threshold:
            finish(chunk)
            chunk = {
                "first": chunk["first"] + chunk["num"],
                "num": 0,
                "offset": chunk["offset"] + chunk["length"],
                "raw": 0,
                "text": "",
            }
            chunks.append(chunk)
        chunk["text"] += record if has_newline else record + "\n"
        chunk["raw"] += raw
        chunk["num"] += 1
    finish(chunks[-1])
    # json-simple's JSONObject is a HashMap: the key order of their README's example.
    index = {
        "chunks": [
            {
                "byte_length_uncompressed": c["raw"],
                "num_records": c["num"],
                "byte_length": c["length"],
                "byte_offset": c["offset"],
                "first_record_offset": c["first"],
            }
            for c in chunks
        ]
    }
    return data, json.dumps(index, separators=(",", ":"))


def put(root: Path, day: str, topic: str, partition: int, first: int, data: bytes, index: str):
    directory = root / day
    directory.mkdir(parents=True, exist_ok=True)
    base = f"{topic}-{partition:05d}-{first:012d}"
    (directory / f"{base}.gz").write_bytes(data)
    (directory / f"{base}.index.json").write_text(index)
    return directory / f"{base}.gz"


def record(n: int, partition: int = 0) -> str:
    """Non-ASCII text: é and € are one UTF-16 unit (2-3 UTF-8 bytes), 😀 two (4 bytes)."""
    text = f'{{"p":{partition},"n":{n},"who":"Zoë","msg":"naïve café €{n} 😀"}}'
    return text + "\n" if n % 2 else text  # the writer adds the newline only if needed


THRESHOLD = 160  # UTF-16 units per block: 2-3 records


@pytest.fixture
def archive_root(tmp_path):
    """``systest/`` holding topic system-test (partitions 0 and 1) and topic other.

    Partition 0 is spread over three days: offsets 0-9 (02-24), 10-19 (02-25; a stale,
    shorter upload of the same name sits in 02-24) and 20-24 (02-26), whose first record is
    larger than the threshold, so its index starts with a ``num_records: 0`` chunk.
    """
    root = tmp_path / "systest"
    expected: dict[int, str] = {}
    for first, day, count in ((0, "2016-02-24", 10), (10, "2016-02-25", 10)):
        records = [record(n) for n in range(first, first + count)]
        put(root, day, TOPIC, 0, first, *deviantart_object(first, records, THRESHOLD))
        expected.update({first + k: r.rstrip("\n") for k, r in enumerate(records)})
    stale = [record(n) + " stale" for n in (10, 11)]
    put(root, "2016-02-24", TOPIC, 0, 10, *deviantart_object(10, stale, THRESHOLD))
    big = "ü" * (THRESHOLD + 5)
    records = [big, *(record(n) for n in range(21, 25))]
    put(root, "2016-02-26", TOPIC, 0, 20, *deviantart_object(20, records, THRESHOLD))
    expected.update({20 + k: r.rstrip("\n") for k, r in enumerate(records)})
    p1 = [record(n, 1) for n in range(5)]
    put(root, "2016-02-24", TOPIC, 1, 0, *deviantart_object(0, p1, THRESHOLD))
    put(root, "2016-02-25", "other", 0, 0, *deviantart_object(0, ["x", "y"], THRESHOLD))
    (root / f"last_chunk_index.{TOPIC}-00000.txt").write_text(
        f"systest/2016-02-26/{TOPIC}-00000-000000000020.index.json"
    )
    return root, expected


def run(*args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input, catch_exceptions=False)


# -- the index ---------------------------------------------------------------------------------
ZERO_RECORD_INDEX = (
    '{"chunks":[{"byte_length_uncompressed":0,"num_records":0,"byte_length":20,'
    '"byte_offset":0,"first_record_offset":200},{"byte_length_uncompressed":70,'
    '"num_records":1,"byte_length":31,"byte_offset":20,"first_record_offset":200},'
    '{"byte_length_uncompressed":12,"num_records":2,"byte_length":25,"byte_offset":51,'
    '"first_record_offset":201}]}'
)


def test_fixture_is_what_their_writer_lays_out():
    data, text = deviantart_object(200, ["a" * 69, "bbbbb", "ccccc"], threshold=64)
    assert json.loads(text)["chunks"][:1] == [
        {
            "byte_length_uncompressed": 0,
            "num_records": 0,
            "byte_length": 20,  # an empty member: header, 03 00, CRC 0, size 0
            "byte_offset": 0,
            "first_record_offset": 200,
        }
    ]
    assert data[:20] == JAVA_GZIP_HEADER + b"\x03\x00" + bytes(8)
    assert [c["first_record_offset"] for c in json.loads(text)["chunks"]] == [200, 200, 201]


def test_index_with_a_zero_record_chunk_loads_unchanged():
    index = BlockIndex.from_json(ZERO_RECORD_INDEX)
    assert [c.num_records for c in index.chunks] == [0, 1, 2]
    assert (index.first_offset, index.last_offset, index.record_count) == (200, 202, 3)
    assert index.locate(200) == 1 and index.locate(201) == 2 and index.locate(202) == 2
    assert index.chunks[0].record_offsets() == []
    assert all(c.utf16_length for c in index.chunks)
    assert index.byte_length == 76


def test_versioned_index_stays_strict():
    doc = json.loads(ZERO_RECORD_INDEX)
    doc["version"] = 1
    with pytest.raises(CorruptIndexError, match="chunk 0 is empty"):
        BlockIndex.from_json(json.dumps(doc))
    doc["chunks"] = doc["chunks"][1:]
    doc["chunks"][0]["byte_offset"] = 0
    doc["chunks"][1]["byte_offset"] = 31
    assert not any(c.utf16_length for c in BlockIndex.from_json(json.dumps(doc)).chunks)


def test_utf16_counts_pass_only_for_a_versionless_index():
    text = "Zoë €5 😀\n"  # 15 UTF-8 bytes, 10 UTF-16 units (😀 is a surrogate pair)
    member = java_member(text)
    chunk = {
        "byte_length_uncompressed": java_length(text),
        "num_records": 1,
        "byte_length": len(member),
        "byte_offset": 0,
        "first_record_offset": 0,
    }
    assert (java_length(text), len(text.encode())) == (10, 15)
    legacy = BlockIndex.from_json(json.dumps({"chunks": [chunk]}))
    assert inflate_chunk(member, legacy.chunks[0]).decode() == text
    versioned = BlockIndex.from_json(json.dumps({"version": 1, "chunks": [chunk]}))
    with pytest.raises(CorruptBlockError, match="decompressed to 15 bytes, the index promises 10"):
        inflate_chunk(member, versioned.chunks[0])
    chunk["byte_length_uncompressed"] = 11  # neither the bytes nor the UTF-16 units
    wrong = BlockIndex.from_json(json.dumps({"chunks": [chunk]}))
    with pytest.raises(CorruptBlockError, match=r"15 bytes \(10 UTF-16 code units\).* promises 11"):
        inflate_chunk(member, wrong.chunks[0])


def test_one_object_reads_and_verifies_through_its_index(archive_root):
    root, expected = archive_root
    path = root / "2016-02-26" / f"{TOPIC}-00000-000000000020.gz"
    with IndexedReader.open_file(path) as obj:
        assert obj.index.chunks[0].num_records == 0
        assert [(r.offset, r.value.decode()) for r in obj.seek(20, count=2)] == [
            (20, expected[20]),
            (21, expected[21]),
        ]
        report = obj.verify()
    assert report.ok, report.problems
    assert report.records == 5 and report.blocks == len(obj.index.chunks)


# -- the key layout ----------------------------------------------------------------------------
def test_layout_parses_their_names():
    layout = DeviantArtLayout()
    ref = layout.parse_data_key("p/2016-02-24/my-topic-00012-000000123456.gz", size=5)
    assert (ref.topic, ref.partition, ref.start_offset, ref.directory) == (
        "my-topic",
        12,
        123456,
        "p/2016-02-24",
    )
    assert ref.has_index is False and ref.seekable
    for key in (
        "p/2016-02-24/my-topic-00012-000000123456.index.json",
        "p/last_chunk_index.my-topic-00012.txt",
        "topics/t/partition=0/t+0+0000000000.json.gz",
    ):
        assert layout.parse_data_key(key) is None


def test_seek_across_objects_and_date_directories(archive_root):
    root, expected = archive_root
    with open_archive(str(root), {"layout": "deviantart"}) as archive:
        refs = archive.objects(TOPIC, 0)
        assert [(r.start_offset, r.directory) for r in refs] == [
            (0, "2016-02-24"),
            (10, "2016-02-25"),  # the stale copy in 2016-02-24 is not read
            (20, "2016-02-26"),
        ]
        assert all(r.has_index for r in refs)
        got = [(r.offset, r.value.decode()) for r in archive.seek(TOPIC, 0, 8, count=14)]
        assert got == [(n, expected[n]) for n in range(8, 22)]
        everything = list(archive.seek(TOPIC, 0, 0))
        assert [r.offset for r in everything] == list(range(25))
        assert [r.value.decode() for r in everything] == [expected[n] for n in range(25)]
        assert [r.offset for r in archive.seek(TOPIC, 1, 3)] == [3, 4]
        assert [r.offset for r in archive.read(TOPIC, 0, 19, 21)] == [19, 20]


def test_ls_lists_every_date_directory(archive_root):
    root, _ = archive_root
    with open_archive(str(root), {"layout": "deviantart"}) as archive:
        rows = archive.ls(TOPIC)
    assert [(r.partition, r.first_offset, r.last_offset, r.records) for r in rows] == [
        (0, 0, 9, 10),
        (0, 10, 19, 10),
        (0, 20, 24, 5),
        (1, 0, 4, 5),
    ]
    assert all(r.indexed for r in rows)


def test_layout_option_errors(archive_root):
    root, _ = archive_root
    with pytest.raises(ConfigError, match="layout: 'hive' is not allowed"):
        open_archive(str(root), {"layout": "hive"})
    with pytest.raises(ConfigError, match=r"topics\.dir: not used with layout=deviantart"):
        open_archive(str(root), {"layout": "deviantart", "topics.dir": "x"})
    missing = r"partition 7: listed .*\(layout=deviantart\)"
    with (
        open_archive(str(root), {"layout": "deviantart"}) as archive,
        pytest.raises(ObjectNotFoundError, match=missing),
    ):
        archive.seek(TOPIC, 7, 0)


# -- the command line --------------------------------------------------------------------------
def test_cli_ls_seek_cat_verify(archive_root):
    root, expected = archive_root
    layout = ("-O", "layout=deviantart")

    result = run("ls", "--topic", TOPIC, *layout, root)
    assert result.exit_code == 0, result.output
    assert "4 objects" in result.stderr
    assert f"2016-02-25/{TOPIC}-00000-000000000010.gz" in result.stdout
    assert f"2016-02-24/{TOPIC}-00000-000000000010.gz" not in result.stdout

    args = ("--topic", TOPIC, "--partition", 0, *layout, root)
    result = run("seek", "--offset", 9, "--count", 3, *args)
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes.decode().splitlines() == [expected[n] for n in (9, 10, 11)]

    result = run("seek", "--offset", 20, "--count", 2, "--output", "json", *args)
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"offset": 20, "value": expected[20]},
        {"offset": 21, "value": expected[21]},
    ]

    result = run("cat", *args)
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes.decode().splitlines() == [expected[n] for n in range(25)]

    result = run("verify", "--topic", TOPIC, *layout, root)
    assert result.exit_code == 0, result.output
    assert result.stderr.count(": ok,") == 4


def test_cli_single_object_and_a_bad_utf16_count(archive_root):
    root, expected = archive_root
    data = root / "2016-02-25" / f"{TOPIC}-00000-000000000010.gz"
    result = run("seek", "--offset", 13, "--count", 1, data)
    assert result.stdout_bytes.decode() == expected[13] + "\n"
    result = run("cat", data)  # any gzip reader reads the whole object
    assert result.stdout_bytes.decode().splitlines() == [expected[n] for n in range(10, 20)]

    sidecar = data.with_name(data.name.removesuffix(".gz") + ".index.json")
    doc = json.loads(sidecar.read_text())
    doc["chunks"][1]["byte_length_uncompressed"] += 1
    sidecar.write_text(json.dumps(doc))
    result = run("verify", data)
    assert result.exit_code == 1
    assert "block 1" in result.stderr and "UTF-16 code units" in result.stderr
