"""What the export checks of its topics at every start, preflight or not: each topic it names
is there and readable by its principal, and each is still the life the archive holds.

One ``DescribeTopics`` request answers both: the principal's authorized operations on each
topic, and each topic's id. A topic the principal may not DESCRIBE or READ refuses in one line
naming it and the permission (without it the source would silently skip the topic and the run
end "done" without it). A topic whose id differs from the one the archive last recorded was
deleted and recreated: :func:`blockgz.sink.kafka.lives.check_start` refuses. The ids found are
what the run holds to at each commit (:func:`blockgz.sink.kafka.lives.check_commit`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from blockgz.errors import PreflightError
from blockgz.kafka.access import TopicFacts, describe_topics, grant_hint, principal
from blockgz.sink.jobconfig.config import ExportSettings
from blockgz.sink.kafka.lives import (
    COMMIT_CHECK,
    DESCRIBE_TIMEOUT_S,
    IDS_OPTION,
    KAFKA_PREFIX,
    check_start,
)
from blockgz.sink.write.options import COMMIT_CHECK as COMMIT_CHECK_OPTION
from blockgz.sink.write.options import COMMIT_CHECK_PREFIX

if TYPE_CHECKING:
    from blockgz.sink.export.kafka_clients import DriverClients

log = logging.getLogger("blockgz.export")


def check_topics(job: ExportSettings, clients: DriverClients, *, once: bool) -> dict[str, str]:
    """Refuse a topic the job cannot read (:class:`PreflightError`) or one recreated since the
    archive recorded it (:class:`~blockgz.errors.TopicRecreatedError`); return the topic ids
    the run holds to."""
    from blockgz.sink.export.preflight import kafka_topics, reads

    admin = clients.admin()
    # One line naming the setting when no broker answers (or refuses the credentials).
    topics = set(job.topics) | {t for t in kafka_topics(job, admin) if reads(job, t)}
    facts = describe_topics(admin.client, topics, timeout_s=DESCRIBE_TIMEOUT_S)
    refusal = unreadable(job, facts, principal(admin.config), once=once)
    if refusal is not None:
        raise PreflightError(refusal)
    live = {topic: f.topic_id for topic, f in facts.items()}
    return check_start(job.sink.manifest_log(), live)


def unreadable(
    job: ExportSettings, facts: Mapping[str, TopicFacts], who: str, *, once: bool
) -> str | None:
    """The one line refusing the first topic ``who`` may not DESCRIBE or READ (or, with
    ``once``, a named topic that does not exist), or ``None``.

    >>> job = ExportSettings.from_mapping({"name": "j", "topics": "a,b", "path": "/tmp/x",
    ...                                  "kafka.bootstrap.servers": "k:9092"})
    >>> facts = {"a": TopicFacts("id", frozenset({"READ"})), "b": TopicFacts("i2", frozenset())}
    >>> unreadable(job, facts, "User:u", once=True)  # doctest: +ELLIPSIS
    'topics=a,b: User:u may not READ topic b at k:9092, so it would not be archived; grant ...'
    """
    servers = job.source.bootstrap_servers
    named = f"topics={','.join(job.topics)}" if job.topics else "topics"
    for topic, f in sorted(facts.items()):
        missing = None
        if f.error_name == "TOPIC_AUTHORIZATION_FAILED":
            missing = "DESCRIBE"
        elif f.error_name == "UNKNOWN_TOPIC_OR_PART":
            if once and topic in job.topics:
                return f"{named}: no such topic {topic} at {servers}"
            continue  # a running job picks it up when it appears
        elif f.operations is not None and not {"READ", "ALL"} & f.operations:
            missing = "READ"
        if missing is not None:
            return (
                f"{named}: {who} may not {missing} topic {topic} at {servers}, so it would not "
                f"be archived; grant it READ ({grant_hint(who, 'READ', topic)})"
            )
    return None


def commit_check_options(client_config: Mapping[str, Any], topic_ids: Mapping[str, str]) -> dict:
    """The sink options that make its driver run
    :func:`~blockgz.sink.kafka.lives.check_commit` before each manifest."""
    options = {
        COMMIT_CHECK_OPTION: COMMIT_CHECK,
        COMMIT_CHECK_PREFIX + IDS_OPTION: json.dumps(dict(topic_ids)),
    }
    for key, value in client_config.items():
        if isinstance(value, (str, int, float, bool)):
            options[COMMIT_CHECK_PREFIX + KAFKA_PREFIX + key] = str(value)
    return options
