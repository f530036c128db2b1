"""A topic's two lives: the manifests' ``topic_ids`` and the checks built on them."""

from __future__ import annotations

import json

import pytest

from blockgz.archive.layout import Layout
from blockgz.commits.catalog import Catalog
from blockgz.commits.manifests import Manifest, Manifests
from blockgz.errors import TopicRecreatedError
from blockgz.sink.export.topic_checks import commit_check_options
from blockgz.sink.kafka.lives import check_start, recorded_topic_ids
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


def test_start_refuses_a_topic_whose_id_changed(tmp_path):
    manifests = Manifests(LocalStore(str(tmp_path)), "", Layout(), "job")
    manifests.write(0, files=[], offsets={"t": {0: 5}}, topic_ids={"t": "OLD", "u": "U1"})
    with pytest.raises(TopicRecreatedError) as refused:
        check_start(manifests, {"t": "NEW", "u": "U1"})
    message = str(refused.value)
    assert "topic t was deleted and recreated" in message and "\n" not in message
    assert "NEW" in message and "OLD" in message and "topics.dir" in message


def test_start_holds_to_the_newest_recorded_id(tmp_path):
    manifests = Manifests(LocalStore(str(tmp_path)), "", Layout(), "job")
    manifests.write(0, files=[], offsets={"t": {0: 5}}, topic_ids={"t": "OLD"})
    manifests.write(1, files=[], offsets={"t": {0: 9}}, topic_ids={"t": "NEW"})
    assert check_start(manifests, {"t": "NEW"}) == {"t": "NEW"}
    assert recorded_topic_ids(manifests) == {"t": "NEW"}


def test_unknown_ids_never_refuse(tmp_path):
    manifests = Manifests(LocalStore(str(tmp_path)), "", Layout(), "job")
    manifests.write(0, files=[], offsets={"t": {0: 5}})  # written before ids were recorded
    assert check_start(manifests, {"t": "NEW", "gone": None}) == {"t": "NEW"}


def test_recorded_ids_survive_catalog_compaction(tmp_path):
    manifests = Manifests(LocalStore(str(tmp_path)), "", Layout(), "job")
    manifests.write(0, files=[], offsets={"t": {0: 5}}, topic_ids={"t": "OLD"})
    Catalog(manifests).compact()
    assert recorded_topic_ids(manifests) == {"t": "OLD"}
    with pytest.raises(TopicRecreatedError):
        check_start(manifests, {"t": "NEW"})


def test_commit_check_options_carry_the_ids_and_the_client_settings():
    options = commit_check_options({"bootstrap.servers": "k:9092"}, {"t": "ID"})
    assert options["blockgz.commit.check"] == "blockgz.sink.kafka.lives:check_commit"
    assert json.loads(options["blockgz.commit.check.topic.ids"]) == {"t": "ID"}
    assert options["blockgz.commit.check.kafka.bootstrap.servers"] == "k:9092"


def test_audit_names_an_archive_where_two_lives_meet(tmp_path):
    from blockgz.reader.audit.auditor import audit_job

    manifests = Manifests(LocalStore(str(tmp_path)), "", Layout(), "job")
    manifests.write(0, files=[], offsets={"t": {0: 5}}, topic_ids={"t": "OLD", "u": "U"})
    assert audit_job(manifests).exit_code == 0
    manifests.write(1, files=[], offsets={"t": {0: 9}}, topic_ids={"t": "NEW", "u": "U"})
    Catalog(manifests).compact()  # the root keeps both ids
    manifests.write(2, files=[], offsets={"t": {0: 9}}, topic_ids={"t": "NEW", "u": "U"})
    report = audit_job(manifests)
    assert report.exit_code == 2
    (finding,) = [f for f in report.findings if f.kind == "topic_lives"]
    assert finding.topic == "t" and "(topic ids OLD, then NEW)" in finding.line()


def test_the_previous_ids_come_from_the_head_this_process_wrote(tmp_path, monkeypatch):
    from blockgz.commits.manifest_log import ManifestLog
    from blockgz.sink.kafka import lives

    log = ManifestLog(LocalStore(str(tmp_path)), "", Layout(), "job")
    log.write(0, files=[], offsets={"t": {0: 5}}, topic_ids={"t": "T1"})
    monkeypatch.setattr(log, "read_batch", _no_read)  # no GET of the batch just written
    assert lives._previous_ids(log, 1) == {"t": "T1"}
    other = ManifestLog(LocalStore(str(tmp_path / "other")), "", Layout(), "job")
    Manifests(other.store, "", Layout(), "job").write(0, files=[], offsets={}, topic_ids={"t": "X"})
    assert lives._previous_ids(other, 1) == {"t": "X"}  # not in this process's heads: read


def _no_read(batch_id):
    raise AssertionError(f"batch {batch_id} read again")


def test_the_commit_check_keeps_one_admin_client_per_configuration():
    from blockgz.sink.kafka import lives

    config = {"bootstrap.servers": "127.0.0.1:9"}
    first = lives.shared_admin(config)
    assert lives.shared_admin(dict(config)) is first  # not one per batch
    assert lives.shared_admin({"bootstrap.servers": "127.0.0.1:10"}) is not first
    assert len(lives._ADMIN) == 1  # the one before is let go
