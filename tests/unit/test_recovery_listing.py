"""find_uncommitted over many partitions (issue 44): one listing of the topic, when that is
cheaper than two per partition, finds exactly what the partitions' own listings find."""

from __future__ import annotations

import pytest

from blockgz.archive.layout import Layout
from blockgz.commits import recovery
from blockgz.commits.manifests import Manifests
from blockgz.commits.recovery import find_uncommitted
from blockgz.store import LocalStore
from blockgz.written.files import WrittenFile

PARTITIONS = 40


def _archive(tmp_path) -> tuple[Manifests, dict[str, dict[int, int]]]:
    """Committed objects below offset 10 in every partition, and uncommitted ones around it:
    at and after it, hidden timestamps files, sidecars, a misplaced object, another topic's."""
    store = LocalStore(str(tmp_path))
    manifests = Manifests(store, "", Layout(), "job")
    files, offsets = [], {"t": {}}
    for p in range(PARTITIONS):
        d = f"topics/t/partition={p}/"
        key = f"{d}t+{p}+0000000000.json"
        store.put(key, b"{}")
        files.append(WrittenFile(key, "t", p, f"partition={p}", 0, 9, 10, 2, 2))
        offsets["t"][p] = 0 if p == 7 else 10
        store.put(f"{d}t+{p}+0000000010.json", b"{}")  # uncommitted
        store.put(f"{d}.t+{p}+0000000010.timestamps.json", b"[]")
        store.put(f"{d}.t+{p}+0000000012.json.index.json", b"{}")
        store.put(f"{d}t+{p}+0000000005.json", b"{}")  # below the commit: not listed
    store.put("topics/t/partition=3/t+4+0000000020.json", b"{}")  # in another's directory
    store.put("topics/t/partition=3/.t+4+0000000020.timestamps.json", b"[]")
    store.put("topics/t/partition=99/t+99+0000000020.json", b"{}")  # not asked about
    store.put("topics/t/elsewhere/t+1+0000000030.json", b"{}")  # not a partition directory
    manifests.write(0, files=files, offsets=offsets)
    return manifests, offsets


@pytest.mark.parametrize("partitions", [PARTITIONS, 3])
def test_one_listing_finds_what_the_partition_listings_find(tmp_path, monkeypatch, partitions):
    manifests, offsets = _archive(tmp_path)
    asked = {"t": {p: n for p, n in offsets["t"].items() if p < partitions}}
    monkeypatch.setattr(recovery, "_one_listing_cheaper", lambda *_: False)
    each = find_uncommitted(manifests, asked, partition_directories=True)
    monkeypatch.setattr(recovery, "_one_listing_cheaper", lambda *_: True)
    once = find_uncommitted(manifests, asked, partition_directories=True)
    assert [i.key for i in once] == [i.key for i in each]
    misplaced = "topics/t/partition=3/t+4+0000000020.json" in {i.key for i in each}
    assert misplaced == (partitions > 4)
    assert len(each) >= 3 * partitions


def test_many_partitions_with_a_short_history_are_listed_once(tmp_path):
    manifests, offsets = _archive(tmp_path)
    before = manifests.store.requests.lists
    found = find_uncommitted(manifests, offsets, partition_directories=True)
    assert manifests.store.requests.lists - before <= 3  # the catalog's, and one of the topic
    assert len(found) == 3 * PARTITIONS + 2 + 1  # partition 7 from 0 on: its object too
