"""A topic's two lives: the manifests' ``topic_ids`` and the checks built on them."""

from __future__ import annotations

import json

from blockgz.archive.layout import Layout
from blockgz.archive.manifests import Manifest, Manifests
from blockgz.store import LocalStore


def test_manifest_records_topic_ids(tmp_path):
    manifests = Manifests(LocalStore(str(tmp_path)), "", Layout(), "job")
    key = manifests.write(
        0, files=[], offsets={"t": {0: 5}}, topic_ids={"t": "AAAAAAAAAHsAAAAAAAAByA"}
    )
    doc = json.loads((tmp_path / key).read_bytes())
    assert doc["topic_ids"] == {"t": "AAAAAAAAAHsAAAAAAAAByA"}
    assert manifests.read(key).topic_ids == {"t": "AAAAAAAAAHsAAAAAAAAByA"}


def test_manifest_without_topic_ids_reads_as_unknown(tmp_path):
    manifests = Manifests(LocalStore(str(tmp_path)), "", Layout(), "job")
    key = manifests.write(0, files=[], offsets={"t": {0: 5}})
    assert "topic_ids" not in json.loads((tmp_path / key).read_bytes())  # as before
    old = {"version": 1, "name": "j", "batch": "0", "offsets": {}, "files": []}
    assert Manifest.from_json(json.dumps(old)).topic_ids == {}
