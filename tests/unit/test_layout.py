"""Object keys (``blockgz.archive.layout``): what :class:`Layout` builds, it parses back.

Properties over Kafka-legal topics, partitions, offsets and every layout setting (padding,
directory and file delimiters, ``topics.dir``, prefix, encoded partition, extension), plus the
index sidecars, the batch manifests and the configuration errors.
"""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from blockgz.archive.layout import Layout
from blockgz.errors import ConfigError
from blockgz.options import Options
from blockgz.written.sidecars import (
    data_key_for,
    is_sidecar,
    legacy_sidecar_key,
    sidecar_key,
    sidecar_keys,
)

EXTENSIONS = (".json", ".json.gz", ".bin", ".bin.gz", ".avro")

# Kafka topic names: [a-zA-Z0-9._-]{1,249}, except "." and "..".
topics = st.text(string.ascii_letters + string.digits + "._-", min_size=1, max_size=249).filter(
    lambda t: t not in (".", "..")
)
partitions = st.integers(0, 2**31 - 1)
offsets = st.integers(0, 2**63 - 1)
extensions = st.sampled_from(EXTENSIONS)
# Directory delimiters hold none of the characters of a topic name or an extension ("._-"): the
# parser splits a key at its last directory delimiter, so Layout refuses those (tested below).
directory_delims = st.one_of(
    st.sampled_from(["/", "|", "!", "::", "#", "//", "\\"]),
    st.text("/|!:#~;,@=^*&$<>\\", min_size=1, max_size=3),
)
# File delimiters: no digits; letters and the characters of topic names are fine (the parser is
# greedy: partition and start offset are the last two numbers of the name).
file_delims = st.one_of(
    st.sampled_from(["+", "-", "_", "~", "x", ".", "--", "+x"]),
    st.text(string.ascii_letters + "+-_~.:,=@!|/", min_size=1, max_size=3),
)
prefixes = st.sampled_from(["", "p/", "exports/2026/", "tenant-1_"])
segments = st.sampled_from(["topics", "a", "b", "archive", "x-y.z"])
partition_segments = st.sampled_from(
    ["partition=3", "year=2026", "month=11", "f=a%2Fb", "g=", "v=1+2+3.json"]
)
pad_widths = st.integers(0, 30)


@st.composite
def layouts(draw) -> Layout:
    delim = draw(directory_delims)
    file_delim = draw(file_delims.filter(lambda d: delim not in d))
    topics_dir = delim.join(draw(st.lists(segments, max_size=3)))  # "" included
    return Layout(topics_dir, delim, file_delim, draw(pad_widths))


@st.composite
def data_keys(draw) -> tuple[Layout, dict]:
    """A layout and the arguments of one ``data_key`` call."""
    layout = draw(layouts())
    topic = draw(topics)
    encoded = layout.directory_delim.join(
        draw(st.lists(partition_segments, min_size=1, max_size=3))
    )
    args = {
        "prefix": draw(prefixes),
        "partitioned_path": f"{topic}{layout.directory_delim}{encoded}",
        "topic": topic,
        "partition": draw(partitions),
        "start_offset": draw(offsets),
        "extension": draw(extensions),
    }
    return layout, args


# -- data keys ----------------------------------------------------------------------------------
@given(data_keys(), st.integers(-1, 2**40), st.booleans())
def test_data_key_round_trips(case, size, ext_known):
    layout, args = case
    key = layout.data_key(**args)
    ext = args["extension"]
    ref = layout.parse_data_key(key, size=size, extension=ext if ext_known else None)
    assert ref is not None, key
    assert (ref.key, ref.topic, ref.partition, ref.start_offset) == (
        key,
        args["topic"],
        args["partition"],
        args["start_offset"],
    )
    assert ref.extension == ext[1:]
    assert ref.compressed == ext.endswith(".gz")
    assert (ref.size, ref.has_index) == (size, False)
    name = layout.file_name(args["topic"], args["partition"], args["start_offset"], ext)
    assert key.endswith(layout.directory_delim + name)
    assert ref.directory == key[: -len(layout.directory_delim + name)]
    assert ref.directory == layout.topics_root(args["prefix"]) + args["partitioned_path"]


@given(data_keys())
def test_data_key_sits_under_its_prefixes(case):
    layout, args = case
    key = layout.data_key(**args)
    prefix, topic = args["prefix"], args["topic"]
    assert key.startswith(layout.topic_prefix(prefix, topic))
    assert layout.topic_prefix(prefix, topic).startswith(layout.topics_root(prefix))
    assert layout.topic_prefix(prefix) == layout.topics_root(prefix)
    default_path = f"{topic}{layout.directory_delim}partition={args['partition']}"
    default_key = layout.data_key(**{**args, "partitioned_path": default_path})
    assert default_key.startswith(layout.partition_prefix(prefix, topic, args["partition"]))


@given(data_keys())
def test_start_offset_is_zero_padded(case):
    layout, args = case
    key = layout.data_key(**args)
    digits = str(args["start_offset"]).zfill(layout.offset_pad_width)
    assert key.endswith(f"{layout.file_delim}{digits}{args['extension']}")


@given(data_keys(), extensions)
def test_another_extension_does_not_parse(case, other):
    layout, args = case
    if other != args["extension"]:
        assert layout.parse_data_key(layout.data_key(**args), extension=other) is None


@pytest.mark.parametrize(
    ("topic", "file_delim"),
    [
        ("my-topic", "-"),
        ("my_topic", "_"),
        ("v1.2", "."),
        ("a-1-2", "-"),
        ("axb", "x"),
        ("a--", "--"),
    ],
)
def test_topic_holding_the_file_delimiter_round_trips(topic, file_delim):
    layout = Layout(file_delim=file_delim)
    key = layout.data_key("", f"{topic}/partition=4", topic, 4, 5, ".json.gz")
    ref = layout.parse_data_key(key)
    assert ref is not None
    assert (ref.topic, ref.partition, ref.start_offset, ref.extension) == (topic, 4, 5, "json.gz")


def test_confluent_default_key():
    key = Layout().data_key("", "orders/partition=3", "orders", 3, 1000, ".json.gz")
    assert key == "topics/orders/partition=3/orders+3+0000001000.json.gz"


@pytest.mark.parametrize(
    "key",
    [
        "topics/orders/partition=3/orders+3.json",
        "topics/orders/partition=3/orders+x+5.json",
        "topics/orders/partition=3/+3+5.json",
        "topics/orders/partition=3/orders+3+5",
        "_blockgz/job/manifests/00000000000000000007.json",
    ],
)
def test_other_keys_do_not_parse(key):
    assert Layout().parse_data_key(key) is None


# -- index sidecars -----------------------------------------------------------------------------
@given(data_keys().filter(lambda case: case[1]["extension"].endswith(".gz")))
def test_sidecar_round_trips(case):
    layout, args = case
    key = layout.data_key(**args)
    sidecar, legacy = sidecar_keys(key)
    assert legacy == legacy_sidecar_key(key) == key[: -len(".gz")] + ".index.json"
    directory, slash, name = legacy.rpartition("/")
    assert sidecar == sidecar_key(key) == f"{directory}{slash}.{name}"  # hidden: leading dot
    for index in (sidecar, legacy):
        assert is_sidecar(index)
        assert layout.parse_data_key(index) is None
        assert layout.parse_data_key(index, extension=args["extension"]) is None
    assert not is_sidecar(key)
    assert data_key_for(sidecar) == key
    if not name.startswith("."):  # an old sidecar of a topic named ".x" reads as hidden
        assert data_key_for(legacy) == key
    assert data_key_for(key) == key


@pytest.mark.parametrize(
    ("data", "hidden"),
    [
        (
            "topics/orders/partition=0/orders+0+0000000000.json.gz",
            "topics/orders/partition=0/.orders+0+0000000000.json.index.json",
        ),
        (
            "topics/orders/partition=0/orders+0+0000000000.bin.gz",
            "topics/orders/partition=0/.orders+0+0000000000.bin.index.json",
        ),
        (
            "topics/orders/partition=0/orders+0+0000000000.avro",
            "topics/orders/partition=0/.orders+0+0000000000.avro.index.json",
        ),
        ("orders+0+0000000000.json.gz", ".orders+0+0000000000.json.index.json"),
    ],
)
def test_sidecar_is_a_hidden_file_beside_its_object(data, hidden):
    assert sidecar_key(data) == hidden
    assert data_key_for(hidden) == data
    assert data_key_for(legacy_sidecar_key(data)) == data


# -- exact names: anything else is a stray --------------------------------------------------------
@pytest.mark.parametrize(
    "name",
    [
        "orders+0+0000009999.json.gz.bak",
        "orders+0+0000009999.txt",
        "orders+0+0000009999.json.gz~",
        "orders+0+0000009999.json.tmp",
        "orders+0+0000009999.gz",
        "orders+0+0000009999.keys.txt",
        "orders+0+9999.json.gz",  # not padded to 10 digits
        "orders+0+00000009999.json.gz",  # padded to 11
        "orders+00+0000009999.json.gz",  # partition not as Kafka numbers it
        "orders+0+0000009999.json.index.json",
        ".orders+0+0000009999.json.index.json",
    ],
)
def test_a_name_the_sink_never_writes_is_no_data_object(name):
    assert Layout().parse_data_key(f"topics/orders/partition=0/{name}") is None


@pytest.mark.parametrize(
    "ext",
    [
        "json",
        "json.gz",
        "bin",
        "bin.gz",
        "avro",
        "keys.json",
        "keys.json.gz",
        "headers.bin.gz",
        "keys.avro",
        "headers.avro",
    ],
)
def test_every_extension_the_sink_writes_parses(ext):
    ref = Layout().parse_data_key(f"topics/orders/partition=0/orders+0+0000009999.{ext}")
    assert ref is not None and (ref.start_offset, ref.extension) == (9999, ext)


def test_a_start_offset_longer_than_the_padding_parses_only_without_leading_zeros():
    layout = Layout(offset_pad_width=3)
    assert layout.parse_data_key("t+0+12345.json").start_offset == 12345
    assert layout.parse_data_key("t+0+007.json").start_offset == 7
    assert layout.parse_data_key("t+0+0007.json") is None
    assert Layout(offset_pad_width=0).parse_data_key("t+0+0.json").start_offset == 0


def test_a_custom_bytearray_extension_is_known_to_the_layout_that_names_it():
    key = "topics/t/partition=0/t+0+0000000000.dat.gz"
    assert Layout().parse_data_key(key) is None
    opts = Options({"format.bytearray.extension": ".dat"})
    ref = Layout.from_options(opts).parse_data_key(key)
    assert ref is not None and ref.extension == "dat.gz" and ref.format == "bytearray"
    assert Layout.from_options(opts).parse_data_key(key.replace(".dat", ".bin")) is not None
    assert Layout().parse_data_key(key, any_extension=True) is not None  # a manifest's word
    assert "format.bytearray.extension" not in Layout().to_dict()
    assert (
        Layout.from_options(Options(Layout.from_options(opts).to_dict())).bytearray_extension
        == ".dat"
    )


# -- manifests ----------------------------------------------------------------------------------
epochs = st.text(string.ascii_letters + string.digits, min_size=1, max_size=24)
job_names = st.text(string.ascii_letters + string.digits + "-_.", min_size=1, max_size=20)
batch_ids = st.one_of(
    st.integers(0, 10**19),
    st.text("0123456789abcdef", min_size=1, max_size=32).map(lambda h: f"batch-{h}"),
)


@given(prefixes, job_names, batch_ids, st.one_of(st.just(""), epochs))
def test_manifest_key_round_trips(prefix, job, batch, epoch):
    layout = Layout()
    key = layout.manifest_key(prefix, job, batch, epoch=epoch)
    assert key.startswith(layout.manifest_prefix(prefix, job))
    assert key.endswith(".json")
    assert Layout.parse_manifest_key(key) == (epoch, batch)


@given(st.lists(st.tuples(epochs, st.integers(0, 10**19)), min_size=2, max_size=8, unique=True))
def test_manifest_keys_sort_by_epoch_then_batch(ids):
    layout = Layout()
    by_key = sorted(ids, key=lambda i: layout.manifest_key("", "j", i[1], epoch=i[0]))
    assert by_key == sorted(ids)


def test_manifest_key_pads_a_numeric_text_batch():
    key = Layout(manifest_dir="m").manifest_key("p/", "job", "7")
    assert key == "p/m/job/manifests/00000000000000000007.json"
    assert Layout.parse_manifest_key(key) == ("", 7)


@pytest.mark.parametrize(
    "key",
    [
        "_blockgz/j/manifests/7.json",
        "_blockgz/j/manifests/e1-0000000000000000007.json",
        "_blockgz/j/manifests/batch-.json",
        "_blockgz/j/manifests/batch-ABC.json",
        "_blockgz/j/manifests/e-1-00000000000000000007.json",
        "_blockgz/j/manifests/00000000000000000007.json.tmp",
    ],
)
def test_other_manifest_names_do_not_parse(key):
    assert Layout.parse_manifest_key(key) is None


# -- settings -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "option"),
    [
        ({"directory_delim": ""}, "directory.delim"),
        ({"directory_delim": "%"}, "directory.delim"),
        ({"directory_delim": "/%"}, "directory.delim"),
        ({"directory_delim": "a"}, "directory.delim"),
        ({"directory_delim": "1"}, "directory.delim"),
        ({"file_delim": ""}, "file.delim"),
        ({"file_delim": "1"}, "file.delim"),
        ({"file_delim": "+0+"}, "file.delim"),
        ({"file_delim": "a/b"}, "file.delim"),
        ({"directory_delim": "|", "file_delim": "+|"}, "file.delim"),
        ({"directory_delim": "-"}, "directory.delim"),
        ({"directory_delim": "_"}, "directory.delim"),
        ({"directory_delim": "."}, "directory.delim"),
        ({"directory_delim": "/."}, "directory.delim"),
        ({"offset_pad_width": -1}, "filename.offset.zero.pad.width"),
        ({"offset_pad_width": 31}, "filename.offset.zero.pad.width"),
    ],
)
def test_invalid_layouts_name_the_option(kwargs, option):
    with pytest.raises(ConfigError, match="allowed") as info:
        Layout(**kwargs)
    assert str(info.value).startswith(f"{option}: ")


@given(layouts())
def test_generated_layouts_are_valid_and_read_back_from_options(layout):
    options = Options(
        {
            "topics.dir": f" {layout.directory_delim}{layout.topics_dir} ",
            "directory.delim": layout.directory_delim,
            "file.delim": layout.file_delim,
            "filename.offset.zero.pad.width": str(layout.offset_pad_width),
        }
    )
    assert Layout.from_options(options) == layout


def test_from_options_defaults_and_normalizes():
    assert Layout.from_options(Options({})) == Layout()
    layout = Layout.from_options(
        Options({"topics.dir": "/archive/", "file.delim": "", "blockgz.manifest.dir": "/m/"})
    )
    assert layout == Layout(topics_dir="archive", manifest_dir="m")


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"directory.delim": ""}, "directory.delim"),
        ({"file.delim": "7"}, "file.delim"),
        ({"filename.offset.zero.pad.width": "31"}, "filename.offset.zero.pad.width"),
        ({"filename.offset.zero.pad.width": "ten"}, "filename.offset.zero.pad.width"),
    ],
)
def test_from_options_errors_name_the_option(options, option):
    with pytest.raises(ConfigError) as info:
        Layout.from_options(Options(options))
    assert str(info.value).startswith(f"{option}: ")


def test_a_reader_given_part_of_a_layout_learns_the_rest_or_names_what_differs(tmp_path):
    """Issue 41: ``-O topics.dir=arch`` alone reads an export written with ``file.delim=-``;
    a given option the export contradicts is refused naming it and the archive's value."""
    from blockgz.errors import ConfigError
    from blockgz.reader import open_archive
    from blockgz.sink.records import KafkaRecord
    from testkit.archives import export_batches

    records = [KafkaRecord("t", 0, n, 1000 + n, None, b'{"n":%d}' % n) for n in range(9)]
    written = {"format.class": "json", "topics.dir": "arch", "file.delim": "-"}
    export_batches(str(tmp_path), records, "default", batches=2, **written)
    with open_archive(str(tmp_path), {"topics.dir": "arch"}) as archive:
        assert [r.offset for r in archive.seek("t", 0, 4)] == list(range(4, 9))
        assert archive.layout == Layout(topics_dir="arch", file_delim="-")
    refused = (({"file.delim": "+"}, "file.delim"), ({"topics.dir": "a"}, "topics.dir"))
    for options, differs in refused:
        archive = open_archive(str(tmp_path), {"topics.dir": "arch", **options})
        with archive, pytest.raises(ConfigError, match=f"^{differs}=.* written with {differs}="):
            list(archive.seek("t", 0, 4))
    with open_archive(str(tmp_path)) as archive:  # nothing given: learned as before
        assert [r.offset for r in archive.seek("t", 0, 7)] == [7, 8]
