"""Write-ahead intents: a restart finds an uncommitted batch's objects without listing the topic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from blockgz.commits.catalog import Catalog
from blockgz.errors import CorruptManifestError, OffsetOrderError
from blockgz.reader import open_archive
from blockgz.sink.records import KafkaRecord
from blockgz.sink.write.config import SinkSettings
from blockgz.sink.write.task import write_task
from blockgz.store import LocalStore
from testkit.archives import HOUR, LAYOUTS, T0, export_batches
from testkit.batches import arrow_batches

HISTORY_HOURS = 40


class ListingStore(LocalStore):
    """A real local store that remembers the prefix of every listing."""

    def __init__(self, root):
        super().__init__(root)
        self.listed: list[str] = []

    def list(self, prefix, *, start_after="", limit=None):
        self.listed.append(prefix)
        return super().list(prefix, start_after=start_after, limit=limit)


def history(partitions: int = 2) -> list[KafkaRecord]:
    """Five records an hour for 40 hours, per partition."""
    return [
        KafkaRecord(
            "ev", p, n, T0 + (n // 5) * HOUR, None, b'{"kind": "k%d", "n": %d}' % (n % 3, n)
        )
        for p in range(partitions)
        for n in range(HISTORY_HOURS * 5)
    ]


def late_batch(first: int, partitions: int = 2) -> list[KafkaRecord]:
    """The next batch: one late record for hour 2, the rest in the newest hour and one more."""
    newest = T0 + HISTORY_HOURS * HOUR
    stamps = [T0 + 2 * HOUR] + [newest + n for n in range(4)] + [newest + HOUR]
    return [
        KafkaRecord("ev", p, first + i, stamp, None, b'{"kind": "late", "n": %d}' % (first + i))
        for p in range(partitions)
        for i, stamp in enumerate(stamps)
    ]


def config_for(root: Path) -> SinkSettings:
    return SinkSettings.from_options(
        {"path": str(root), "name": "job", "s3.compression.type": "blockgzip", **LAYOUTS["hourly"],
         "blockgz.catalog.every": "4"}
    )  # fmt: skip


def test_a_restart_lists_the_intents_and_their_directories_not_the_topic(tmp_path):
    committed = history()
    export_batches(str(tmp_path), committed, "hourly", batches=8)
    config = config_for(tmp_path)
    uncommitted = write_task(config, iter(arrow_batches(late_batch(200))))  # dies before commit
    written = {k for f in uncommitted.files for k in (f.key, f.index_key) if k}
    directories = {f.key.rsplit("/", 1)[0] for f in uncommitted.files}
    assert len(directories) == 3  # hour 2 (late), hour 40, hour 41

    store = ListingStore(tmp_path)
    log = config.manifest_log(store, "")
    removed = log.remove_uncommitted({"ev": {0: 200, 1: 200}})

    assert set(removed) == written
    topic_prefix = config.layout.topic_prefix("", "ev")
    data_listings = [p for p in store.listed if p.startswith(topic_prefix)]
    # each directory's objects of each partition, and apart their hidden timestamps files
    listed = [f"{d}/{hidden}ev+{p}+" for d in directories for p in (0, 1) for hidden in ("", ".")]
    assert sorted(data_listings) == sorted(listed)
    intent_listings = [p for p in store.listed if "/intents/" in p]
    assert sorted(intent_listings) == ["_blockgz/job/intents/ev/0/", "_blockgz/job/intents/ev/1/"]
    with open_archive(str(tmp_path)) as archive:  # the committed history is all still there
        for p in (0, 1):
            assert [r.offset for r in archive.seek("ev", p, 0)] == list(range(200))


def test_without_intents_in_the_manifests_the_whole_topic_is_listed(tmp_path):
    """Archives written before intents: their manifests don't say so, the old way is kept."""
    export_batches(str(tmp_path), history(1), "hourly", batches=2, every=1000)
    for manifest in (tmp_path / "_blockgz" / "job" / "manifests").iterdir():
        doc = json.loads(manifest.read_bytes())
        assert doc.pop("intents") is True
        manifest.write_text(json.dumps(doc))
    config = config_for(tmp_path)
    uncommitted = write_task(config, iter(arrow_batches(late_batch(200, 1))))

    store = ListingStore(tmp_path)
    removed = config.manifest_log(store, "").remove_uncommitted({"ev": {0: 200}})

    assert set(removed) == {k for f in uncommitted.files for k in (f.key, f.index_key) if k}
    assert config.layout.topic_prefix("", "ev") in store.listed


def intent_files(root: Path) -> list[Path]:
    return sorted((root / "_blockgz" / "job" / "intents").rglob("*.json"))


def test_compaction_deletes_the_intents_of_committed_batches_only(tmp_path):
    export_batches(str(tmp_path), history(), "hourly", batches=3, every=1000)
    assert len(intent_files(tmp_path)) == 6  # 3 batches x 2 partitions, one hour-run each
    config = config_for(tmp_path)
    write_task(config, iter(arrow_batches(late_batch(200))))  # uncommitted
    assert len(intent_files(tmp_path)) == 8

    Catalog(config.manifest_log()).compact()

    left = intent_files(tmp_path)
    assert len(left) == 2 and all(p.name.startswith("0" * 17 + "200-") for p in left), left


def test_a_failed_task_takes_its_intents_with_its_objects(tmp_path):
    config = config_for(tmp_path)
    records = late_batch(0, 1)
    with pytest.raises(OffsetOrderError):  # after it opened files in three hours
        write_task(config, iter(arrow_batches([*records, records[0]])))
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]


def test_a_restart_with_the_default_partitioner_still_finds_an_hourly_batchs_objects(tmp_path):
    """The partitioner changed between the run that died and the restart: the newest manifest
    says its run recorded intents, so they are used rather than the partition directories."""
    export_batches(str(tmp_path), history(1), "hourly", batches=2, every=1000)
    uncommitted = write_task(config_for(tmp_path), iter(arrow_batches(late_batch(200, 1))))
    restart = SinkSettings.from_options({"path": str(tmp_path), "name": "job"})
    assert not restart.records_intents

    removed = restart.manifest_log().remove_uncommitted(
        {"ev": {0: 200}}, partition_directories=True
    )

    assert set(removed) == {k for f in uncommitted.files for k in (f.key, f.index_key) if k}


def test_an_unreadable_intent_stops_the_restart_with_its_key(tmp_path):
    """Guessing where a dead task wrote could leave its objects behind: refuse instead."""
    export_batches(str(tmp_path), history(1), "hourly", batches=1, every=1000)
    broken = tmp_path / "_blockgz/job/intents/ev/0" / f"{200:020d}-0badc0de.json"
    broken.write_text("{not json")
    with pytest.raises(CorruptManifestError, match=r"intents/ev/0/0+200-0badc0de\.json"):
        config_for(tmp_path).manifest_log().remove_uncommitted({"ev": {0: 200}})
