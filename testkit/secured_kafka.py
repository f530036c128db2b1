"""Apache Kafka with SASL/SCRAM over TLS and ACLs, as production clusters run it, on loopback.

:class:`SecuredKafka` is an :class:`~blockgz.local_servers.apache_kafka.ApacheKafka` node with
two more listeners, both ``SASL_SSL`` with the ``SCRAM-SHA-512`` mechanism:

* ``SECURE`` (:attr:`~SecuredKafka.secure_bootstrap`): a server certificate for ``localhost``
  and ``127.0.0.1``, from the fixture's own :class:`~testkit.throwaway_ca.TestCA`
  (the client trusts :attr:`~SecuredKafka.ca_file`);
* ``OTHERNAME`` (:attr:`~SecuredKafka.misnamed_bootstrap`): a certificate of the same CA for
  ``localhost`` only, reached at ``127.0.0.1``: what a client that checks the broker's
  host name refuses.

The broker's keystore is a PEM file (``ssl.keystore.type=PEM``). The node runs the
StandardAuthorizer; ``User:admin`` (a SCRAM user made when the log directory is formatted,
``StorageTool format --add-scram``) and ``User:ANONYMOUS`` (the PLAINTEXT listener, which
the inherited helpers use to create topics and produce) are super users. Test principals are
added with :meth:`~SecuredKafka.add_user` (SCRAM credentials and ACLs through the admin API).

Example::

    with SecuredKafka() as kafka:
        kafka.create_topic("t")
        kafka.add_user("reader", "pw", read=["t"], groups=["g"])
        config = kafka.sasl_config("reader", "pw")  # librdkafka settings for SECURE
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from blockgz.local_servers.apache_kafka import ApacheKafka
from testkit.throwaway_ca import TestCA

MECHANISM = "SCRAM-SHA-512"
ADMIN_USER = "admin"
ADMIN_PASSWORD = "admin-secret"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class SecuredKafka(ApacheKafka):
    """A one-node Apache Kafka with SASL_SSL listeners, a test CA and ACLs (see the module)."""

    extra_port_count = 2

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ca = TestCA("blockgz test Kafka CA")

    @staticmethod
    def unavailable_reason() -> str | None:
        """Why no broker can start here (no Java, no confluent-kafka, no cryptography)."""
        try:
            import cryptography  # noqa: F401
        except ImportError:
            return "cryptography is not installed (the [local] extra): it makes the test CA"
        return ApacheKafka.unavailable_reason()

    # -- where clients connect --------------------------------------------------------------------
    @property
    def secure_bootstrap(self) -> str:
        """``127.0.0.1:PORT`` of the SASL_SSL listener whose certificate names that address."""
        return f"{self.host}:{self.extra_ports[0]}"

    @property
    def misnamed_bootstrap(self) -> str:
        """``127.0.0.1:PORT`` of the SASL_SSL listener whose certificate names only
        ``localhost``."""
        return f"{self.host}:{self.extra_ports[1]}"

    @property
    def ca_file(self) -> Path:
        """The test CA's certificate (PEM): a client's ``ssl.ca.location``."""
        assert self.home is not None, "SecuredKafka is not started"
        return self.home / "tls" / "ca.pem"

    def sasl_config(
        self, user: str, password: str, *, bootstrap: str | None = None
    ) -> dict[str, str]:
        """librdkafka settings for ``user`` on the SECURE listener (or ``bootstrap``)."""
        return {
            "bootstrap.servers": bootstrap or self.secure_bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": MECHANISM,
            "sasl.username": user,
            "sasl.password": password,
            "ssl.ca.location": str(self.ca_file),
        }

    # -- the node's settings ----------------------------------------------------------------------
    def _listener_settings(self) -> dict[str, str]:
        assert self.home is not None
        secure, misnamed = self.extra_ports
        tls = self.home / "tls"
        tls.mkdir(exist_ok=True)
        self.ca.write_ca(tls / "ca.pem")
        self.ca.write_server_pem(tls / "secure.pem", ["localhost", self.host])
        self.ca.write_server_pem(tls / "othername.pem", ["localhost"])
        plain = super()._listener_settings()
        settings = {
            "listeners": f"{plain['listeners']},SECURE://{self.host}:{secure},"
            f"OTHERNAME://{self.host}:{misnamed}",
            "advertised.listeners": f"{plain['advertised.listeners']},"
            f"SECURE://{self.host}:{secure},OTHERNAME://{self.host}:{misnamed}",
            "listener.security.protocol.map": plain["listener.security.protocol.map"]
            + ",SECURE:SASL_SSL,OTHERNAME:SASL_SSL",
            "sasl.enabled.mechanisms": MECHANISM,
            "authorizer.class.name": _AUTHORIZER,
            "super.users": f"User:{ADMIN_USER};User:ANONYMOUS",
            "allow.everyone.if.no.acl.found": "false",
        }
        for listener, pem in (("secure", "secure.pem"), ("othername", "othername.pem")):
            prefix = f"listener.name.{listener}."
            settings[f"{prefix}{MECHANISM.lower()}.sasl.jaas.config"] = _SCRAM_MODULE
            settings[f"{prefix}ssl.keystore.type"] = "PEM"
            settings[f"{prefix}ssl.keystore.location"] = str(tls / pem)
        return settings

    def _format_arguments(self) -> list[str]:
        return ["--add-scram", f"{MECHANISM}=[name={ADMIN_USER},password={ADMIN_PASSWORD}]"]

    # -- principals and ACLs ----------------------------------------------------------------------
    def add_user(
        self,
        name: str,
        password: str,
        *,
        read: Iterable[str] = (),
        describe: Iterable[str] = (),
        write: Iterable[str] = (),
        create: Iterable[str] = (),
        groups: Iterable[str] = (),
        group_prefixes: Iterable[str] = (),
        timeout_s: float = 30.0,
    ) -> None:
        """A SCRAM user ``name`` allowed exactly what is named: READ (which implies DESCRIBE)
        on the ``read`` topics, DESCRIBE on ``describe``, WRITE on ``write``, CREATE on the
        ``create`` topics, READ on the consumer ``groups`` (literal) and ``group_prefixes``
        (prefixed). Returns once the user can authenticate and the ACLs hold."""
        from confluent_kafka.admin import (
            AclBinding,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
            ResourceType,
            ScramCredentialInfo,
            ScramMechanism,
            UserScramCredentialUpsertion,
        )

        admin = self.admin()
        upsert = UserScramCredentialUpsertion(
            name, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode()
        )
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=timeout_s)
        principal = f"User:{name}"
        wanted = [
            (ResourceType.TOPIC, topics, pattern, operation)
            for topics, pattern, operation in (
                (read, ResourcePatternType.LITERAL, AclOperation.READ),
                (describe, ResourcePatternType.LITERAL, AclOperation.DESCRIBE),
                (write, ResourcePatternType.LITERAL, AclOperation.WRITE),
                (create, ResourcePatternType.LITERAL, AclOperation.CREATE),
            )
        ] + [
            (ResourceType.GROUP, groups, ResourcePatternType.LITERAL, AclOperation.READ),
            (ResourceType.GROUP, group_prefixes, ResourcePatternType.PREFIXED, AclOperation.READ),
        ]
        bindings = [
            AclBinding(kind, resource, pattern, principal, "*", operation, AclPermissionType.ALLOW)
            for kind, names, pattern, operation in wanted
            for resource in names
        ]
        if bindings:
            for future in admin.create_acls(bindings).values():
                future.result(timeout=timeout_s)
        self._wait_until_usable(name, password, timeout_s)

    def _wait_until_usable(self, name: str, password: str, timeout_s: float) -> None:
        """Poll (with a deadline) until ``name`` authenticates: credentials and ACLs reach the
        broker through the metadata log a moment after the admin calls return."""
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        client = AdminClient({**self.sasl_config(name, password), "logger": _quiet()})
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                client.list_topics(timeout=2)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.1)  # poll interval; the deadline bounds the wait

    def admin_config(self) -> Mapping[str, str]:
        """librdkafka settings of the super user on the SECURE listener."""
        return self.sasl_config(ADMIN_USER, ADMIN_PASSWORD)


def _quiet():
    import logging

    quiet = logging.getLogger("testkit.secured_kafka.librdkafka")
    quiet.propagate = False
    if not quiet.handlers:
        quiet.addHandler(logging.NullHandler())
    return quiet
