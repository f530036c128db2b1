"""zstd and blockzstd: the objects, their index and seek table, and every reader of them.

A blockzstd object must be a plain zstd file (``zstd -d`` reads it whole), carry a seek table
as the seekable format's spec lays it out, and be read by offset through its sidecar by every
blockgz reader; a plain zstd object must be streamed by the readers that stream gzip.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess

import pytest
import zstandard
from click.testing import CliRunner

from blockgz.blocks import index as index_module
from blockgz.blocks.codecs import zstd
from blockgz.blocks.codecs.gzip_members import Compression
from blockgz.blocks.index import BlockIndex
from blockgz.blocks.rebuild import scan_members
from blockgz.cli import main
from blockgz.errors import ConfigError, CorruptBlockError, CorruptIndexError
from blockgz.formats.output import ObjectWriter
from blockgz.objects.indexed import IndexedReader
from blockgz.objects.stream import stream_records
from blockgz.reader import open_archive
from blockgz.reader.audit.verify import check_topic
from blockgz.reader.spark.scan_plan import ScanFilter, plan_scan
from blockgz.reader.spark.scan_read import split_batches
from blockgz.sink.write.config import SinkSettings
from blockgz.store import LocalStore
from blockgz.written.upload import BlockGzipUpload
from testkit.archives import export_batches, input_records

ZSTD_CLI = shutil.which("zstd")
needs_cli = pytest.mark.skipif(ZSTD_CLI is None, reason="the zstd command line is not installed")
KEY = "t+0+0000000100.json.zst"


def write_blockzstd(store, key=KEY, *, records=2_000, block_size=4096, threads=2, level=1):
    values = [b'{"n": %d, "pad": "%s"}' % (n, b"x" * (n % 50)) for n in range(records)]
    with BlockGzipUpload(
        store,
        key,
        block_size=block_size,
        compression=Compression("zstd", level),
        threads=threads,
        first_offset=100,
    ) as out:
        for n, value in enumerate(values):
            out.write(value, 100 + n)
    return out.index, values


# -- the object ---------------------------------------------------------------------------------
def test_blockzstd_frames_tile_the_object_and_the_seek_table_lists_them(tmp_path):
    index, values = write_blockzstd(LocalStore(tmp_path))
    data = (tmp_path / KEY).read_bytes()
    assert len(index.chunks) > 10 and index.codec == "zstd"
    index.check_object_size(len(data))
    # The spec's layout, read by hand: footer = frames, descriptor (checksum flag), magic.
    frames, descriptor, magic = struct.unpack("<IBI", data[-9:])
    assert (frames, descriptor, magic) == (len(index.chunks), 0x80, 0x8F92EAB1)
    table_start = index.chunks[-1].byte_end
    assert struct.unpack_from("<II", data, table_start) == (0x184D2A5E, 12 * frames + 9)
    assert len(data) - table_start == index.trailer_length == 8 + 12 * frames + 9
    for n, chunk in enumerate(index.chunks):
        entry = data[table_start + 8 + 12 * n : table_start + 20 + 12 * n]
        compressed, decompressed = struct.unpack("<II", entry[:8])
        assert (compressed, decompressed) == (chunk.byte_length, chunk.byte_length_uncompressed)
        frame = data[chunk.byte_offset : chunk.byte_end]
        assert frame.startswith(zstd.FRAME_MAGIC) and entry[8:] == frame[-4:]  # its checksum
        assert zstandard.get_frame_parameters(frame).has_checksum
    assert zstd.decompress_frames(data) == b"".join(v + b"\n" for v in values)


@needs_cli
def test_the_zstd_command_line_decompresses_the_whole_object(tmp_path):
    _, values = write_blockzstd(LocalStore(tmp_path))
    out = subprocess.run([ZSTD_CLI, "-d", "-c", tmp_path / KEY], capture_output=True, check=True)
    assert out.stdout == b"".join(v + b"\n" for v in values)
    assert subprocess.run([ZSTD_CLI, "-t", "-q", tmp_path / KEY]).returncode == 0


def test_bytes_do_not_depend_on_the_number_of_threads(tmp_path):
    one, two = LocalStore(tmp_path / "1"), LocalStore(tmp_path / "2")
    write_blockzstd(one, threads=1)
    write_blockzstd(two, threads=2)
    assert (tmp_path / "1" / KEY).read_bytes() == (tmp_path / "2" / KEY).read_bytes()


def test_the_index_names_the_codec_and_an_older_reader_refuses_it(tmp_path, monkeypatch):
    index, _ = write_blockzstd(LocalStore(tmp_path))
    doc = json.loads(index.to_json())
    assert (doc["version"], doc["codec"], doc["level"]) == (3, "zstd", 1)
    monkeypatch.setattr(index_module, "INDEX_VERSION", 2)  # a blockgz from before zstd
    with pytest.raises(CorruptIndexError, match=r"index version 3 is newer .* upgrade blockgz"):
        BlockIndex.from_json(index.to_json())


def test_an_index_that_says_zstd_at_version_1_or_an_unknown_codec_is_refused(tmp_path):
    index, _ = write_blockzstd(LocalStore(tmp_path))
    doc = json.loads(index.to_json())
    with pytest.raises(CorruptIndexError, match="needs index version 3"):
        BlockIndex.from_json(json.dumps({**doc, "version": 1}))
    with pytest.raises(CorruptIndexError, match="codec 'lz4' is not known"):
        BlockIndex.from_json(json.dumps({**doc, "codec": "lz4"}))


def test_a_damaged_frame_is_named_by_verify_and_by_a_read(tmp_path):
    index, _ = write_blockzstd(LocalStore(tmp_path))
    path = tmp_path / KEY
    data = bytearray(path.read_bytes())
    chunk = index.chunks[3]
    data[chunk.byte_end - 2] ^= 0xFF  # inside the frame's checksum
    path.write_bytes(bytes(data))
    with IndexedReader.open_file(path) as obj:
        report = obj.verify()
        assert len(report.problems) == 1 and "block 3" in report.problems[0]
        with pytest.raises(CorruptBlockError, match="zstd frame does not decompress"):
            obj.read_block(3)


# -- rebuilding the sidecar ---------------------------------------------------------------------
def test_index_rebuilt_from_the_seek_table_or_by_walking_frames_reads_the_same(tmp_path):
    index, values = write_blockzstd(LocalStore(tmp_path))
    data = (tmp_path / KEY).read_bytes()
    rebuilt = scan_members((tmp_path / KEY).open("rb"), first_offset=100)
    assert rebuilt.codec == "zstd" and rebuilt.trailer_length == index.trailer_length
    assert rebuilt.chunks == index.chunks
    # Without the seek table (cut off), the frames are found by decoding them.
    bare = tmp_path / "bare.json.zst"
    bare.write_bytes(data[: index.chunks[-1].byte_end])
    walked = scan_members(bare.open("rb"), first_offset=100)
    assert walked.trailer_length == 0 and walked.chunks == index.chunks
    with IndexedReader.open_file(bare, walked) as obj:
        assert [r.value for r in obj.seek(1_500, 3)] == values[1_400:1_403]


@needs_cli
def test_blockgz_index_rebuilds_a_lost_sidecar_of_a_zstd_cli_file(tmp_path):
    src = tmp_path / "t+0+0000000000.json"
    src.write_bytes(b"".join(b'{"n": %d}\n' % n for n in range(5_000)))
    subprocess.run([ZSTD_CLI, "-q", "-3", src, "-o", f"{src}.zst"], check=True)
    result = CliRunner().invoke(main, ["index", f"{src}.zst"])
    assert result.exit_code == 0, result.output
    assert "5000 records in 1 blocks" in result.output
    seek = CliRunner().invoke(main, ["seek", "--offset", "4998", f"{src}.zst"])
    assert seek.exit_code == 0, seek.output
    assert seek.output.splitlines() == ['{"n": 4998}', '{"n": 4999}']


# -- the command line on one object --------------------------------------------------------------
def test_cli_cat_seek_verify_and_index_on_a_blockzstd_object(tmp_path):
    _, values = write_blockzstd(LocalStore(tmp_path))
    path = str(tmp_path / KEY)
    runner = CliRunner()
    seek = runner.invoke(main, ["seek", "--offset", "1000", "--count", "2", path])
    assert seek.exit_code == 0, seek.output
    assert seek.output.encode().splitlines() == values[900:902]
    cat = runner.invoke(main, ["cat", path])
    assert cat.exit_code == 0 and cat.stdout_bytes == b"".join(v + b"\n" for v in values)
    verify = runner.invoke(main, ["verify", path])
    assert verify.exit_code == 0, verify.output
    # The sidecar's name alone finds the .zst data object (its codec says the suffix).
    sidecar = str(tmp_path / ".t+0+0000000100.json.index.json")
    assert runner.invoke(main, ["seek", "--offset", "2099", sidecar]).output.encode() == (
        values[-1] + b"\n"
    )
    (tmp_path / ".t+0+0000000100.json.index.json").unlink()
    rebuilt = runner.invoke(main, ["index", "--first-offset", "100", path])
    assert rebuilt.exit_code == 0 and "2000 records" in rebuilt.output


# -- plain zstd ---------------------------------------------------------------------------------
def test_plain_zstd_object_is_one_frame_and_streams_back(tmp_path):
    store = LocalStore(tmp_path)
    codec = SinkSettings.from_options(
        {"path": "/x", "s3.compression.type": "zstd"}
    ).compression_settings()
    assert codec == Compression("zstd", 3)
    writer = ObjectWriter(store, "t+0+0000000007.json.zst", "zstd", codec)
    for n in range(300):
        writer.write(b'{"n": %d}' % n, 7 + n)
    done = writer.close()
    data = (tmp_path / "t+0+0000000007.json.zst").read_bytes()
    assert done.index_key is None and done.size == len(data)
    assert zstandard.get_frame_parameters(data).has_checksum
    assert zstandard.ZstdDecompressor().decompressobj().decompress(data).count(b"\n") == 300
    records = list(stream_records(store, "t+0+0000000007.json.zst", 7))
    assert [r.offset for r in records[:2]] == [7, 8] and records[-1].value == b'{"n": 299}'


def test_levels_map_to_zstd_levels_and_wrong_ones_are_refused():
    def level(kind, value):
        opts = {"path": "/x", "s3.compression.type": kind, "s3.compression.level": value}
        return SinkSettings.from_options(opts).compression_settings()

    assert level("blockzstd", "-1") == Compression("zstd", 1)
    assert level("blockzstd", "19") == Compression("zstd", 19)
    assert level("zstd", "-1") == Compression("zstd", 3)
    with pytest.raises(ConfigError, match=r"allowed: -1 \(default, 1\) or 1-22"):
        level("blockzstd", "0")
    with pytest.raises(ConfigError, match="allowed: 0-9"):
        level("blockgzip", "12")


# -- archives: the export's objects read by open_archive, the scan (Spark) and verify -----------
@pytest.fixture(scope="module", params=["blockzstd", "zstd"])
def zstd_archive(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    records = input_records(120)
    blocks = "3" if request.param == "blockzstd" else "0"  # plain zstd has no blocks
    options = {"s3.compression.type": request.param, "s3.compression.block.records": blocks}
    export_batches(str(root), records, "default", batches=2, **options)
    return request.param, root, records


def test_the_export_writes_zst_objects_that_the_archive_seeks_and_verifies(zstd_archive):
    kind, root, records = zstd_archive
    keys = sorted(p.name for p in root.rglob("*") if p.is_file() and "+" in p.name)
    data = [k for k in keys if not k.endswith(".index.json")]
    assert data and all(k.endswith(".json.zst") for k in data)
    assert bool([k for k in keys if k.endswith(".index.json")]) == (kind == "blockzstd")
    mine = [r for r in records if r.partition == 1]
    with open_archive(str(root), {"scan.unindexed": "true"}) as archive:
        if kind == "blockzstd":  # exact offsets, from the index
            got = list(archive.seek("ev", 1, mine[50].offset, count=5))
            assert [(r.offset, r.value) for r in got] == [(r.offset, r.value) for r in mine[50:55]]
        else:  # streamed: offsets count up from the name's (exact only without gaps, as gzip)
            got = list(archive.seek("ev", 1, 0))
            assert [r.value for r in got] == [r.value for r in mine]
        listing = archive.ls("ev")
        assert sum(row.records or 0 for row in listing) == (
            len(records) if kind == "blockzstd" else 0
        )
        check = check_topic(archive, "ev", scan=True)
        shown = CliRunner().invoke(main, ["ls", "--topic", "ev", str(root)])
        assert shown.exit_code == 0 and shown.output.count(".json.zst") == len(data), shown.output
        assert check.ok and len(check.lines) == check.objects == len(listing), check.problems
        counted = sum(int(line.split(" records")[0].rsplit(" ", 1)[1]) for line in check.lines)
        assert counted == len(records), check.lines


def test_the_spark_scan_reads_zst_objects_with_offset_pruning(zstd_archive):
    kind, root, records = zstd_archive
    scan = ScanFilter()
    if kind == "blockzstd":  # pruned by the index's offsets; plain objects are read whole
        scan = scan.with_range("offset", low=30, high=60)
    with open_archive(str(root), {"scan.unindexed": "true"}) as archive:
        rows = []
        for split in plan_scan(archive, scan, split_bytes=2_000):
            for batch in split_batches(archive, split, scan.offsets):
                d = batch.to_pydict()
                rows += list(zip(d["partition"], d["offset"], d["value"], strict=True))
    if kind == "blockzstd":
        expected = [(r.partition, r.offset, r.value) for r in records if 30 <= r.offset <= 60]
        assert sorted(rows) == sorted(expected)
    else:
        assert sorted(v for _, _, v in rows) == sorted(r.value for r in records)
