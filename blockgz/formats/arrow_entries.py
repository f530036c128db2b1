"""Encode a run's Kafka keys and headers straight from Arrow buffers, with no object per record.

The JSON and Avro formats lay out their keys/headers entries with it
(:meth:`~blockgz.formats.base.Format.encode_column`).

The keys and headers files (:mod:`blockgz.sink.write.companions`) hold one small entry per record;
built one Python object at a time they cost several times the value file they sit beside. On the
batch path the entries are instead laid out with numpy over the Arrow column's buffers: the
size of every entry is computed first, then each piece (length prefixes, union branches, the
bytes themselves) is scattered to its place in one output buffer. Python does a fixed amount of
work per run, however many records it holds.

Each encoder returns ``(data, ends)`` — the entries back to back and where each ends — or
``None`` when the column holds something the vectorized form does not cover (the caller then
takes the record-at-a-time path, which gives the same bytes; the tests check they agree):

* :func:`avro_nullable_bytes`: Avro ``["null", "bytes"]`` per key (the keys file without a key
  converter);
* :func:`avro_headers`: Avro ``array<{key: string, value: ["null", "bytes"]}>`` per record
  (the headers file; a null list is an empty array);
* :func:`avro_timestamps` / :func:`json_timestamp_lines`: a record's Kafka timestamp and type
  (the timestamps file);
* :func:`json_text_lines`: the key as a JSON string plus ``\\n`` when every key is UTF-8 text
  that JSON needs no escape for, ``null`` for a null key.

>>> import pyarrow as pa
>>> data, ends = avro_nullable_bytes(pa.array([b"ab", None], pa.binary()))
>>> bytes(data).hex(" "), ends.tolist()
('02 04 61 62 00', [4, 5])
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Avro encodes ``["null", X]``'s branch index as a zig-zag long: 0 -> 0x00, 1 -> 0x02.
_NULL_BRANCH, _VALUE_BRANCH = 0x00, 0x02
_MAX_VARINT = 10

Encoded = tuple[np.ndarray, np.ndarray]


def varint_sizes(zigzagged: np.ndarray) -> np.ndarray:
    """Bytes of each Avro varint (the value already zig-zag encoded, non-negative).

    >>> varint_sizes(np.array([0, 127, 128, 16384])).tolist()
    [1, 1, 2, 3]
    """
    sizes = np.ones(len(zigzagged), np.int64)
    for k in range(1, _MAX_VARINT):
        sizes += zigzagged >= (1 << (7 * k))
    return sizes


def put_varints(out: np.ndarray, at: np.ndarray, zigzagged: np.ndarray, sizes: np.ndarray) -> None:
    """Write each varint ``zigzagged[i]`` (of ``sizes[i]`` bytes) at ``out[at[i]:]``."""
    value = zigzagged.astype(np.uint64)
    for k in range(int(sizes.max()) if len(sizes) else 0):
        more = sizes > k
        byte = (value >> np.uint64(7 * k)) & np.uint64(0x7F)
        byte |= np.where(sizes > k + 1, np.uint64(0x80), np.uint64(0))
        out[at[more] + k] = byte[more].astype(np.uint8)


def copy_runs(
    out: np.ndarray, at: np.ndarray, data: np.ndarray, starts: np.ndarray, lengths: np.ndarray
) -> None:
    """Copy ``data[starts[i]:starts[i] + lengths[i]]`` to ``out[at[i]:]`` for every ``i`` at once.

    >>> out = np.zeros(6, np.uint8)
    >>> copy_runs(out, np.array([0, 4]), np.frombuffer(b"abcdef", np.uint8),
    ...           np.array([1, 4]), np.array([2, 2]))
    >>> bytes(out)
    b'bc\\x00\\x00ef'
    """
    total = int(lengths.sum())
    if not total:
        return
    packed = np.cumsum(lengths) - lengths  # where each run starts among the copied bytes
    step = np.arange(total)
    out[np.repeat(at - packed, lengths) + step] = data[np.repeat(starts - packed, lengths) + step]


def binary_parts(array: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(data, offsets, valid)`` of an Arrow binary/string array, as numpy, slice applied:
    value ``i`` is ``data[offsets[i]:offsets[i+1]]``; a null has ``valid[i]`` false."""
    import pyarrow as pa

    width: type[np.signedinteger]
    if pa.types.is_large_binary(array.type) or pa.types.is_large_string(array.type):
        width = np.int64
    else:
        width = np.int32
    offsets_buffer, data_buffer = array.buffers()[1:3]
    n, start = len(array), array.offset
    offsets = np.frombuffer(offsets_buffer, width)[start : start + n + 1].astype(np.int64)
    data = np.empty(0, np.uint8) if data_buffer is None else np.frombuffer(data_buffer, np.uint8)
    if array.null_count:
        valid = array.is_valid().to_numpy(zero_copy_only=False)
    else:
        valid = np.ones(n, bool)
    return data, offsets, valid


def _ends(sizes: np.ndarray) -> np.ndarray:
    return np.cumsum(sizes, dtype=np.int64)


def avro_nullable_bytes(array: Any) -> Encoded:
    """Each value as Avro ``["null", "bytes"]``: ``00`` for null, ``02 <len> <bytes>``."""
    data, offsets, valid = binary_parts(array)
    lengths = np.where(valid, np.diff(offsets), 0)
    zz = lengths * 2
    prefix = varint_sizes(zz)
    sizes = np.where(valid, 1 + prefix + lengths, 1)
    ends = _ends(sizes)
    out = np.zeros(int(ends[-1]) if len(ends) else 0, np.uint8)
    starts = ends - sizes
    present = np.flatnonzero(valid)
    out[starts[present]] = _VALUE_BRANCH
    put_varints(out, starts[present] + 1, zz[present], prefix[present])
    copy_runs(out, starts + 1 + prefix, data, offsets[:-1], lengths)
    return out, ends


def avro_headers(array: Any) -> Encoded | None:
    """Each record's headers as Avro ``array<{key: string, value: ["null", "bytes"]}>``.

    A record without headers is an empty array (``00``); ``None`` if a header or its key is
    null (Kafka allows neither; the record path says which record).

    >>> import pyarrow as pa
    >>> from blockgz.sink.records import kafka_arrow_schema
    >>> column = pa.array([[{"key": "k", "value": b"v"}], None],
    ...                   kafka_arrow_schema(True).field("headers").type)
    >>> data, ends = avro_headers(column)
    >>> bytes(data).hex(" "), ends.tolist()
    ('02 02 6b 02 02 76 00 00', [7, 8])
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if array.null_count:
        array = pc.fill_null(array, pa.scalar([], type=array.type))
    counts: np.ndarray = np.diff(np.asarray(array.offsets, np.int64))
    entries = array.flatten()  # this slice's headers, back to back
    if entries.null_count:
        return None
    names, values = entries.flatten()
    if names.null_count:
        return None
    name_data, name_offsets, _ = binary_parts(names)
    value_data, value_offsets, has_value = binary_parts(values)
    name_lengths = np.diff(name_offsets)
    value_lengths = np.where(has_value, np.diff(value_offsets), 0)
    name_prefix = varint_sizes(name_lengths * 2)
    value_prefix = np.where(has_value, varint_sizes(value_lengths * 2), 0)
    entry_sizes = name_prefix + name_lengths + 1 + value_prefix + value_lengths
    count_prefix = np.where(counts > 0, varint_sizes(counts * 2), 0)
    entry_ends = np.cumsum(entry_sizes)
    before = np.concatenate(([0], entry_ends))  # entry bytes before each record's first
    record_entry_bytes = before[np.cumsum(counts)] - before[np.cumsum(counts) - counts]
    sizes = count_prefix + record_entry_bytes + 1  # + the 0 that ends the array
    ends = _ends(sizes)
    out = np.zeros(int(ends[-1]) if len(ends) else 0, np.uint8)
    starts = ends - sizes
    some = np.flatnonzero(counts)
    put_varints(out, starts[some], counts[some] * 2, count_prefix[some])
    # Entry e of record r starts after r's count and r's earlier entries.
    record_of = np.repeat(np.arange(len(counts)), counts)
    first_entry = np.cumsum(counts) - counts
    at = (
        starts[record_of]
        + count_prefix[record_of]
        + (entry_ends - entry_sizes)
        - before[first_entry][record_of]
    )
    put_varints(out, at, name_lengths * 2, name_prefix)
    at = at + name_prefix
    copy_runs(out, at, name_data, name_offsets[:-1], name_lengths)
    at = at + name_lengths
    present = np.flatnonzero(has_value)
    out[at[present]] = _VALUE_BRANCH
    at = at + 1
    put_varints(out, at[present], value_lengths[present] * 2, value_prefix[present])
    copy_runs(out, at + value_prefix, value_data, value_offsets[:-1], value_lengths)
    return out, ends


def zigzag(values: np.ndarray) -> np.ndarray:
    """Avro's zig-zag of int64 values, as uint64.

    >>> zigzag(np.array([0, -1, 1, -2])).tolist()
    [0, 1, 2, 3]
    """
    values = values.astype(np.int64)
    return ((values << 1) ^ (values >> 63)).astype(np.uint64)


def avro_timestamps(stamps: np.ndarray, kinds: np.ndarray) -> Encoded:
    """Each record's ``{timestamp: long, type: int}`` in Avro: two zig-zag varints.

    >>> data, ends = avro_timestamps(np.array([1, -1]), np.array([0, -1]))
    >>> bytes(data).hex(" "), ends.tolist()
    ('02 00 01 01', [2, 4])
    """
    zz_stamps, zz_kinds = zigzag(stamps), zigzag(kinds)
    stamp_sizes, kind_sizes = varint_sizes(zz_stamps), varint_sizes(zz_kinds)
    sizes = stamp_sizes + kind_sizes
    ends = _ends(sizes)
    out = np.zeros(int(ends[-1]) if len(ends) else 0, np.uint8)
    starts = ends - sizes
    put_varints(out, starts, zz_stamps, stamp_sizes)
    put_varints(out, starts + stamp_sizes, zz_kinds, kind_sizes)
    return out, ends


def json_timestamp_lines(stamps: np.ndarray, kinds: np.ndarray) -> Encoded:
    """Each record's ``[timestamp,type]`` as a JSON line, laid out by Arrow's compute.

    >>> data, ends = json_timestamp_lines(np.array([1700000000000, -1]), np.array([0, -1]))
    >>> bytes(data), ends.tolist()
    (b'[1700000000000,0]\\n[-1,-1]\\n', [18, 26])
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    texts = pc.binary_join_element_wise(
        "[",
        pc.cast(pa.array(stamps, pa.int64()), pa.string()),
        ",",
        pc.cast(pa.array(kinds, pa.int64()), pa.string()),
        "]\n",
        "",
    )
    data, offsets, _ = binary_parts(texts)
    return data[int(offsets[0]) : int(offsets[-1])], offsets[1:] - offsets[0]


#: Bytes a JSON string must escape: control characters, the quote and the backslash.
_JSON_ESCAPED = bytes(range(0x20)) + b'"\\'


def json_text_lines(array: Any) -> Encoded | None:
    """Each value as a JSON string line (``"text"\\n``; ``null\\n`` for a null), or ``None``
    unless every value is UTF-8 text that JSON writes as it is (no escapes, no base64).

    >>> import pyarrow as pa
    >>> data, ends = json_text_lines(pa.array([b"user-1", None], pa.binary()))
    >>> bytes(data), ends.tolist()
    (b'"user-1"\\nnull\\n', [9, 14])
    """
    data, offsets, valid = binary_parts(array)
    lengths = np.where(valid, np.diff(offsets), 0)
    used = data[int(offsets[0]) : int(offsets[-1])] if len(offsets) else data[:0]
    raw = used.tobytes()
    if _has_any(raw):
        return None
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    # The whole is UTF-8; each value is too unless one starts inside a character.
    firsts = data[offsets[:-1][lengths > 0]]
    if np.any((firsts & 0xC0) == 0x80):
        return None
    sizes = np.where(valid, lengths + 3, 5)
    ends = _ends(sizes)
    out = np.zeros(int(ends[-1]) if len(ends) else 0, np.uint8)
    starts = ends - sizes
    present = np.flatnonzero(valid)
    out[starts[present]] = ord('"')
    out[ends[present] - 2] = ord('"')
    copy_runs(out, starts + 1, data, offsets[:-1], lengths)
    absent = starts[~valid]
    for k, byte in enumerate(b"null"):
        out[absent + k] = byte
    out[ends - 1] = ord("\n")
    return out, ends


def _has_any(raw: bytes) -> bool:
    """Whether ``raw`` holds a byte JSON would escape."""
    return len(raw.translate(None, _JSON_ESCAPED)) != len(raw)
