"""How a sink task's ranges are grouped to be read with one consumer (issue 44)."""

from __future__ import annotations

from blockgz.sink.kafka.ranges import TOGETHER_OFFSETS, Range, together


def test_small_ranges_form_one_group_up_to_the_offsets_bound():
    parts = [Range("t", p, 10, 13) for p in range(1000)]
    assert together(parts) == [parts]
    groups = together(parts, offsets=300)
    assert [len(g) for g in groups] == [100] * 10
    assert [r for g in groups for r in g] == parts  # order kept, nothing lost


def test_a_big_range_is_read_alone():
    big = Range("t", 1, 0, TOGETHER_OFFSETS + 1)
    parts = [Range("t", 0, 0, 5), big, Range("t", 2, 0, 5)]
    assert together(parts) == [[parts[0]], [big], [parts[2]]]


def test_a_topic_partition_is_never_twice_in_a_group():
    parts = [Range("t", 0, 0, 5), Range("u", 0, 0, 5), Range("t", 0, 5, 9)]
    assert together(parts) == [parts[:2], parts[2:]]


def test_no_ranges_no_groups():
    assert together([]) == []
