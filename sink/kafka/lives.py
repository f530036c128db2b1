"""A topic's lives: a topic deleted and recreated under its name is a new topic to Kafka (a new
topic id, offsets from 0 again), and an archive must never mix the two.

Every batch manifest records each topic's Kafka topic id
(:attr:`~blockgz.commits.manifests.Manifest.topic_ids`). ``blockgz export`` compares the live
ids with the last recorded ones when it starts (:func:`check_start`) and, through the sink's
commit check (:func:`check_commit`, named by :data:`COMMIT_CHECK`), before each batch's
manifest; a different id refuses in one line (:class:`~blockgz.errors.TopicRecreatedError`):
the batch is aborted (its objects removed) and nothing of the new life is committed beside the
old. A manifest without ids (written before blockgz recorded them) says nothing: an id not
recorded is never a reason to refuse; it is recorded from then on.

>>> print(refusal("t", "OLD", "NEW", "s3://b/_blockgz/j/"))  # doctest: +ELLIPSIS
topic t was deleted and recreated: its topic id is now NEW, but the archive ...
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from blockgz.commits.catalog import Catalog
from blockgz.commits.head import recent_manifest
from blockgz.commits.manifests import Manifests
from blockgz.errors import ObjectNotFoundError, TopicRecreatedError

log = logging.getLogger("blockgz.export")

#: The sink's commit check (``blockgz.commit.check``) that ``blockgz export`` sets, and the
#: options it is given (``blockgz.commit.check.*``, prefix removed): the topic ids the run
#: started with, as JSON, and the Kafka client settings (``kafka.*``) to ask the live ones.
COMMIT_CHECK = "blockgz.sink.kafka.lives:check_commit"
IDS_OPTION = "topic.ids"
KAFKA_PREFIX = "kafka."
#: How long the broker gets to describe the topics.
DESCRIBE_TIMEOUT_S = 15.0


def refusal(topic: str, recorded: str, live: str, archive: str) -> str:
    """The one line that refuses to write a topic's new life beside its old one."""
    return (
        f"topic {topic} was deleted and recreated: its topic id is now {live}, but the archive "
        f"{archive} holds the life with id {recorded} (offsets start again at 0, so the two "
        f"would mix); nothing of the new life was written. {CHOICES}"
    )


#: What the user can do about a recreated topic (the end of both refusals).
CHOICES = (
    "Either archive the new life apart (another topics.dir and name, and a new checkpoint), "
    "or delete the old archive (its objects and the job's _blockgz directory) and start again "
    "with a new checkpoint; blockgz never resumes across two lives"
)


def source_refusal(topic: str, started: str, live: str) -> str:
    """The one line that stops a running query whose topic was recreated under its name."""
    return (
        f"topic {topic} was deleted and recreated while the export ran: its topic id is now "
        f"{live}, not {started} (offsets start again at 0, so the two lives would mix); the "
        f"batch was not committed. {CHOICES}"
    )


def recorded_topic_ids(manifests: Manifests) -> dict[str, str]:
    """Per topic, the id the newest committed manifest that names it recorded (the catalog's
    :attr:`~blockgz.commits.catalog.CatalogView.lives`; under a root written before roots kept
    them, the last manifest that root folded in). Topics none records are unknown (left out)."""
    view = Catalog(manifests).view()
    found = {topic: ids[-1] for topic, ids in view.lives.items() if ids}
    if view.root is not None and not view.root.lives:
        with contextlib.suppress(ObjectNotFoundError):  # gone: its ids are unknown
            for topic, topic_id in manifests.read(view.root.through).topic_ids.items():
                found.setdefault(topic, topic_id)
    return found


def changed_life(
    recorded: Mapping[str, str], live: Mapping[str, str | None]
) -> tuple[str, str, str] | None:
    """``(topic, recorded id, live id)`` of the first topic whose live id differs from the
    recorded one; ``None`` when none does (an id unknown on either side never differs).

    >>> changed_life({"a": "x", "b": "y"}, {"a": "x", "b": "z", "c": "w"})
    ('b', 'y', 'z')
    >>> changed_life({"a": "x"}, {"a": None}) is None
    True
    """
    for topic in sorted(live):
        now, then = live[topic], recorded.get(topic)
        if now and then and now != then:
            return topic, then, now
    return None


def live_topic_ids(client: Any, topics: Iterable[str]) -> dict[str, str | None]:
    """Per topic, its id now (``None`` when the broker does not say: gone, or not visible)."""
    from blockgz.kafka.access import describe_topics

    facts = describe_topics(client, topics, timeout_s=DESCRIBE_TIMEOUT_S, operations=False)
    return {topic: f.topic_id for topic, f in facts.items()}


def check_start(manifests: Manifests, live: Mapping[str, str | None]) -> dict[str, str]:
    """Refuse (:class:`TopicRecreatedError`) when a topic's live id differs from the one the
    archive last recorded; return the live ids known, which the run then holds to."""
    recorded = recorded_topic_ids(manifests)
    changed = changed_life(recorded, live)
    if changed is not None:
        where = manifests.store.url(manifests.layout.job_prefix(manifests.prefix, manifests.name))
        raise TopicRecreatedError(refusal(*changed, where))
    return {topic: topic_id for topic, topic_id in sorted(live.items()) if topic_id}


def check_commit(
    options: Mapping[str, str], manifests: Manifests, batch_id: int | str, topics: Iterable[str]
) -> dict[str, str]:
    """The sink's commit check: before batch ``batch_id``'s manifest, the live ids of the run's
    topics and of the batch's ``topics`` against those the run started with and the previous
    batch recorded. A different id refuses (:class:`TopicRecreatedError`, and the batch is
    aborted); the ids to record in the manifest are returned."""
    started = {str(t): str(i) for t, i in json.loads(options.get(IDS_OPTION) or "{}").items()}
    expected = {**_previous_ids(manifests, batch_id), **started}
    client_config: dict[str, str | int | float | bool] = {
        key[len(KAFKA_PREFIX) :]: value
        for key, value in options.items()
        if key.startswith(KAFKA_PREFIX)
    }
    live = live_topic_ids(shared_admin(client_config), set(started) | set(topics))
    changed = changed_life(expected, live)
    if changed is not None:
        where = manifests.store.url(manifests.layout.job_prefix(manifests.prefix, manifests.name))
        raise TopicRecreatedError(refusal(*changed, where))
    return {**expected, **{t: i for t, i in live.items() if i}}


def _previous_ids(manifests: Manifests, batch_id: int | str) -> dict[str, str]:
    """The ids the previous batch of this checkpoint recorded (``{}`` for the first)."""
    try:
        previous = int(batch_id) - 1
    except ValueError:
        return {}
    if previous < 0:
        return {}
    # This process wrote it into the job's head a batch ago, most often: no GET then.
    manifest = recent_manifest(manifests, manifests.key(previous)) or manifests.read_batch(previous)
    return dict(manifest.topic_ids) if manifest is not None else {}


#: The commit check's admin client for the process's life, by its Kafka client configuration
#: (one kept: another configuration replaces it, and the old one goes with its last reference;
#: confluent-kafka's has no close). Made per batch it cost ~13 ms of connecting and metadata.
_ADMIN: dict[str, Any] = {}


def shared_admin(client_config: Mapping[str, Any]) -> Any:
    """The process's admin client for ``client_config`` (librdkafka's: thread-safe, it
    reconnects by itself), shared by the commit check and the source's planning. Its log is
    off: kept between batches, it would otherwise print its reconnects to a broker gone for
    good on stderr; a failed describe still raises."""
    from confluent_kafka.admin import AdminClient

    key = json.dumps(client_config, sort_keys=True, default=str)
    if key not in _ADMIN:
        _ADMIN.clear()
        _ADMIN[key] = AdminClient({**client_config, "log_level": 0})
    return _ADMIN[key]
