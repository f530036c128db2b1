"""Every key of the archive is built and parsed by its layout (blockgz.archive), and readers use
either layout through one protocol, never by its class."""

from __future__ import annotations

import ast
import datetime as dt
from pathlib import Path

import pytest

from blockgz.archive.deviantart import DeviantArtLayout
from blockgz.archive.layout import KeyLayout, Layout
from blockgz.reader.reading.strays import is_stray

ROOT = Path(__file__).resolve().parents[2]
LAYOUTS = [Layout(), Layout(file_delim="-", offset_pad_width=20), DeviantArtLayout()]


@pytest.mark.parametrize("layout", LAYOUTS, ids=["confluent", "custom", "deviantart"])
def test_both_layouts_implement_the_protocol(layout):
    assert isinstance(layout, KeyLayout)
    assert layout.kind in ("confluent", "deviantart")
    assert layout.describe() in (f"topics.dir={layout.topics_dir!r}", "layout=deviantart")


def test_no_product_module_branches_on_the_layout_class():
    branching = []
    for package in ("blockgz", "sink", "reader"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if (
                    isinstance(node, ast.Call)
                    and getattr(node.func, "id", None) == "isinstance"
                    and "Layout" in ast.unparse(node.args[1])
                ):
                    branching.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert branching == []


def test_directories_tell_their_partition_under_each_layout():
    assert Layout().partition_of_directory("topics/t/partition=7/") == 7
    assert Layout(directory_delim="|").partition_of_directory("topics|t|partition=7|") == 7
    assert Layout().partition_of_directory("topics/t/country=DE/") is None
    assert DeviantArtLayout().partition_of_directory("2016-02-24/") is None
    assert Layout().topics_directory("p/") == "p/topics/"
    assert DeviantArtLayout().topics_directory("p/") is None


def test_what_is_a_stray_is_the_layouts_word():
    assert not is_stray(Layout(topics_dir=""), "", "_blockgz/job/manifests/x.json")
    assert is_stray(Layout(topics_dir=""), "", "notes.txt")
    assert not is_stray(DeviantArtLayout(), "", "last_chunk_index.t-00000.txt")
    assert is_stray(DeviantArtLayout(), "", "2016-02-24/notes.txt")


def test_deviantart_keeps_the_latest_days_copy_of_a_reuploaded_object():
    layout = DeviantArtLayout()
    keys = [layout.data_key("", "t", 0, 100, dt.date(2016, 2, d)) for d in (24, 25)]
    refs = [layout.parse_data_key(k) for k in keys]
    assert [r.key for r in layout.one_copy_each(refs)] == [keys[1]]
    assert Layout().one_copy_each(refs) == refs


@pytest.mark.parametrize(
    ("layout", "name"),
    [
        (Layout(), "t+3+0000000500.jsonl"),
        (Layout(file_delim="-", offset_pad_width=4), "t-3-0500.jsonl"),
    ],
)
def test_dead_letter_keys_are_named_as_data_objects_are(layout, name):
    assert (
        layout.deadletter_key("p/", "job", "t", 3, 500) == f"p/_blockgz/job/deadletters/t/3/{name}"
    )


def test_intent_keys_parse_back_and_sort_by_first_offset():
    layout = Layout(manifest_dir="meta")
    key = layout.intent_key("p/", "job", "my-topic", 12, 500, "ab12cd34")
    assert key == "p/meta/job/intents/my-topic/12/00000000000000000500-ab12cd34.json"
    assert layout.parse_intent_key("p/", "job", key) == ("my-topic", 12, 500)
    after = layout.intents_start_after("p/", "job", "my-topic", 12, 500)
    assert after < key
    assert layout.intents_start_after("p/", "job", "my-topic", 12, 501) > key
    for other in ("p/meta/job/intents/t/x/1-a.json", "p/meta/job/manifests/1.json", "elsewhere"):
        assert layout.parse_intent_key("p/", "job", other) is None


def test_catalog_and_lease_keys_sit_under_the_job():
    layout = Layout()
    assert (
        layout.catalog_root_key("", "j", 3)
        == "_blockgz/j/catalog/roots/00000000000000000003.json.gz"
    )
    assert layout.catalog_segment_key("", "j", "t", 0, 3, 1).startswith(
        layout.catalog_segments_prefix("", "j") + "t/0/"
    )
    assert layout.lease_key("x/", "j") == "x/_blockgz/j/lease.json"
    assert layout.job_of_directory(layout.job_prefix("x/", "j")) == "j"
