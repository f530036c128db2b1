"""What a Kafka principal may do, and why a connection failed, each said in one line.

librdkafka retries a failed connection for ever and reports why only through its error
callback; a metadata request then just times out. :func:`quiet_admin` makes an admin client
that keeps those errors (and logs nothing to the terminal), and :func:`connection_failure`
turns them into one line naming the setting to fix: the credentials, the SASL mechanism, the
CA, or the broker's host name (librdkafka says "certificate verify failed" for both of the
last two; Python's :mod:`ssl` then tells them apart). :func:`topic_operations` asks the
broker what the principal may do on each topic (``DescribeTopics`` with authorized
operations), so a missing ACL is found before anything runs, not in a task an hour later.

>>> principal({"sasl.username": "archiver"}), principal({})
('User:archiver', 'the principal of these settings')
"""

from __future__ import annotations

import base64
import logging
import socket
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("blockgz.kafka")

#: How long the TLS probe of a failed connection may take.
PROBE_TIMEOUT_S = 3.0
#: OpenSSL's verify codes for a certificate that is not for the host connected to.
_NAME_MISMATCH = {62, 64}  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH


def principal(settings: Mapping[str, Any]) -> str:
    """``User:<name>`` of SASL settings, as ACLs name it."""
    user = settings.get("sasl.username")
    return f"User:{user}" if user else "the principal of these settings"


class QuietAdmin:
    """An ``AdminClient`` whose librdkafka log goes nowhere and whose errors are kept
    (:attr:`errors`, read after :meth:`served`)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        from confluent_kafka.admin import AdminClient

        # librdkafka's connection chatter, served by poll(): kept from the terminal (a
        # logger without handlers would fall back to logging's last-resort stderr handler)
        quiet = logging.getLogger("blockgz.kafka.librdkafka")
        quiet.propagate = False
        if not quiet.handlers:
            quiet.addHandler(logging.NullHandler())
        self.errors: list[Any] = []
        self.config = dict(config)
        # Any values: librdkafka's client takes a logger and callbacks beside its text
        # settings, which confluent-kafka's stubs leave out.
        settings: dict[str, Any] = {**self.config, "logger": quiet, "error_cb": self.errors.append}
        self.client = AdminClient(settings)

    def served(self) -> list[Any]:
        """The errors librdkafka reported so far (serving its queue first)."""
        self.client.poll(0)
        return self.errors


def quiet_admin(config: Mapping[str, Any]) -> QuietAdmin:
    """A :class:`QuietAdmin` for librdkafka ``config``."""
    return QuietAdmin(config)


def connection_failure(
    config: Mapping[str, Any], errors: Iterable[Any], *, where: str = "kafka."
) -> str | None:
    """One line saying which setting made the brokers refuse the connection, from librdkafka's
    reported ``errors`` (``KafkaError``); ``None`` when none says (the brokers are down).

    >>> from types import SimpleNamespace as E
    >>> bad = E(name=lambda: "_AUTHENTICATION", str=lambda: "SASL authentication error: "
    ...         "Authentication failed ... invalid credentials with SASL mechanism SCRAM-SHA-512")
    >>> connection_failure({"sasl.username": "u", "sasl.mechanism": "SCRAM-SHA-512"}, [bad])
    ... # doctest: +ELLIPSIS
    'kafka.sasl.username/kafka.sasl.password (or sasl.jaas.config): the broker refused ...'
    """
    errors = list(errors)
    auth = [e for e in errors if e.name() == "_AUTHENTICATION"]
    tls = [e for e in errors if e.name() == "_SSL"]
    if auth:
        text = auth[0].str()
        if "invalid credentials" in text:
            return (
                f"{where}sasl.username/{where}sasl.password (or sasl.jaas.config): the broker "
                f"refused the credentials of {principal(config)} "
                f"({config.get('sasl.mechanism', 'GSSAPI')})"
            )
        if "mechanism" in text.lower():
            return f"{where}sasl.mechanism={config.get('sasl.mechanism')}: {_tail(text)}"
        return f"{where}sasl.*: {_tail(text)}"
    if tls:
        return _tls_failure(config, _tail(tls[0].str()), where)
    return None


def _tail(text: str) -> str:
    """librdkafka's message without its ``sasl_ssl://host:port/bootstrap:`` prefix."""
    _, sep, rest = text.partition("/bootstrap: ")
    return rest if sep else text


def _tls_failure(config: Mapping[str, Any], text: str, where: str) -> str:
    """Why the TLS handshake failed, asked again of Python's ssl (which tells a certificate of
    another CA from one for another host)."""
    server = str(config.get("bootstrap.servers", "")).split(",")[0].strip()
    host, _, port = server.rpartition(":")
    check_name = str(config.get("ssl.endpoint.identification.algorithm", "https")) != "none"
    try:
        context = ssl.create_default_context(
            cafile=config.get("ssl.ca.location"), cadata=config.get("ssl.ca.pem")
        )
        context.check_hostname = check_name
        with (
            socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S) as raw,
            context.wrap_socket(raw, server_hostname=host),
        ):
            pass
    except ssl.SSLCertVerificationError as exc:
        if exc.verify_code in _NAME_MISMATCH:
            return (
                f"{where}ssl.endpoint.identification.algorithm=https: the certificate of {server} "
                f"is not for {host} ({exc.verify_message.rstrip('.')}; it names "
                f"{_names(host, int(port))}); connect by one of those names"
            )
        return (
            f"{where}ssl.ca.location (or ssl.truststore.location): the certificate of {server} "
            f"is not signed by a CA given there ({exc.verify_message})"
        )
    except (OSError, ValueError) as exc:
        log.debug("TLS probe of %s failed", server, exc_info=True)
        return f"{where}ssl.*: TLS to {server} failed: {text} ({exc})"
    return f"{where}ssl.*: TLS to {server} failed: {text}"


def _names(host: str, port: int) -> str:
    """The names the server's certificate holds (read without verifying it)."""
    try:
        from cryptography import x509

        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        with (
            socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S) as raw,
            context.wrap_socket(raw) as tls,
        ):
            der = tls.getpeercert(binary_form=True)
        if der is None:  # the server sent no certificate
            return "other names"
        cert = x509.load_der_x509_certificate(der)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        return ", ".join(str(n.value) for n in names)
    except Exception:  # any failure: the message goes without the names
        return "other names"


@dataclass(frozen=True)
class TopicFacts:
    """What the broker said of one topic: its id (as Kafka prints it), the operations the
    principal may do on it (``None`` when the broker does not say: no authorizer), or the
    ``KafkaError`` it answered instead (then the other two are ``None``)."""

    topic_id: str | None = None
    operations: frozenset[str] | None = None
    error: Any = None

    @property
    def error_name(self) -> str:
        """The error's name (``TOPIC_AUTHORIZATION_FAILED``, ...), or ``""``."""
        return getattr(self.error, "name", lambda: "")() if self.error is not None else ""


def kafka_topic_id(uuid: Any) -> str | None:
    """A topic id as Kafka prints it (``kafka-topics --describe``: URL-safe base64, no padding);
    librdkafka's own text uses the standard alphabet. ``None`` for none, or Kafka's zero id
    (a broker that keeps no topic ids).

    >>> from confluent_kafka import Uuid
    >>> kafka_topic_id(Uuid(-1, -1)), kafka_topic_id(Uuid(0, 0))
    ('_____________________w', None)
    """
    if uuid is None:
        return None
    bits = [uuid.get_most_significant_bits(), uuid.get_least_significant_bits()]
    if bits == [0, 0]:
        return None
    raw = b"".join((b % (1 << 64)).to_bytes(8, "big") for b in bits)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def describe_topics(
    client: Any, topics: Iterable[str], *, timeout_s: float, operations: bool = True
) -> dict[str, TopicFacts]:
    """Per topic, :class:`TopicFacts` from one ``DescribeTopics`` request of admin ``client``
    (with the authorized operations when ``operations``). ``TOPIC_AUTHORIZATION_FAILED``
    also answers a topic that does not exist: Kafka does not tell a principal that may not
    see it."""
    from confluent_kafka import KafkaException, TopicCollection

    names = sorted(set(topics))
    if not names:
        return {}
    futures = client.describe_topics(
        TopicCollection(names),
        include_authorized_operations=operations,
        request_timeout=timeout_s,
    )
    found: dict[str, TopicFacts] = {}
    for name, future in futures.items():
        try:
            described = future.result(timeout=timeout_s * 2)
        except KafkaException as exc:
            found[name] = TopicFacts(error=exc.args[0] if exc.args else exc)
            continue
        ops = described.authorized_operations if operations else None
        found[name] = TopicFacts(
            topic_id=kafka_topic_id(described.topic_id),
            operations=None if ops is None else frozenset(op.name for op in ops),
        )
    return found


def topic_operations(
    admin: QuietAdmin, topics: Iterable[str], *, timeout_s: float
) -> dict[str, set[str] | Any | None]:
    """Per topic, the operations the principal may do (``{"READ", "DESCRIBE", ...}``),
    ``None`` when the broker does not say (no authorizer), or the ``KafkaError`` it answered
    (:func:`describe_topics`)."""
    return {
        name: facts.error
        if facts.error is not None
        else None
        if facts.operations is None
        else set(facts.operations)
        for name, facts in describe_topics(admin.client, topics, timeout_s=timeout_s).items()
    }


def missing_operation(
    admin: QuietAdmin,
    topics: Iterable[str],
    operations: Iterable[str],
    *,
    timeout_s: float,
) -> tuple[str, str] | None:
    """``(topic, operation)`` of the first topic the principal may not do an operation on
    (``DESCRIBE`` when it may not even see the topic), or ``None`` when it may do all."""
    wanted = list(operations)
    for topic, ops in sorted(topic_operations(admin, topics, timeout_s=timeout_s).items()):
        if ops is None:
            continue
        if not isinstance(ops, set):
            if getattr(ops, "name", lambda: "")() == "TOPIC_AUTHORIZATION_FAILED":
                return topic, "DESCRIBE"
            continue  # another error (the topic is gone): the caller's own checks say
        for operation in wanted:
            # ALL grants every operation; READ and WRITE each imply DESCRIBE.
            if operation not in ops and "ALL" not in ops:
                return topic, operation
    return None


def grant_hint(who: str, operation: str, topic: str) -> str:
    """The ``kafka-acls`` command that grants ``operation`` on ``topic``.

    >>> grant_hint("User:u", "READ", "t")
    'kafka-acls --add --allow-principal User:u --operation Read --topic t'
    """
    return (
        f"kafka-acls --add --allow-principal {who} --operation {operation.capitalize()} "
        f"--topic {topic}"
    )


__all__ = [
    "QuietAdmin",
    "TopicFacts",
    "connection_failure",
    "describe_topics",
    "grant_hint",
    "kafka_topic_id",
    "missing_operation",
    "principal",
    "quiet_admin",
    "topic_operations",
]
