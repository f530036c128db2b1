"""The restore's target topics: created as the source had them, or checked to fit.

A missing target topic is created with the source's partition count and the configs set on the
source topic (retention, ``cleanup.policy``, compression, ...), as the snapshot at or before the
point in time recorded them (:mod:`blockgz.reader.restore.planning`); only configs the snapshot saw
set on the topic itself are given, so the target broker's own defaults stay the defaults. An
existing target must have at least the source's partitions (unless ``--by-key``); otherwise the
restore is refused in one line saying what differs.

A replay (:mod:`blockgz.reader.restore.send`) creates nothing: its one target topic must exist,
must not be the archived topic itself unless asked, must have each source partition's number
(unless ``--by-key``), and must be writable (and readable, for the resume markers) by the
principal: :func:`refuse_same_topic`, :func:`target_partitions`,
:func:`check_partition_numbers`, :func:`check_target_access`.

>>> check_existing("orders", "orders_r", 2, 3, by_key=False)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
blockgz.errors.RestoreError: topic 'orders_r' exists with 2 partitions; 'orders' had 3, ...
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from blockgz.errors import ConfigError, ReplayError, RestoreError

_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class TargetTopic:
    """What the restore found or did for one target topic."""

    name: str
    partitions: int
    created: bool
    configs: Mapping[str, str]


def check_existing(source: str, target: str, partitions: int, needed: int, *, by_key: bool) -> None:
    """Refuse an existing target with fewer partitions than the source had (``needed``: the
    snapshot's count, else the highest archived partition + 1): one to one, each record keeps
    its partition, and keyed producers on the target must find the same partitioning."""
    if by_key or partitions >= needed:
        return
    raise RestoreError(
        f"topic {target!r} exists with {partitions} partitions; {source!r} had {needed}, "
        f"restored one to one: give the target {needed} or more partitions, restore into a new "
        "topic (--rename), or pass --by-key"
    )


def existing_topics(admin: Any, bootstrap: str) -> dict[str, int]:
    """``topic -> partition count`` of the target cluster (one metadata request)."""
    try:
        metadata = admin.list_topics(timeout=15)  # all topics: asking for one may create it
    except Exception as exc:  # KafkaException: the brokers cannot be reached
        raise ReplayError(f"cannot reach Kafka at {bootstrap}: {exc}") from exc
    return {
        name: len(t.partitions)
        for name, t in metadata.topics.items()
        if t.error is None and t.partitions
    }


def ensure_topics(admin: Any, plan, bootstrap: str) -> list[TargetTopic]:
    """Create the plan's missing target topics (and wait until they serve), check the others;
    return what was found or created, in the plan's order."""
    from confluent_kafka.admin import NewTopic

    existing = existing_topics(admin, bootstrap)
    out: list[TargetTopic] = []
    to_create = []
    for topic in plan.topics:
        if topic.target in existing:
            check_existing(
                topic.source, topic.target, existing[topic.target], topic.partition_count,
                by_key=plan.request.by_key,
            )  # fmt: skip
            out.append(TargetTopic(topic.target, existing[topic.target], False, {}))
            continue
        configs = dict(topic.state.configs) if topic.state is not None else {}
        to_create.append(NewTopic(topic.target, topic.partition_count, config=configs))
        out.append(TargetTopic(topic.target, topic.partition_count, True, configs))
    if to_create:
        futures = admin.create_topics(to_create, request_timeout=_TIMEOUT_S)
        for name, future in futures.items():
            try:
                future.result(timeout=_TIMEOUT_S)
            except Exception as exc:  # KafkaException: a config the broker refuses, an ACL
                error = exc.args[0] if exc.args else exc
                if getattr(error, "name", lambda: "")() == "TOPIC_ALREADY_EXISTS":
                    continue  # created meanwhile (a rerun racing another): checked below
                raise RestoreError(f"cannot create topic {name!r}: {_text(error)}") from exc
        _wait_served(admin, [t.name for t in out if t.created], bootstrap)
    return out


#: librdkafka's default ``batch.size`` and its upper bound of ``message.max.bytes``.
_LIBRDKAFKA_BATCH = 1_000_000
_LIBRDKAFKA_MAX = 1_000_000_000


def message_limits(admin: Any, topics: list[str], bootstrap: str) -> dict[str, int]:
    """``max.message.bytes`` of each of ``topics`` as the brokers apply it (the topic's own,
    else the broker's default): the largest record batch each takes. One request."""
    from confluent_kafka.admin import ConfigResource, ResourceType

    if not topics:
        return {}
    asked = [ConfigResource(ResourceType.TOPIC, name) for name in topics]
    limits = {}
    try:
        futures = admin.describe_configs(asked, request_timeout=_TIMEOUT_S)
        for resource, future in futures.items():
            entry = future.result(timeout=_TIMEOUT_S).get("max.message.bytes")
            if entry is not None and entry.value is not None:
                limits[resource.name] = int(entry.value)
    except Exception as exc:  # KafkaException: no DescribeConfigs ACL, a broker gone
        raise RestoreError(
            f"cannot read max.message.bytes of {', '.join(topics)} at {bootstrap} to size the "
            f"producer ({_text(exc.args[0] if exc.args else exc)}); set -O "
            "kafka.message.max.bytes=<the topics' max.message.bytes> to skip asking"
        ) from exc
    return limits


def sized_producer(producer: Mapping[str, Any], limit: int | None) -> dict[str, Any]:
    """The producer's settings for a topic taking record batches up to ``limit`` bytes:
    ``message.max.bytes`` the limit (librdkafka's default, 1,000,000, would refuse a larger
    record the topic takes), ``batch.size`` no more than it; settings given are kept.

    >>> sized_producer({"bootstrap.servers": "b:9092"}, 5_242_880)
    {'bootstrap.servers': 'b:9092', 'message.max.bytes': 5242880}
    >>> sized_producer({}, 500_000)
    {'message.max.bytes': 500000, 'batch.size': 500000}
    >>> sized_producer({"message.max.bytes": "2000000"}, 5_242_880)
    {'message.max.bytes': '2000000'}
    """
    out = dict(producer)
    if limit is None or "message.max.bytes" in out:
        return out
    out["message.max.bytes"] = max(1000, min(limit, _LIBRDKAFKA_MAX))
    if limit < _LIBRDKAFKA_BATCH and "batch.size" not in out:
        out["batch.size"] = out["message.max.bytes"]
    return out


def _text(error: Any) -> str:
    text = getattr(error, "str", None)
    return text() if callable(text) else str(error)


def _wait_served(admin: Any, topics: list[str], bootstrap: str) -> None:
    """Wait until every partition of ``topics`` has a leader whose offsets can be listed (a new
    topic's leaders answer a moment after the metadata names them)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    deadline = time.monotonic() + _TIMEOUT_S
    pending = list(topics)
    while pending:
        metadata = admin.list_topics(timeout=15)
        ready = []
        for name in pending:
            found = metadata.topics.get(name)
            if found is None or found.error is not None or not found.partitions:
                continue
            if any(p.leader < 0 or p.error is not None for p in found.partitions.values()):
                continue
            asked = admin.list_offsets(
                {TopicPartition(name, p): OffsetSpec.latest() for p in found.partitions},
                request_timeout=15,
            )
            try:
                for future in asked.values():
                    future.result()
            except Exception:  # NOT_LEADER_OR_FOLLOWER while the leader settles
                continue
            ready.append(name)
        pending = [t for t in pending if t not in ready]
        if pending and time.monotonic() > deadline:
            raise ReplayError(
                f"topics {pending} created at {bootstrap} have no serving leaders after "
                f"{_TIMEOUT_S:.0f} s"
            )
        if pending:
            time.sleep(0.05)  # polling the broker, bounded by the deadline


def refuse_same_topic(topic: str, to_topic: str, *, allow: bool) -> None:
    """A replay into the archived topic itself appends a second copy: refused unless ``allow``.

    >>> refuse_same_topic("orders", "orders_r", allow=False)
    """
    if to_topic == topic and not allow:
        raise ConfigError(
            f"--to-topic {to_topic!r} is the topic the archive holds; replaying into "
            "it would append a second copy of its records (pass --allow-same-topic if that is "
            "what you want)"
        )


def check_partition_numbers(
    topic: str, to_topic: str, sources: Iterable[int], targets: int
) -> None:
    """Partition to partition: every source partition needs one of its number in the target."""
    missing = [p for p in sources if p >= targets]
    if missing:
        raise ConfigError(
            f"topic {to_topic!r} has {targets} partitions; partitions {missing} of "
            f"{topic!r} have no partition of the same number there (create it with "
            "more partitions, or pass --by-key to spread records by key)"
        )


def target_partitions(admin: Any, config: Mapping[str, Any], topic: str) -> int:
    """The replay's target topic's partition count; it must exist (a replay creates none)."""
    bootstrap = str(config.get("bootstrap.servers"))
    count = existing_topics(admin, bootstrap).get(topic)
    if not count:
        raise ConfigError(
            f"topic {topic!r} does not exist at {bootstrap}; create it "
            "first (blockgz replay does not create topics: their settings are yours to choose)"
        )
    return count


def check_target_access(admin: Any, config: Mapping[str, Any], topic: str, *, mark: bool) -> None:
    """The principal may WRITE the target topic, and READ it when the resume markers are read
    back; a :class:`ReplayError` in one line naming the missing ACL."""
    from blockgz.kafka.access import grant_hint, missing_operation, principal

    needed = ["WRITE", "READ"] if mark else ["WRITE"]
    denied = missing_operation(admin, [topic], needed, timeout_s=15)
    if denied is not None:
        who, operation = principal(config), denied[1]
        why = " (a rerun reads its resume markers back; --no-marker needs WRITE only)"
        raise ReplayError(
            f"--to-topic {topic}: {who} may not {operation} it"
            f"{why if operation == 'READ' else ''}; grant it {operation} "
            f"({grant_hint(who, operation, topic)})"
        )
