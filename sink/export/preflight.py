"""Checks run before Spark starts (and at every start of the job), each failing in one line.

Within a few seconds: the bucket exists and takes a write under the export's prefix (a small
object written and deleted again; on S3 each permission the export needs is tried once, and the
one refused is named), the Kafka brokers answer, and every named topic exists
(``topics.regex`` matching nothing is an error with ``--once``, a warning for a running job,
which picks topics up as they appear), and the schema registry of an AvroConverter answers
with the credentials given. ``blockgz.preflight=false`` skips them where a probe is not
allowed. :func:`check_other_jobs` (another job archiving the same topics in the same layout)
runs at every start, preflight or not.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from typing import TYPE_CHECKING

from blockgz.errors import BlockGzError, PreflightError
from blockgz.kafka.access import (
    QuietAdmin,
    connection_failure,
    grant_hint,
    missing_operation,
    principal,
    quiet_admin,
)
from blockgz.sink.jobconfig.config import ExportSettings

if TYPE_CHECKING:
    from blockgz.sink.export.kafka_clients import DriverClients

log = logging.getLogger("blockgz.export")

#: How long the brokers get to answer a metadata request.
KAFKA_TIMEOUT_S = 5.0


def preflight(job: ExportSettings, *, once: bool, clients: DriverClients | None = None) -> None:
    """Raise :class:`PreflightError` naming the setting, what was tried and what came back
    (Kafka asked with ``clients``' admin client when given: the run's shared one)."""
    check_store(job)
    check_kafka(job, once=once, admin=clients.admin() if clients is not None else None)
    check_registry(job)
    ensure_dead_letter_topic(job)


def check_other_jobs(job: ExportSettings) -> None:
    """Refuse, in one line, when another job's manifests under the same prefix and key layout
    commit offsets of topics this job archives: two jobs would each write every record, and
    readers of the layout would see both. ``blockgz.share.topics=true`` allows it.

    Costs a listing of the manifest directory and, per other job there, a look at its
    catalog and newest manifests
    (:meth:`~blockgz.commits.manifest_log.ManifestLog.committed_offsets`).

    >>> import tempfile
    >>> from blockgz.archive.layout import Layout
    >>> from blockgz.commits.manifest_log import ManifestLog
    >>> from blockgz.store import LocalStore
    >>> root = tempfile.mkdtemp()
    >>> log = ManifestLog(LocalStore(root), "", Layout(), "a")
    >>> _ = log.write(0, files=[], offsets={"t": {0: 5}})
    >>> job = {"name": "b", "topics": "t", "kafka.bootstrap.servers": "k:9092", "path": root}
    >>> check_other_jobs(ExportSettings.from_mapping(job))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    blockgz.errors.PreflightError: name=b: job 'a' already archives t under topics/ ...
    >>> check_other_jobs(ExportSettings.from_mapping({**job, "blockgz.share.topics": "true"}))
    """
    from blockgz.commits.manifest_log import ManifestLog
    from blockgz.commits.manifests import find_exports

    if job.share_topics:
        return
    layout = job.sink.layout
    store, prefix = job.sink.make_store()
    try:
        others = [
            found
            for found in find_exports(store, prefix, manifest_dir=layout.manifest_dir)
            if found.name != job.name and _same_keys(found.layout, layout)
        ]
        for other in others:
            committed = ManifestLog(store, prefix, other.layout, other.name).committed_offsets()
            shared = sorted(t for t, parts in committed.items() if _archives(job, t, parts))
            if shared:
                raise PreflightError(
                    f"name={job.name}: job {other.name!r} already archives "
                    f"{', '.join(shared)} under {layout.topic_prefix(prefix) or '/'} "
                    f"({store.url(layout.job_prefix(prefix, other.name))}); to continue that "
                    f"archive run with name={other.name}, or give this job its own topics.dir, "
                    "or set blockgz.share.topics=true to archive the records a second time"
                )
    finally:
        store.close()


def _same_keys(a, b) -> bool:
    """Whether two layouts give the same data keys (same directory, delimiters, padding)."""
    return (a.topics_dir, a.directory_delim, a.file_delim, a.offset_pad_width) == (
        b.topics_dir,
        b.directory_delim,
        b.file_delim,
        b.offset_pad_width,
    )


def _archives(job: ExportSettings, topic: str, partitions) -> bool:
    """Whether ``job`` reads any of ``partitions`` of ``topic`` (all of a named topic or one
    matching its regex; the assigned ones under ``assign``)."""
    source = job.source
    if source.strategy == "subscribe":
        return topic in source.topics
    if source.strategy == "assign":
        return any(t == topic and p in partitions for t, p in source.assigned)
    return re.fullmatch(source.pattern or "", topic) is not None


def ensure_dead_letter_topic(job: ExportSettings) -> None:
    """Create ``errors.deadletterqueue.topic.name`` when missing, as Kafka Connect does
    (one partition, ``errors.deadletterqueue.topic.replication.factor`` replicas)."""
    settings = job.sink.dead_letters
    if not settings.enabled or not settings.topic:
        return
    # The dead-letter producer's own settings (producer.override.* may name another principal).
    admin = quiet_admin(settings.producer)
    who = principal(admin.config)
    name = f"errors.deadletterqueue.topic.name={settings.topic}"
    if settings.topic not in kafka_topics(job, admin):
        _create_dead_letter_topic(admin, settings, name, who)
    denied = missing_operation(admin, [settings.topic], ["WRITE"], timeout_s=KAFKA_TIMEOUT_S)
    if denied is not None:
        raise PreflightError(
            f"{name}: {who} may not {denied[1]} it; grant it WRITE "
            f"({grant_hint(who, 'WRITE', settings.topic)})"
        )


def _create_dead_letter_topic(admin: QuietAdmin, settings, name: str, who: str) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    topic = NewTopic(settings.topic, 1, settings.replication_factor)
    try:
        admin.client.create_topics([topic], request_timeout=KAFKA_TIMEOUT_S)[settings.topic].result(
            KAFKA_TIMEOUT_S * 2
        )
    except KafkaException as exc:
        error = exc.args[0] if exc.args else exc
        code = getattr(error, "name", lambda: "")()
        if code in ("TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"):
            raise PreflightError(
                f"{name}: the topic does not exist and {who} may not CREATE it; create it, or "
                f"grant CREATE ({grant_hint(who, 'CREATE', settings.topic)})"
            ) from None
        if code != "TOPIC_ALREADY_EXISTS":
            raise PreflightError(
                f"{name}: cannot create it ({getattr(error, 'str', lambda: error)()}); "
                "create it, or grant the job CREATE on it"
            ) from None
    log.info("created the dead-letter topic %s", settings.topic)


def check_registry(job: ExportSettings) -> None:
    """An AvroConverter's registry answers ``GET /config`` (reachable, credentials accepted)."""
    settings = job.sink.value_converter.registry
    if settings is None:
        return
    from confluent_kafka.schema_registry import SchemaRegistryClient

    config = {**settings.client_config(), "max.retries": 0, "timeout": KAFKA_TIMEOUT_S}
    try:
        SchemaRegistryClient(config).get_compatibility()
    except Exception as exc:  # connection refused, 401, timeouts: all one line
        status = getattr(exc, "http_status_code", None)
        why = (
            "the credentials were refused (value.converter.basic.auth.user.info)"
            if status in (401, 403)
            else f"{type(exc).__name__}: {getattr(exc, 'error_message', None) or exc}"
        )
        raise PreflightError(
            f"value.converter.schema.registry.url={settings.url}: the schema registry did not "
            f"answer ({why})"
        ) from exc


def check_store(job: ExportSettings) -> None:
    """Write and delete a small object where the job writes its manifests; on S3, probe each
    permission the export needs (:mod:`blockgz.store.permissions`) and name the one refused."""
    from blockgz.store.s3 import S3Store

    store, prefix = job.sink.make_store()
    job_dir = job.sink.layout.job_prefix(prefix, job.name)
    settings = job.sink.target.s3
    setting = (
        f"s3.bucket.name={settings.bucket}"
        if settings is not None
        else f"path={job.sink.target_url}"
    )
    try:
        if isinstance(store, S3Store):
            _probe_s3(store, job_dir, setting)
        else:
            key = f"{job_dir}preflight-{secrets.token_hex(4)}"  # beside the manifests
            store.put(key, b"")
            store.delete(key)
    except PreflightError:
        raise
    except (BlockGzError, OSError) as exc:
        raise PreflightError(
            f"{_tls_setting(settings, exc) or setting}: cannot write a test object ({exc})"
        ) from exc
    finally:
        store.close()


def _probe_s3(store, job_dir: str, setting: str) -> None:
    from blockgz.store.permissions import (
        MissingPermissionError,
        export_permissions,
        probe_export_permissions,
    )

    tagging = store.settings.object_tagging
    try:
        probe_export_permissions(store, job_dir, tagging=tagging)
    except MissingPermissionError as exc:
        needed = ", ".join(p.action for p in export_permissions(tagging=tagging))
        raise PreflightError(
            f"{setting}: the credentials lack {exc.permission.action} on "
            f"{store.url(job_dir)} ({exc.__cause__}); the export needs {needed} "
            "(docs: Security → S3)"
        ) from exc


def _tls_setting(settings, exc: Exception) -> str | None:
    """The setting to name when a TLS certificate was refused: the CA bundle given, or the
    endpoint."""
    if settings is None or "TLS certificate" not in str(exc):
        return None
    if settings.ca_bundle:
        return f"s3.ssl.ca.bundle={settings.ca_bundle}"
    return f"store.url={settings.endpoint_url}" if settings.endpoint_url else None


def check_kafka(job: ExportSettings, *, once: bool, admin: QuietAdmin | None = None) -> None:
    """The brokers answer a metadata request, the job's topics exist, and the job's principal
    may READ them."""
    admin = admin or quiet_admin(job.source.client_config())
    topics = kafka_topics(job, admin)
    source = job.source
    who = principal(admin.config)
    if source.strategy == "subscribe":
        missing = sorted(set(source.topics) - set(topics))
        if missing:
            hidden = " (or it exists and {who} may not DESCRIBE it)" if _secured(admin) else ""
            raise PreflightError(
                f"topics={','.join(source.topics)}: no such topic {', '.join(missing)} at "
                f"{source.bootstrap_servers}{hidden.format(who=who)} "
                f"(existing: {_some(topics)})"
            )
    elif source.strategy == "assign":
        absent = sorted(f"{t}-{p}" for t, p in source.assigned if p not in topics.get(t, ()))
        if absent:
            raise PreflightError(
                f"assign: no such partition {', '.join(absent)} at {source.bootstrap_servers}"
            )
    else:
        pattern = re.compile(source.pattern or "")
        if not any(pattern.fullmatch(t) for t in topics if not t.startswith("__")):
            message = (
                f"topics.regex={source.pattern}: matches no topic at {source.bootstrap_servers}"
                f" (existing: {_some(topics)})"
            )
            if once:
                raise PreflightError(message)
            log.warning("%s; the job picks matching topics up when they appear", message)
    read = [t for t in topics if reads(job, t)]
    denied = missing_operation(admin, read, ["READ"], timeout_s=KAFKA_TIMEOUT_S)
    if denied is not None:
        topic, operation = denied
        raise PreflightError(
            f"topics: {who} may not {operation} topic {topic} at {source.bootstrap_servers}; "
            f"grant it READ ({grant_hint(who, 'READ', topic)})"
        )


def reads(job: ExportSettings, topic: str) -> bool:
    """Whether the job reads ``topic`` (named, assigned, or matching its regex)."""
    source = job.source
    if source.strategy == "subscribe":
        return topic in source.topics
    if source.strategy == "assign":
        return any(t == topic for t, _ in source.assigned)
    return not topic.startswith("__") and re.fullmatch(source.pattern or "", topic) is not None


def _secured(admin: QuietAdmin) -> bool:
    return str(admin.config.get("security.protocol", "PLAINTEXT")).upper() != "PLAINTEXT"


def kafka_topics(job: ExportSettings, admin: QuietAdmin | None = None) -> dict[str, list[int]]:
    """Topic name -> partitions (those the principal may see), from one metadata request with
    a short deadline; a :class:`PreflightError` in one line when no broker answers, naming
    the setting to fix when the brokers refused the connection (credentials, mechanism, CA,
    host name)."""
    from confluent_kafka import KafkaException

    admin = admin or quiet_admin(job.source.client_config())
    deadline = time.monotonic() + KAFKA_TIMEOUT_S
    while True:
        # Asked in short slices: librdkafka retries a refused connection for ever, and says
        # why (credentials, TLS) only through its error callback, served in between.
        try:
            metadata = admin.client.list_topics(timeout=min(1.0, KAFKA_TIMEOUT_S))
            break
        except KafkaException as exc:
            refused = connection_failure(admin.config, admin.served())
            if refused is not None:
                raise PreflightError(refused) from None
            if time.monotonic() < deadline:
                continue
            error = exc.args[0] if exc.args else exc
            why = error.str() if hasattr(error, "str") else str(error)
            raise PreflightError(
                f"kafka.bootstrap.servers={job.source.bootstrap_servers}: no broker answered "
                f"within {KAFKA_TIMEOUT_S:.0f} s ({why})"
            ) from None
    return {
        name: sorted(topic.partitions)
        for name, topic in metadata.topics.items()
        if topic.error is None
    }


def _some(topics: dict[str, list[int]], limit: int = 8) -> str:
    names = sorted(t for t in topics if not t.startswith("__"))
    if not names:
        return "none"
    shown = ", ".join(names[:limit])
    return shown + (f", ... ({len(names) - limit} more)" if len(names) > limit else "")
