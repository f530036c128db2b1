"""The block writer: cutting rules, offsets, determinism, and round trips (property-based)."""

from __future__ import annotations

import gzip
import io
import itertools
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blockgz import BlockGzipWriter, Compression, LengthPrefixed, Separated
from blockgz.blocks.codecs.gzip_members import decompress_member
from blockgz.blocks.decode import chunk_records
from blockgz.blocks.index import BlockIndex
from blockgz.blocks.rebuild import scan_members
from blockgz.errors import ConfigError, CorruptIndexError, OffsetOrderError, RecordFramingError

records_st = st.lists(st.binary(max_size=300).map(lambda b: b.replace(b"\n", b"")), max_size=60)


def write_all(records, offsets=None, timestamps=None, **options):
    out = io.BytesIO()
    with BlockGzipWriter(out, **options) as writer:
        for n, record in enumerate(records):
            stamp = None if timestamps is None else timestamps[n]
            writer.write(record, None if offsets is None else offsets[n], stamp)
    return out.getvalue(), writer.index


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=records_st,
    block_size=st.integers(1, 2048),
    threads=st.integers(1, 4),
    max_records=st.one_of(st.none(), st.integers(1, 7)),
)
def test_round_trip_any_records_blocks_and_threads(records, block_size, threads, max_records):
    data, index = write_all(
        records, block_size=block_size, threads=threads, max_records=max_records
    )
    # The whole object is one plain gzip stream of the records, each followed by a newline.
    assert gzip.decompress(data) == b"".join(r + b"\n" for r in records)
    assert index.record_count == len(records)
    got = []
    for n, chunk in enumerate(index.chunks):
        raw = data[chunk.byte_offset : chunk.byte_end]
        # Each block range decompresses alone, to exactly its records.
        assert decompress_member(raw) == b"".join(
            r + b"\n" for r in records[len(got) : len(got) + chunk.num_records]
        )
        block_records = chunk_records(raw, chunk, block=n)
        assert len(block_records) >= 1
        if max_records:
            assert len(block_records) <= max_records
        # A block never exceeds the block size unless it holds a single oversized record.
        assert chunk.byte_length_uncompressed <= block_size or chunk.num_records == 1
        got.extend(r.value for r in block_records)
    assert got == records
    # The index survives JSON, and a rebuilt index from member boundaries agrees with it.
    assert BlockIndex.from_json(index.to_json()) == index
    assert scan_members(io.BytesIO(data)).chunks == index.chunks


@settings(max_examples=60, deadline=None)
@given(records=records_st, block_size=st.integers(1, 512))
def test_output_bytes_do_not_depend_on_thread_count(records, block_size):
    outputs = {write_all(records, block_size=block_size, threads=t)[0] for t in (1, 2, 3)}
    assert len(outputs) == 1


@settings(max_examples=80, deadline=None)
@given(
    chunks=st.lists(st.binary(max_size=200), max_size=20),
    block_size=st.integers(1, 700),
    threads=st.integers(1, 3),
    as_bytes=st.booleans(),
)
def test_write_delimited_matches_write_for_any_chunking(chunks, block_size, threads, as_bytes):
    stream = b"".join(chunks)
    records = stream.split(b"\n")
    if records and records[-1] == b"":
        records.pop()
    out = io.BytesIO()
    with BlockGzipWriter(out, block_size=block_size, threads=threads, first_offset=7) as writer:
        for piece in chunks:
            writer.write_delimited(piece if as_bytes else bytearray(piece))
    expected, expected_index = write_all(records, block_size=block_size, first_offset=7, threads=1)
    assert out.getvalue() == expected
    assert writer.index.chunks == expected_index.chunks


@settings(max_examples=150, deadline=None)
@given(
    records=records_st,
    gaps=st.lists(st.integers(1, 4), min_size=60, max_size=60),
    cuts=st.lists(st.integers(0, 60), max_size=6),
    singles=st.lists(st.booleans(), min_size=8, max_size=8),
    block_size=st.integers(1, 700),
    max_records=st.one_of(st.none(), st.integers(1, 7)),
    stamps=st.lists(st.integers(-1, 50), min_size=60, max_size=60),
)
def test_write_framed_matches_write_for_any_batching(
    records, gaps, cuts, singles, block_size, max_records, stamps
):
    """Batches of framed records (mixed with single writes) give the bytes and the index
    (time ranges included) that write() gives."""
    offsets = [5 + sum(gaps[:n]) for n in range(len(records))]
    options = {"block_size": block_size, "max_records": max_records, "threads": 1}
    expected, expected_index = write_all(records, offsets, stamps, **options)
    bounds = sorted({0, len(records), *(c for c in cuts if c <= len(records))})
    out = io.BytesIO()
    with BlockGzipWriter(out, **options) as writer:
        for n, (lo, hi) in enumerate(itertools.pairwise(bounds)):
            if singles[n % len(singles)]:
                for k in range(lo, hi):
                    writer.write(records[k], offsets[k], stamps[k])
                continue
            framed = [r + b"\n" for r in records[lo:hi]]
            ends = np.cumsum([len(f) for f in framed], dtype=np.int64)
            writer.write_framed(
                b"".join(framed),
                ends,
                np.array(offsets[lo:hi], np.int64),
                np.array(stamps[lo:hi], np.int64),
            )
    assert out.getvalue() == expected
    assert writer.index.chunks == expected_index.chunks


@settings(max_examples=100, deadline=None)
@given(
    stamps=st.lists(st.one_of(st.none(), st.integers(-1, 10**13)), min_size=1, max_size=40),
    block_size=st.integers(1, 40),
)
def test_each_block_says_its_time_range_when_every_record_has_a_timestamp(stamps, block_size):
    records = [b"r%d" % n for n in range(len(stamps))]
    _, index = write_all(records, None, stamps, block_size=block_size, threads=1)
    loaded = BlockIndex.from_json(index.to_json())
    assert loaded.chunks == index.chunks
    seen = 0
    for chunk in loaded.chunks:
        mine = stamps[seen : seen + chunk.num_records]
        seen += chunk.num_records
        if any(s is None or s < 0 for s in mine):
            assert (chunk.min_timestamp, chunk.max_timestamp) == (None, None)
            assert "min_timestamp" not in str(chunk.to_dict())
        else:
            assert (chunk.min_timestamp, chunk.max_timestamp) == (min(mine), max(mine))
    assert seen == len(stamps)


@pytest.mark.parametrize(
    "times",
    [
        {"min_timestamp": 5},
        {"min_timestamp": 9, "max_timestamp": 5},
        {"min_timestamp": -1, "max_timestamp": 5},
        {"min_timestamp": "5", "max_timestamp": 6},
    ],
)
def test_an_index_with_a_broken_time_range_is_refused(times):
    chunk = {
        "first_record_offset": 0,
        "num_records": 1,
        "byte_offset": 0,
        "byte_length": 20,
        "byte_length_uncompressed": 2,
        **times,
    }
    doc = json.dumps({"format": "blockgz-index", "version": 1, "chunks": [chunk]})
    with pytest.raises(CorruptIndexError, match="min_timestamp and max_timestamp must both"):
        BlockIndex.from_json(doc)


def test_write_framed_refuses_offsets_that_do_not_increase():
    writer = BlockGzipWriter(io.BytesIO())
    writer.write(b"a", 9)
    with pytest.raises(OffsetOrderError, match="offsets must increase"):
        writer.write_framed(b"b\nc\n", np.array([2, 4]), np.array([10, 10]))
    with pytest.raises(OffsetOrderError, match="offsets must increase"):
        writer.write_framed(b"b\n", np.array([2]), np.array([9]))
    writer.abort()


def test_gapped_offsets_are_exact_and_contiguous_ones_compact():
    offsets = [10, 11, 12, 20, 21, 40]
    _, index = write_all([b"r%d" % o for o in offsets], offsets, block_size=12)
    assert [c.record_offsets() for c in index.chunks] == [[10, 11, 12], [20, 21, 40]]
    doc = index.to_json()
    assert '"offset_deltas":[1,19]' in doc and doc.count("offset_deltas") == 1
    loaded = BlockIndex.from_json(doc)
    assert loaded.locate(13) == 1 and loaded.locate(40) == 1
    assert loaded.chunks[1].position_of(22) == 2


def test_record_larger_than_block_gets_its_own_block():
    records = [b"a", b"x" * 5000, b"b"]
    _, index = write_all(records, block_size=100)
    assert [c.num_records for c in index.chunks] == [1, 1, 1]
    assert index.chunks[1].byte_length_uncompressed == 5001


def test_block_size_counts_bytes_not_characters():
    record = "é".encode()  # one character, two bytes
    _, index = write_all([record] * 4, block_size=6)
    assert [c.num_records for c in index.chunks] == [2, 2]


def test_offsets_must_increase():
    with pytest.raises(OffsetOrderError, match="offsets must increase: got 5 after 5"):
        write_all([b"a", b"b"], [5, 5])


def test_record_with_separator_is_refused():
    with pytest.raises(RecordFramingError, match="contains the record separator"):
        write_all([b"a\nb"])


def test_length_prefixed_framing_accepts_any_bytes():
    records = [b"a\nb", b"", b"\x00" * 10]
    data, index = write_all(records, framing=LengthPrefixed(), block_size=8)
    loaded = BlockIndex.from_json(index.to_json())
    got = [
        r.value
        for n, c in enumerate(loaded.chunks)
        for r in chunk_records(data[c.byte_offset : c.byte_end], c, loaded.framing, block=n)
    ]
    assert got == records


def test_custom_separator_round_trips():
    data, index = write_all([b"a", b"b"], framing=Separated(b"\r\n"))
    assert gzip.decompress(data) == b"a\r\nb\r\n"
    assert BlockIndex.from_json(index.to_json()).framing == Separated(b"\r\n")


@pytest.mark.parametrize(
    ("compression", "codec"),
    [
        (Compression.from_level(1), "isal"),
        (Compression.from_level(6), "zlib"),
        (Compression.preset("small"), "libdeflate"),
    ],
)
def test_every_codec_writes_plain_gzip(compression, codec):
    data, index = write_all([b"x" * 100] * 50, compression=compression, block_size=1000)
    assert index.codec == codec
    assert gzip.decompress(data) == b"".join([b"x" * 100 + b"\n"] * 50)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"block_size": 0}, "block size must be at least 1"),
        ({"max_records": 0}, "max records per block must be at least 1"),
        ({"threads": 0}, "threads must be at least 1"),
        ({"first_offset": -1}, "first offset must not be negative"),
    ],
)
def test_bad_settings_name_the_rule(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        BlockGzipWriter(io.BytesIO(), **kwargs)


def test_bad_codec_or_level_lists_allowed_values():
    with pytest.raises(ConfigError, match="allowed: isal, zlib, libdeflate"):
        Compression("lz4", 1)
    with pytest.raises(ConfigError, match="allowed: 0-3"):
        Compression("isal", 5)
    with pytest.raises(ConfigError, match="allowed: fast, small"):
        Compression.preset("tiny")


def test_failure_inside_writer_writes_no_index():
    out = io.BytesIO()
    with pytest.raises(RuntimeError), BlockGzipWriter(out, threads=2) as writer:
        writer.write(b"a")
        raise RuntimeError("boom")
    with pytest.raises(RuntimeError, match="index exists once the writer is closed"):
        _ = writer.index
