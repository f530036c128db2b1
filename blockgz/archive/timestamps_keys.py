"""Where a value file's record timestamps live, and back: names only.

The export keeps each record's Kafka timestamp and type (``store.kafka.timestamps``, on by
default; see :mod:`blockgz.sink.write.companions`) in the value file's ``.index.json`` sidecar
where it has one (since issue 44: :mod:`blockgz.blocks.stamps`), else in a companion file
beside it, whose keys this module names; archives written before have one beside every value
file. Its
name is the value file's, with a leading ``.`` (hidden from Spark/Hadoop, DuckDB, Hive, Athena,
Trino and ``glob``, as the index sidecars are: :mod:`blockgz.written.sidecars`), the value
extension replaced by ``.timestamps.<ext>``::

    topics/t/partition=0/t+0+0000000042.json.gz
    topics/t/partition=0/.t+0+0000000042.timestamps.json.gz

so a query engine reading a topic's folder never counts its ``[ms,type]`` lines as records.
Archives written before it was hidden have it visible (``t+0+0000000042.timestamps.json.gz``);
readers read both names. The ``.keys``/``.headers`` companions keep Confluent's visible names.

A topic whose own name starts with ``.`` is read as its visible name says: a hidden
timestamps name always belongs to the topic named without its first dot.
"""

from __future__ import annotations

from blockgz.written.sidecars import hidden_key, is_sidecar

TIMESTAMPS = "timestamps"
_MARK = f".{TIMESTAMPS}."


def timestamps_key(value_key: str, value_extension: str, extension: str) -> str:
    """The hidden timestamps file of the value file at ``value_key`` (whose extension is
    ``value_extension``), in a format whose extension is ``extension`` (with their dots).

    >>> timestamps_key("topics/t/partition=0/t+0+0000000042.json.gz", ".json.gz", ".json.gz")
    'topics/t/partition=0/.t+0+0000000042.timestamps.json.gz'
    >>> timestamps_key("t+0+0000000042.avro", ".avro", ".avro")
    '.t+0+0000000042.timestamps.avro'
    """
    return hidden_key(legacy_timestamps_key(value_key, value_extension, extension))


def legacy_timestamps_key(value_key: str, value_extension: str, extension: str) -> str:
    """Where blockgz wrote the timestamps file before it was hidden: beside the value file,
    visible, as the keys and headers files are.

    >>> legacy_timestamps_key("d/t+0+0000000042.json.gz", ".json.gz", ".json.gz")
    'd/t+0+0000000042.timestamps.json.gz'
    """
    stem = value_key[: len(value_key) - len(value_extension)]
    return f"{stem}{_MARK}{extension.removeprefix('.')}"


def is_hidden_timestamps(key: str) -> bool:
    """Whether ``key`` has the name of a hidden timestamps file (not its index sidecar).

    >>> [is_hidden_timestamps(k) for k in ("d/.t+0+0000000042.timestamps.json.gz",
    ...  "d/t+0+0000000042.timestamps.json.gz", "d/..t+0+0000000042.timestamps.json.index.json",
    ...  "d/.t+0+0000000042.json.index.json")]
    [True, False, False, False]
    """
    name = key.rpartition("/")[2]
    return name.startswith(".") and _MARK in name and not is_sidecar(key)


def shown_key(key: str) -> str:
    """``key`` without the leading ``.`` of its last ``/`` segment (the name it hides).

    >>> shown_key("d/.t+0+0000000042.timestamps.json.gz")
    'd/t+0+0000000042.timestamps.json.gz'
    """
    directory, slash, name = key.rpartition("/")
    return f"{directory}{slash}{name.removeprefix('.')}"
