"""Snapshots of the source cluster as the export commits: topic configs and consumer groups.

Every ``blockgz.snapshot.interval`` (after a batch commits; at most one at a time, on a thread
of its own so the export never waits for it) the driver asks Kafka's admin API for the archived
topics' partition counts and the configs set on them (``DescribeConfigs``), the consumer groups
whose names match ``blockgz.snapshot.groups`` (``ListGroups``) and their committed offsets on
the archived topics (``OffsetFetch``, one request per group), and writes them with the archive's
committed offsets as one :class:`~blockgz.commits.cluster_snapshots.ClusterSnapshot` (one PUT).

A snapshot that fails is a warning, never a failed export: the records are what must not be
lost; the next interval tries again. What it costs is logged with each snapshot (``snapshot``
events) and bounded by the interval: ``2 + groups`` admin requests and one PUT. What the
principal may not read (topic configs without DESCRIBE_CONFIGS, groups without DESCRIBE) is left
out and named in the snapshot's ``missing`` lines and in one warning, so the rest is still kept.

Example (with a broker)::

    snapper = Snapshotter(job, snapshots)
    snapper.after_commit({"orders": {0: 1200}})  # starts one in the background when due
    snapper.close()
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from blockgz.archive.partition_offsets import Offsets
from blockgz.commits.cluster_snapshots import ClusterSnapshot, Snapshots, TopicState
from blockgz.sink.export.kafka_clients import DriverClients
from blockgz.sink.jobconfig.events import event

log = logging.getLogger("blockgz.export")

_TIMEOUT_S = 15.0


def read_cluster(
    admin: Any, topics: Iterable[str], groups: re.Pattern[str], *, timeout_s: float = _TIMEOUT_S
) -> tuple[dict[str, TopicState], dict[str, Offsets], list[str]]:
    """The topics' partition counts and set configs, the matching groups' committed offsets on
    them (from a confluent-kafka ``AdminClient``), and what could not be read, one line each:
    a principal without DESCRIBE_CONFIGS on a topic or DESCRIBE on the groups still gets a
    snapshot of the rest."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    missing: list[str] = []
    wanted = sorted(set(topics))
    meta = admin.list_topics(timeout=timeout_s)
    present = [t for t in wanted if t in meta.topics and meta.topics[t].error is None]
    missing += [f"topic {t}: not in the cluster's metadata" for t in wanted if t not in present]
    states = {t: TopicState(len(meta.topics[t].partitions)) for t in present}
    if present:
        asked = admin.describe_configs(
            [ConfigResource(ResourceType.TOPIC, t) for t in present], request_timeout=timeout_s
        )
        for resource, future in asked.items():
            try:
                entries = future.result(timeout=timeout_s)
            except Exception as exc:  # KafkaException: e.g. TOPIC_AUTHORIZATION_FAILED
                missing.append(f"configs of topic {resource.name}: {_reason(exc)}")
                continue
            configs = {  # set on the topic itself, not inherited from the broker's settings
                name: entry.value
                for name, entry in entries.items()
                if getattr(entry.source, "value", entry.source)
                == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
                and not entry.is_sensitive
                and entry.value is not None
            }
            topic = resource.name
            states[topic] = TopicState(states[topic].partitions, configs)
    offsets: dict[str, Offsets] = {}
    try:
        listed = admin.list_consumer_groups(request_timeout=timeout_s).result(timeout=timeout_s)
    except Exception as exc:
        missing.append(f"consumer groups: {_reason(exc)}")
        return states, offsets, missing
    missing += [f"consumer groups: {_reason(e)}" for e in listed.errors or []]
    ids = sorted(g.group_id for g in listed.valid if groups.fullmatch(g.group_id))
    asked_offsets = {
        gid: admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(gid)], request_timeout=timeout_s
        )[gid]
        for gid in ids
    }
    for gid, future in asked_offsets.items():
        try:
            found = future.result(timeout=timeout_s).topic_partitions or []
        except Exception as exc:  # GROUP_AUTHORIZATION_FAILED
            missing.append(f"offsets of consumer group {gid}: {_reason(exc)}")
            continue
        for tp in found:
            if tp.topic in states and tp.offset >= 0 and tp.error is None:
                offsets.setdefault(gid, {}).setdefault(tp.topic, {})[tp.partition] = tp.offset
    return states, offsets, missing


def _reason(exc: BaseException) -> str:
    """The Kafka error's name (``TOPIC_AUTHORIZATION_FAILED``) or the exception's text."""
    error = exc.args[0] if exc.args else None
    name = getattr(error, "name", None)
    return name() if callable(name) else str(exc)


class Snapshotter:
    """Takes the job's snapshots when due, one at a time, in the background."""

    def __init__(
        self,
        client_config: Mapping[str, Any],
        snapshots: Snapshots,
        *,
        topics: Iterable[str],
        interval_s: float,
        groups: re.Pattern[str],
        clock=time.time,
        clients: DriverClients | None = None,
    ):
        self.client_config = dict(client_config)
        #: Whose admin client the snapshots use (the driver's shared one, when given).
        self._clients = clients or DriverClients(self.client_config)
        self._own_clients = clients is None
        self.snapshots = snapshots
        self.topics = set(topics)
        self.interval_s = interval_s
        self.groups = groups
        self.clock = clock
        self._last = float("-inf")
        self._thread: threading.Thread | None = None
        self._missing: tuple[str, ...] = ()
        #: How many were written, and how long the last took (seconds), for tests and logs.
        self.written = 0
        self.last_seconds: float | None = None

    def after_commit(self, archived: Offsets) -> bool:
        """Start a snapshot if one is due and none is running; return whether one started."""
        now = self.clock()
        if now - self._last < self.interval_s or self.running:
            return False
        self._last = now
        copy = {t: dict(parts) for t, parts in archived.items()}
        self._thread = threading.Thread(
            target=self._take_logged, args=(copy,), name="blockgz-snapshot", daemon=True
        )
        self._thread.start()
        return True

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def take(self, archived: Offsets) -> str:
        """Take and write one snapshot now; return its key."""
        admin = self._clients.admin().client  # librdkafka's log kept off the terminal
        started = time.monotonic()
        at_ms = int(self.clock() * 1000)
        topics, groups, missing = read_cluster(admin, self.topics | set(archived), self.groups)
        snapshot = ClusterSnapshot(at_ms, topics, groups, archived, tuple(missing))
        key = self.snapshots.write(snapshot)
        if missing and tuple(missing) != self._missing:  # once, not every interval
            log.warning(
                "snapshot without %s (a restore will say so; grant DESCRIBE_CONFIGS on the "
                "topics and DESCRIBE on the groups to the export's principal)",
                "; ".join(missing),
            )
        self._missing = tuple(missing)
        self.last_seconds = time.monotonic() - started
        self.written += 1
        log.info(
            "snapshot of %d topics and %d consumer groups in %.0f ms: %s",
            len(topics),
            len(groups),
            self.last_seconds * 1000,
            key,
            extra=event(
                "snapshot", key=key, topics=len(topics), groups=len(groups),
                ms=round(self.last_seconds * 1000),
            ),
        )  # fmt: skip
        return key

    def _take_logged(self, archived: Offsets) -> None:
        try:
            self.take(archived)
        except Exception as exc:  # the records matter more: warn, try again next interval
            log.warning("snapshot of the source cluster failed (retried next interval): %s", exc)

    def close(self, timeout_s: float = _TIMEOUT_S * 2) -> None:
        """Wait for a running snapshot to finish."""
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._own_clients:
            self._clients.close()
