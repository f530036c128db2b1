"""Where a group resumes on a target restored with markers (``reader/restore/group_markers.py``):
just
after the restored records it had consumed, per target partition, or a reason when no single
offset is exact."""

from __future__ import annotations

from blockgz.reader.restore.group_markers import Restored, place_group


def test_one_to_one_skips_records_of_its_own_and_other_partitions():
    restored = {
        0: [Restored(2, 0, 0), Restored(3, 0, 3), Restored(4, 0, 4), Restored(5, 0, 8)],
        1: [Restored(0, 1, 0)],
        2: [],
    }
    ends = {0: 9, 1: 1, 2: 4}  # 0: offsets 6-8 are records written after the restore
    # the group's offsets: 0 -> before offset 4's record; 1: all consumed; 2: nothing restored
    assert place_group(restored, ends, {0: 4, 1: 7, 2: 3}, by_key=False) == {0: 4, 1: 1, 2: 4}
    assert place_group(restored, ends, {0: 0}, by_key=False) == {0: 2}  # the first restored


def test_one_to_one_refuses_records_out_of_source_order():
    restored = {0: [Restored(0, 0, 5), Restored(1, 0, 2), Restored(2, 0, 9)]}
    why = place_group(restored, {0: 3}, {0: 4}, by_key=False, target="t")
    assert isinstance(why, str) and why.startswith("t[0]: the restored records are not in")


def test_by_key_places_every_target_partition_when_the_consumed_records_come_first():
    restored = {
        0: [Restored(0, 0, 1), Restored(1, 0, 4), Restored(2, 1, 0), Restored(3, 1, 6)],
        1: [Restored(0, 0, 2), Restored(1, 1, 3)],
        2: [],
    }
    ends = {0: 4, 1: 2, 2: 0}
    # partition 0 consumed whole, partition 1 up to offset 3: a prefix everywhere
    assert place_group(restored, ends, {0: 99, 1: 3}, by_key=True) == {0: 3, 1: 1, 2: 0}
    # no offset on partition 1: nothing of it consumed, which comes after partition 0's
    assert place_group(restored, ends, {0: 99}, by_key=True) == {0: 2, 1: 1, 2: 0}
    why = place_group(restored, ends, {0: 2, 1: 3}, by_key=True, target="t")
    assert isinstance(why, str)
    assert why.startswith("t[0]: source partition 0's offset 4, which the group had not")
