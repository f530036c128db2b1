"""Consumer groups put back where they stood: the plan's translated offsets set on the target.

Each :class:`~blockgz.reader.restore.planning.GroupOffset` names a group's committed source offset;
the restore places it on the target (``placed``): at the target offset its transactions
recorded for it (:mod:`blockgz.reader.restore.positions`), or on a target restored with markers
from the records read back (:mod:`blockgz.reader.restore.group_markers`), or, given a partition's
``bases``, at the base plus the records counted before it; then it commits the result for the
group with the admin API (``AlterConsumerGroupOffsets``).

Kafka only lets a group's offsets be changed while the group has no members, and a running
consumer would not see them anyway: a group that is active on the target is left alone and
named in the result, and so is one that has other offsets of its own there (its consumers ran
on the target after an earlier restore: setting them again would rewind it). Setting the same
offsets again (a rerun) is harmless.

>>> from blockgz.reader.restore.planning import GroupOffset
>>> grouped = by_group([GroupOffset("g", "t", 0, 7, "t2", 5), GroupOffset("g", "t", 1, 3, "t2", 3)])
>>> [(o.partition, o.target_offset) for o in grouped["g"]]
[(0, 5), (1, 3)]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

_TIMEOUT_S = 15.0
#: Group states in which the offsets may be set (``DEAD``: the group does not exist there).
_SETTABLE = ("EMPTY", "DEAD", "UNKNOWN")


@dataclass
class GroupsResult:
    """``set``: group -> ``{(target topic, partition): offset}`` committed; ``skipped``:
    group -> why not."""

    set: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def by_group(offsets: Iterable[Any]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for offset in offsets:
        grouped.setdefault(offset.group, []).append(offset)
    return grouped


def set_group_offsets(
    admin: Any,
    offsets: Iterable[Any],
    bases: Mapping[tuple[str, int], int],
    placed: Mapping[tuple[str, str], dict[int, int] | str] | None = None,
) -> GroupsResult:
    """Commit each group's translated offsets on the target (``bases``: the known start of
    each target partition; ``placed``: ``(group, target topic) ->`` the offset per target
    partition found from the markers, or why none is exact; a partition in neither is
    skipped)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    result = GroupsResult()
    grouped = by_group(offsets)
    if not grouped:
        return result
    states = _states(admin, list(grouped))
    for group, entries in grouped.items():
        state = states.get(group, "UNKNOWN")
        if state not in _SETTABLE:
            result.skipped[group] = f"the group is {state.lower()} on the target (members joined)"
            continue
        wanted, why = _wanted(group, entries, bases, placed or {})
        if why is not None:
            result.skipped[group] = why
            continue
        current = _committed(admin, group, list(wanted))
        moved = sorted(tp for tp, o in current.items() if o >= 0 and o != wanted[tp])
        if moved:  # e.g. consumers ran on the target since a first restore: never rewind them
            t, p = moved[0]
            result.skipped[group] = (
                f"it has offsets of its own on the target ({t}[{p}] at {current[moved[0]]}, "
                f"the restore's is {wanted[moved[0]]}); left alone (delete them with "
                "kafka-consumer-groups --delete-offsets to have them set)"
            )
            continue
        request = ConsumerGroupTopicPartitions(
            group, [TopicPartition(t, p, o) for (t, p), o in sorted(wanted.items())]
        )
        future = admin.alter_consumer_group_offsets([request], request_timeout=_TIMEOUT_S)[group]
        try:
            future.result(timeout=_TIMEOUT_S)
        except Exception as exc:  # KafkaException: GROUP_AUTHORIZATION_FAILED, members joined
            result.skipped[group] = _reason(exc)
            continue
        result.set[group] = wanted
    return result


def _wanted(
    group: str,
    entries: list[Any],
    bases: Mapping[tuple[str, int], int],
    placed: Mapping[tuple[str, str], dict[int, int] | str],
) -> tuple[dict[tuple[str, int], int], str | None]:
    """The group's offsets on the target, or why they cannot be set."""
    wanted: dict[tuple[str, int], int] = {}
    for e in entries:
        found = placed.get((group, e.target))
        if isinstance(found, str):
            return {}, found
        if found is not None:
            wanted.update(((e.target, p), o) for p, o in found.items())
        elif (e.target, e.partition) in bases:
            wanted[(e.target, e.partition)] = bases[(e.target, e.partition)] + e.target_offset
        else:
            return {}, f"{e.target}[{e.partition}]: no start of the restored records is known"
    return wanted, None


def _committed(admin: Any, group: str, partitions: list[tuple[str, int]]) -> dict:
    """The group's committed offsets on ``partitions`` on the target (-1: none)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p) for t, p in partitions])
    future = admin.list_consumer_group_offsets([request], request_timeout=_TIMEOUT_S)[group]
    try:
        found = future.result(timeout=_TIMEOUT_S).topic_partitions or []
    except Exception:  # GROUP_ID_NOT_FOUND and the like: no offsets there
        return {}
    return {(tp.topic, tp.partition): tp.offset for tp in found if tp.error is None}


def _states(admin: Any, groups: list[str]) -> dict[str, str]:
    """Each group's state on the target (``DEAD``: none there)."""
    futures = admin.describe_consumer_groups(groups, request_timeout=_TIMEOUT_S)
    states = {}
    for group, future in futures.items():
        try:
            described = future.result(timeout=_TIMEOUT_S)
        except Exception:  # GROUP_ID_NOT_FOUND on some brokers: no such group
            states[group] = "DEAD"
            continue
        state = described.state
        states[group] = getattr(state, "name", str(state)).upper()
        if described.members:
            states[group] = states[group] if states[group] not in _SETTABLE else "STABLE"
    return states


def _reason(exc: BaseException) -> str:
    error = exc.args[0] if exc.args else None
    text = getattr(error, "str", None)
    return text() if callable(text) else str(exc)
