"""Where a data object's ``.index.json`` sidecar lives, and back: names only (the
compression suffixes come from :mod:`blockgz.blocks.codecs.families`).

The upload (:mod:`blockgz.written.upload`) writes sidecars and the readers of objects
(:mod:`blockgz.objects`) find them through these, below the key layout
(:mod:`blockgz.archive.layout`), which uses them too.
"""

from __future__ import annotations

from blockgz.blocks.codecs.families import strip_suffix

INDEX_SUFFIX = ".index.json"
AVRO_SUFFIX = ".avro"


def sidecar_key(data_key: str) -> str:
    """Where blockgz writes the index of a data object: in the same directory, the object's
    name with a leading ``.`` (hidden from Hadoop, Spark, Hive, Athena, Trino, pyarrow and
    ``glob``), minus a trailing ``.gz`` (or ``.zst``), plus ``.index.json``.

    An Avro object keeps its ``.avro`` (Avro compresses inside the file, so blockgz writes no
    ``.avro.gz``, which would share the sidecar):

    >>> sidecar_key("topics/t/partition=0/t+0+0000000000.json.gz")
    'topics/t/partition=0/.t+0+0000000000.json.index.json'
    >>> sidecar_key("t+0+0000000000.json.zst")
    '.t+0+0000000000.json.index.json'
    >>> sidecar_key("t+0+0000000000.avro")
    '.t+0+0000000000.avro.index.json'
    """
    return hidden_key(legacy_sidecar_key(data_key))


def hidden_key(key: str) -> str:
    """``key`` with a leading ``.`` on its last ``/`` segment (the file name engines see).

    >>> hidden_key("topics/t/partition=0/t+0+")
    'topics/t/partition=0/.t+0+'
    """
    directory, slash, name = key.rpartition("/")
    return f"{directory}{slash}.{name}"


def legacy_sidecar_key(data_key: str) -> str:
    """Where blockgz wrote the index before it was hidden, and where DeviantArt's connector
    writes it: beside the object, no leading dot.

    >>> legacy_sidecar_key("2016-02-24/t-00000-000000000100.gz")
    '2016-02-24/t-00000-000000000100.index.json'
    """
    return strip_suffix(data_key) + INDEX_SUFFIX


def sidecar_keys(data_key: str) -> tuple[str, str]:
    """The keys an index of ``data_key`` may have, in the order readers look for them."""
    return sidecar_key(data_key), legacy_sidecar_key(data_key)


def data_key_for(key: str, suffix: str = ".gz") -> str:
    """Accept a data key or its ``.index.json`` key (hidden or not) and return the data key,
    ending with ``suffix`` (the index's codec says which: ``.zst`` for block-zstd).

    >>> data_key_for("t+0+0000000000.json.index.json")
    't+0+0000000000.json.gz'
    >>> data_key_for("d/.t+0+0000000000.json.index.json")
    'd/t+0+0000000000.json.gz'
    >>> data_key_for(".t+0+0000000000.avro.index.json")
    't+0+0000000000.avro'
    """
    if not key.endswith(INDEX_SUFFIX):
        return key
    directory, slash, name = key[: -len(INDEX_SUFFIX)].rpartition("/")
    base = directory + slash + name.removeprefix(".")
    return base if base.endswith(AVRO_SUFFIX) else base + suffix


def is_sidecar(key: str) -> bool:
    return key.endswith(INDEX_SUFFIX)
