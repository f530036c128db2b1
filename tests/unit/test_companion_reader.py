"""Records read back get exactly their own key, headers and timestamp when the companion files'
blocks do not line up with the value object's (a timestamps block covers many value blocks,
a keys block fewer), across compacted offsets, from any offset, indexed or not; and a
timestamps block parsed whole gives what its lines decoded one by one give."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blockgz.formats.by_name import FORMATS
from blockgz.formats.json.json_format import int_pair_lines
from blockgz.reader import open_archive
from blockgz.store import LocalStore
from blockgz.written.sidecars import sidecar_key
from blockgz.written.upload import BlockGzipUpload

T0 = 1_700_000_000_000
DIR = "topics/t/partition=0"
#: Offsets 100..139 with every seventh compacted away.
OFFSETS = [o for o in range(100, 140) if o % 7]


def stamp(offset: int) -> tuple[int | None, int | None]:
    return (None, None) if offset % 11 == 0 else (T0 + offset, offset % 2)


def write(store: LocalStore, key: str, lines: list[bytes], block_bytes: int) -> None:
    """``lines`` for :data:`OFFSETS` in blocks of about ``block_bytes`` uncompressed bytes."""
    with BlockGzipUpload(store, key, block_size=block_bytes, first_offset=OFFSETS[0]) as out:
        for offset, line in zip(OFFSETS, lines, strict=True):
            out.write(line, offset)


@pytest.fixture
def archive_root(tmp_path):
    store = LocalStore(str(tmp_path))
    start = f"t+0+{OFFSETS[0]:010d}"
    write(store, f"{DIR}/{start}.json.gz", [b'{"n":%d}' % o for o in OFFSETS], 40)
    stamps = [
        b"[%d,%d]" % tuple(-1 if v is None else v for v in stamp(o))  # type: ignore[misc]
        for o in OFFSETS
    ]
    write(store, f"{DIR}/.{start}.timestamps.json.gz", stamps, 150)
    write(store, f"{DIR}/{start}.keys.json.gz", [b'"k%d"' % o for o in OFFSETS], 12)
    return tmp_path


def expected(offsets):
    return [(o, b'{"n":%d}' % o, b"k%d" % o, *stamp(o)) for o in offsets]


def fields(records):
    return [(r.offset, r.value, r.key, r.timestamp, r.timestamp_type) for r in records]


def test_the_layout_really_misaligns_the_blocks(archive_root):
    store = LocalStore(str(archive_root))
    start = f"t+0+{OFFSETS[0]:010d}"
    blocks = {
        role: len(json.loads(store.get(sidecar_key(f"{DIR}/{name}")))["chunks"])
        for role, name in (
            ("values", f"{start}.json.gz"),
            ("timestamps", f".{start}.timestamps.json.gz"),
            ("keys", f"{start}.keys.json.gz"),
        )
    }
    assert blocks["timestamps"] < blocks["values"] < blocks["keys"], blocks


@pytest.mark.parametrize("begin", [100, 101, 104, 105, 112, 126, 139])
def test_every_record_gets_its_own_entries_from_any_offset(archive_root, begin):
    with open_archive(str(archive_root)) as archive:
        got = list(archive.seek("t", 0, begin, timestamps=True))
    assert fields(got) == expected([o for o in OFFSETS if o >= begin])


def test_a_second_read_uses_the_kept_blocks_and_gives_the_same(archive_root):
    with open_archive(str(archive_root)) as archive:
        first = fields(archive.seek("t", 0, 100, timestamps=True))
        again = fields(archive.seek("t", 0, 100, timestamps=True))
    assert first == again == expected(OFFSETS)


def test_companions_without_an_index_are_read_whole_and_still_match(archive_root):
    store = LocalStore(str(archive_root))
    start = f"t+0+{OFFSETS[0]:010d}"
    for name in (f".{start}.timestamps.json.gz", f"{start}.keys.json.gz"):
        store.delete(sidecar_key(f"{DIR}/{name}"))
    with open_archive(str(archive_root)) as archive:
        got = list(archive.seek("t", 0, 112, timestamps=True))
    assert fields(got) == expected([o for o in OFFSETS if o >= 112])


pairs = st.lists(st.tuples(st.integers(-(2**70), 2**70), st.integers(-(2**70), 2**70)))


@given(pairs)
def test_a_block_of_pairs_parsed_whole_equals_its_lines_decoded_alone(numbers):
    lines = [b"[%d,%d]" % p for p in numbers]
    whole = int_pair_lines(b"".join(line + b"\n" for line in lines), len(lines))
    alone = [FORMATS.get("json").decode_entry(line) for line in lines]
    if whole is None:  # only numbers orjson cannot keep exact fall back
        assert any(not -(2**63) <= n < 2**64 for p in numbers for n in p)
    else:
        assert [list(p) for p in zip(*whole, strict=True)] == alone


good_line = st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(-1, 1)).map(
    lambda p: b"[%d,%d]" % p
)
refused = (b" [1,2]", b"[1,2] ", b"[1.5,0]", b"[01,2]", b"[1,2,3]")


@given(st.lists(st.one_of(good_line, st.sampled_from((b"[1, 2]", *refused))), min_size=1))
def test_a_block_with_any_other_line_is_left_to_the_line_decoder(lines):
    whole = int_pair_lines(b"".join(line + b"\n" for line in lines), len(lines))
    if any(line in refused for line in lines):
        assert whole is None
    else:  # spaces between the numbers read as they do alone
        alone = [FORMATS.get("json").decode_entry(line) for line in lines]
        assert whole is not None and [list(p) for p in zip(*whole, strict=True)] == alone


def test_a_parquet_objects_own_timestamps_stay_beside_its_keys_file(tmp_path):
    """A Parquet row keeps its time in ``__kafka_timestamp``; the ``.keys`` file beside it
    adds the key and must not replace that time with none (issue 41)."""
    from testkit.archives import export_batches
    from testkit.connect_orders import CONNECT_JSON, orders
    from testkit.connect_orders import T0 as ORDERS_T0

    sink = {
        "format.class": "parquet",
        "s3.compression.type": "none",
        **CONNECT_JSON,
        "s3.compression.block.records": "10",
        "flush.size": "40",
        "store.kafka.keys": "true",
    }
    export_batches(str(tmp_path), orders(80), "default", batches=2, **sink)
    with open_archive(str(tmp_path)) as archive:
        got = list(archive.seek("orders", 0, 38, count=4))
        window = [r.offset for _, r in archive.records("orders", from_time=ORDERS_T0 + 75_000)]
    assert [(r.offset, r.key, r.timestamp) for r in got] == [
        (n, b"k%d" % n, ORDERS_T0 + n * 1000) for n in range(38, 42)
    ]
    assert window == list(range(75, 80))
