"""Kafka security settings as users bring them, translated for librdkafka and for Java.

blockgz talks to Kafka through librdkafka (confluent-kafka), whose setting names differ from
the Java client's where security is concerned. Users paste either: librdkafka's names under
``kafka.`` (``kafka.sasl.username``, ``kafka.ssl.ca.location``, ...), or a Kafka Connect
config in the Java client's names (``sasl.jaas.config``, ``ssl.truststore.location``, ...),
at the top level or under ``consumer.override.``/``producer.override.``. This module is the
one place that maps between them:

* :func:`librdkafka_settings`: Java names → librdkafka's (the export's source, preflight,
  tracking, dead-letter producer, ``replay``, ``status``);
* :func:`java_settings`: librdkafka names → Java's (Spark's own Kafka connector);
* :func:`lift_connect_settings`: a Connect config's security settings → ``kafka.*``.

What cannot be translated is refused with a :class:`~blockgz.errors.ConfigError` in one line
naming the librdkafka setting to use instead. Reading a PKCS12 truststore is the one side
effect: its certificates become ``ssl.ca.pem`` (librdkafka reads no PKCS12 truststore).

>>> jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
...         'username="archiver" password="s3cr\\\\"et";')
>>> librdkafka_settings({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
...                      "sasl.jaas.config": jaas, "ssl.endpoint.identification.algorithm": ""})
... # doctest: +NORMALIZE_WHITESPACE
{'security.protocol': 'SASL_SSL', 'sasl.mechanism': 'SCRAM-SHA-512',
 'ssl.endpoint.identification.algorithm': 'none', 'sasl.username': 'archiver',
 'sasl.password': 's3cr"et'}
>>> java_settings({"sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "u",
...                "sasl.password": "p", "ssl.ca.location": "/ca.pem"})
... # doctest: +NORMALIZE_WHITESPACE
{'sasl.mechanism': 'SCRAM-SHA-512',
 'sasl.jaas.config': 'org.apache.kafka.common.security.scram.ScramLoginModule required
                      username="u" password="p";',
 'ssl.truststore.location': '/ca.pem', 'ssl.truststore.type': 'PEM'}
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from blockgz.errors import ConfigError

log = logging.getLogger("blockgz.kafka")

#: ``security.protocol`` values both clients know.
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: ``sasl.mechanism`` values librdkafka knows.
MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
#: Prefixes of the settings that say who connects and how (lifted from a Connect config).
SECURITY_PREFIXES = ("security.", "sasl.", "ssl.")

_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_LOGIN_MODULES = {_SCRAM: "SCRAM", _PLAIN: "PLAIN"}
_JAAS = re.compile(r"^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\b(.*)$", re.S)
_JAAS_OPTION = re.compile(r'\s*([\w.-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;]+)')
_OIDC = (
    "kafka.sasl.oauthbearer.method=oidc with kafka.sasl.oauthbearer.client.id, "
    "kafka.sasl.oauthbearer.client.secret and kafka.sasl.oauthbearer.token.endpoint.url"
)
_KERBEROS = (
    "kafka.sasl.kerberos.keytab, kafka.sasl.kerberos.principal and kafka.sasl.kerberos.service.name"
)
#: Java client settings with no librdkafka counterpart and no say in who may connect (TLS
#: versions and JSSE algorithm choices, login retry timing): left out.
_JAVA_TUNING = frozenset(
    {
        "ssl.protocol",
        "ssl.enabled.protocols",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.secure.random.implementation",
        "ssl.provider",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
        "sasl.login.connect.timeout.ms",
        "sasl.login.read.timeout.ms",
        "sasl.login.retry.backoff.ms",
        "sasl.login.retry.backoff.max.ms",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
    }
)
#: Java settings that name classes to run: librdkafka runs none.
_JAVA_CLASSES = (
    "sasl.login.callback.handler.class",
    "sasl.client.callback.handler.class",
    "sasl.login.class",
    "ssl.engine.factory.class",
)
#: The Java client's security names this module translates, refuses or drops (librdkafka knows
#: none of them): names a ``kafka.*`` setting may have besides librdkafka's own.
JAVA_SECURITY_NAMES = (
    _JAVA_TUNING
    | frozenset(_JAVA_CLASSES)
    | frozenset(
        {
            "sasl.jaas.config",
            "ssl.truststore.location",
            "ssl.truststore.type",
            "ssl.truststore.password",
            "ssl.truststore.certificates",
            "ssl.keystore.type",
            "ssl.keystore.key",
            "ssl.keystore.certificate.chain",
        }
    )
)


def is_security_setting(name: str) -> bool:
    """Whether a client setting says who connects and how (``security.*``, ``sasl.*``,
    ``ssl.*``).

    >>> is_security_setting("sasl.jaas.config"), is_security_setting("acks")
    (True, False)
    """
    return name.startswith(SECURITY_PREFIXES)


def lift_connect_settings(options: Mapping[str, str]) -> dict[str, str]:
    """A job's options with a pasted Connect config's security settings moved under
    ``kafka.``: the top-level ones (a worker's ``security.protocol``, ``sasl.jaas.config``,
    ...) and ``consumer.override.*`` ones. ``kafka.*`` wins over ``consumer.override.*``,
    which wins over the top level. ``producer.override.*`` stays (the dead-letter
    producer's own, see :func:`producer_settings`).

    >>> lift_connect_settings({"security.protocol": "SASL_SSL", "flush.size": "3",
    ...     "consumer.override.sasl.mechanism": "PLAIN", "kafka.sasl.mechanism": "SCRAM-SHA-512"})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'flush.size': '3', 'kafka.sasl.mechanism': 'SCRAM-SHA-512',
     'kafka.security.protocol': 'SASL_SSL'}
    """
    out: dict[str, str] = {}
    lifted: dict[str, str] = {}
    consumer = "consumer.override."
    for key, value in options.items():
        if is_security_setting(key):
            lifted.setdefault(key, value)
        elif key.startswith(consumer) and is_security_setting(key[len(consumer) :]):
            lifted[key[len(consumer) :]] = value
        else:
            out[key] = value
    for name, value in lifted.items():
        out.setdefault(f"kafka.{name}", value)
    return out


def producer_settings(kafka: Mapping[str, str], override: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` settings with the security ones of ``producer.override.*`` over them
    (both without their prefix): the dead-letter producer's, as in Connect.

    >>> producer_settings({"sasl.username": "a", "acks": "1"},
    ...                   {"sasl.username": "b", "batch.size": "9"})
    {'sasl.username': 'b', 'acks': '1'}
    """
    return {**kafka, **{k: v for k, v in override.items() if is_security_setting(k)}}


def librdkafka_settings(settings: Mapping[str, Any], *, where: str = "kafka.") -> dict[str, Any]:
    """``settings`` (client settings, no prefix) with the Java client's security names
    translated into librdkafka's; others pass as they are. ``where`` prefixes the names in
    error messages.

    Raises :class:`ConfigError` in one line for what librdkafka cannot do, naming the setting
    to use instead:

    >>> librdkafka_settings({"ssl.truststore.location": "/t.jks", "ssl.truststore.type": "JKS"})
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    blockgz.errors.ConfigError: kafka.ssl.truststore.type=JKS: librdkafka cannot read Java ...
    >>> librdkafka_settings({"sasl.mechanism": "SCRAM-SHA-1"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    blockgz.errors.ConfigError: kafka.sasl.mechanism=SCRAM-SHA-1: not a SASL mechanism ...
    """
    out: dict[str, Any] = {}
    given = dict(settings)
    for name in _JAVA_CLASSES:
        if name in given:
            raise ConfigError(
                f"{where}{name}: librdkafka runs no Java classes; for OAUTHBEARER set {_OIDC}, "
                f"for Kerberos {_KERBEROS}"
            )
    jaas = given.pop("sasl.jaas.config", None)
    truststore = _truststore(given, where)
    keystore = _keystore(given, where)
    for name, value in given.items():
        if name in _JAVA_TUNING:
            log.debug("%s%s is a Java client setting librdkafka has no use for", where, name)
            continue
        if name == "security.protocol":
            value = _choice(where, name, value, PROTOCOLS)
        elif name == "sasl.mechanism":
            value = _choice(where, name, value, MECHANISMS, what="a SASL mechanism librdkafka")
        elif name == "ssl.endpoint.identification.algorithm":
            value = _endpoint_identification(where, value)
        out[name] = value
    out.update(truststore)
    out.update(keystore)
    if jaas is not None:
        for name, value in _from_jaas(jaas, out.get("sasl.mechanism"), where).items():
            out.setdefault(name, value)
    return out


def java_settings(settings: Mapping[str, Any], *, where: str = "kafka.") -> dict[str, Any]:
    """``settings`` (client settings, no prefix) with librdkafka's security names translated
    into the Java client's, for Spark's Kafka connector; Java names pass as they are.

    >>> java_settings({"ssl.endpoint.identification.algorithm": "none"})
    {'ssl.endpoint.identification.algorithm': ''}
    """
    out = dict(settings)
    username = out.pop("sasl.username", None)
    password = out.pop("sasl.password", None)
    if username is not None and "sasl.jaas.config" not in out:
        mechanism = str(out.get("sasl.mechanism", "")).upper()
        modules = {"SCRAM-SHA-256": _SCRAM, "SCRAM-SHA-512": _SCRAM, "PLAIN": _PLAIN}
        module = modules.get(mechanism, "")
        if not module:
            raise ConfigError(
                f"{where}sasl.username with sasl.mechanism={mechanism or 'GSSAPI (the default)'}:"
                " Spark's Kafka connector needs a sasl.jaas.config for it; set "
                f"{where}sasl.jaas.config"
            )
        out["sasl.jaas.config"] = (
            f'{module} required username="{_jaas_quote(username)}" '
            f'password="{_jaas_quote(password or "")}";'
        )
    if "ssl.ca.location" in out:
        location = out.pop("ssl.ca.location")
        if Path(location).is_dir():
            raise ConfigError(
                f"{where}ssl.ca.location={location} is a directory; Spark's Kafka connector "
                "reads one PEM file of CA certificates"
            )
        out.setdefault("ssl.truststore.location", location)
        out.setdefault("ssl.truststore.type", "PEM")
    if "ssl.ca.pem" in out:
        out.setdefault("ssl.truststore.certificates", out.pop("ssl.ca.pem"))
        out.setdefault("ssl.truststore.type", "PEM")
    if "ssl.key.location" in out or "ssl.certificate.location" in out:
        key, cert = out.pop("ssl.key.location", None), out.pop("ssl.certificate.location", None)
        if key != cert:
            raise ConfigError(
                f"{where}ssl.key.location and ssl.certificate.location: Spark's Kafka connector "
                f"reads the client's key and certificate from one file; set {where}"
                "ssl.keystore.location (PKCS12), or both to one PEM file holding both"
            )
        out.setdefault("ssl.keystore.location", key)
        out.setdefault("ssl.keystore.type", "PEM")
    if "ssl.keystore.location" in out:
        out.setdefault("ssl.keystore.type", "PKCS12")  # the only keystore librdkafka reads
    algorithm = out.get("ssl.endpoint.identification.algorithm")
    if algorithm is not None and str(algorithm).strip().lower() == "none":
        out["ssl.endpoint.identification.algorithm"] = ""
    return out


# -- the pieces -------------------------------------------------------------------------------


def _choice(where: str, name: str, value: Any, allowed: tuple[str, ...], what: str = "") -> str:
    text = str(value).strip().upper()
    if text not in allowed:
        kind = f"not {what} knows" if what else "not one librdkafka knows"
        raise ConfigError(f"{where}{name}={value}: {kind}; one of {', '.join(allowed)}")
    return text


def _endpoint_identification(where: str, value: Any) -> str:
    """Java's ``https`` or empty (no check) → librdkafka's ``https`` or ``none``."""
    text = str(value).strip().lower()
    if text in ("", "none"):
        return "none"
    if text == "https":
        return "https"
    raise ConfigError(
        f"{where}ssl.endpoint.identification.algorithm={value}: one of https (check the "
        "broker's host name), or empty / none (do not)"
    )


def _from_jaas(text: str, mechanism: str | None, where: str) -> dict[str, str]:
    """``sasl.username``/``sasl.password`` from a SCRAM or PLAIN ``sasl.jaas.config``."""
    match = _JAAS.match(text.strip())
    if match is None:
        raise ConfigError(
            f"{where}sasl.jaas.config is not a JAAS entry like "
            f'{_SCRAM} required username="..." password="...";'
        )
    module, options = match.group(1), _jaas_options(match.group(3))
    if module.endswith("Krb5LoginModule"):
        raise ConfigError(
            f"{where}sasl.jaas.config: Kerberos (Krb5LoginModule) is not translated; set "
            f"{_KERBEROS} (and {where}sasl.mechanism=GSSAPI) instead"
        )
    if module.endswith("OAuthBearerLoginModule"):
        raise ConfigError(
            f"{where}sasl.jaas.config: OAuthBearerLoginModule is not translated; set {_OIDC}"
        )
    kind = _LOGIN_MODULES.get(module)
    if kind is None:
        raise ConfigError(
            f"{where}sasl.jaas.config: login module {module} is not one blockgz translates "
            f"(ScramLoginModule, PlainLoginModule); set {where}sasl.username and "
            f"{where}sasl.password instead"
        )
    wanted = ("SCRAM-SHA-256", "SCRAM-SHA-512") if kind == "SCRAM" else ("PLAIN",)
    if mechanism not in wanted:
        raise ConfigError(
            f"{where}sasl.jaas.config uses {module.rsplit('.', 1)[-1]}: set "
            f"{where}sasl.mechanism={' or '.join(wanted)} (it is "
            f"{mechanism or 'not set, which means GSSAPI'})"
        )
    missing = [k for k in ("username", "password") if k not in options]
    if missing:
        raise ConfigError(f"{where}sasl.jaas.config has no {' and no '.join(missing)}")
    return {"sasl.username": options["username"], "sasl.password": options["password"]}


def _jaas_options(text: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for match in _JAAS_OPTION.finditer(text):
        value = match.group(2)
        if value.startswith('"'):
            value = re.sub(r"\\(.)", r"\1", value[1:-1])
        options[match.group(1)] = value
    return options


def _jaas_quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _truststore(given: dict[str, Any], where: str) -> dict[str, Any]:
    """Pop Java's truststore settings; return librdkafka's CA settings for them."""
    location = given.pop("ssl.truststore.location", None)
    kind = given.pop("ssl.truststore.type", None)
    password = given.pop("ssl.truststore.password", None)
    certificates = given.pop("ssl.truststore.certificates", None)
    if certificates is not None:
        return {"ssl.ca.pem": certificates}
    if location is None:
        return {}
    kind = str(kind).strip().upper() if kind else _sniff(location, where)
    if kind == "PEM":
        return {"ssl.ca.location": location}
    if kind == "PKCS12":
        return {"ssl.ca.pem": _pkcs12_certificates(location, password, where)}
    if kind == "JKS":
        raise ConfigError(
            f"{where}ssl.truststore.type=JKS: librdkafka cannot read Java keystores; export the "
            f"CA (keytool -exportcert -rfc -keystore {location} -alias ALIAS -file ca.pem) and "
            f"set {where}ssl.ca.location=ca.pem"
        )
    raise ConfigError(f"{where}ssl.truststore.type={kind}: one of PEM, PKCS12 (JKS: export PEM)")


def _keystore(given: dict[str, Any], where: str) -> dict[str, Any]:
    """Java's keystore type → librdkafka's client key settings (``ssl.keystore.location`` is
    PKCS12 in librdkafka, a PEM one becomes ``ssl.key.location``/``ssl.certificate.location``)."""
    kind = given.pop("ssl.keystore.type", None)
    out: dict[str, Any] = {}
    if "ssl.keystore.key" in given:
        out["ssl.key.pem"] = given.pop("ssl.keystore.key")
    if "ssl.keystore.certificate.chain" in given:
        out["ssl.certificate.pem"] = given.pop("ssl.keystore.certificate.chain")
    if kind is None or str(kind).strip().upper() == "PKCS12":
        return out
    kind = str(kind).strip().upper()
    if kind == "PEM":
        location = given.pop("ssl.keystore.location", None)
        if location is not None:
            out.update({"ssl.key.location": location, "ssl.certificate.location": location})
        return out
    raise ConfigError(
        f"{where}ssl.keystore.type={kind}: librdkafka reads a PKCS12 {where}ssl.keystore.location "
        f"or PEM files ({where}ssl.key.location, {where}ssl.certificate.location)"
    )


def _sniff(location: str, where: str) -> str:
    """A truststore's type from its first bytes (Java's default type is JKS, but keytool
    writes PKCS12 since Java 9, and PEM files are common)."""
    try:
        with open(location, "rb") as file:
            head = file.read(64)
    except OSError as exc:
        raise ConfigError(f"{where}ssl.truststore.location={location}: {exc.strerror}") from exc
    if head.startswith(b"\xfe\xed\xfe\xed"):
        return "JKS"
    if head.lstrip().startswith(b"-----BEGIN"):
        return "PEM"
    return "PKCS12"


def _pkcs12_certificates(location: str, password: Any, where: str) -> str:
    """The certificates of a PKCS12 truststore as PEM text (``cryptography`` reads it;
    librdkafka's ``ssl.ca.location`` takes PEM only)."""
    try:
        from cryptography.hazmat.primitives.serialization import Encoding, pkcs12
    except ImportError as exc:
        from blockgz.errors import MissingDependencyError

        raise MissingDependencyError(
            f"{where}ssl.truststore.type=PKCS12 needs the cryptography package "
            f"(or set {where}ssl.ca.location to a PEM file)"
        ) from exc
    try:
        data = Path(location).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{where}ssl.truststore.location={location}: {exc.strerror}") from exc
    try:
        store = pkcs12.load_pkcs12(data, str(password).encode() if password else None)
    except ValueError as exc:
        raise ConfigError(
            f"{where}ssl.truststore.location={location}: not a PKCS12 truststore, or "
            f"{where}ssl.truststore.password is wrong"
        ) from exc
    certs = [c.certificate for c in store.additional_certs]
    if store.cert is not None:
        certs.append(store.cert.certificate)
    if not certs:
        raise ConfigError(f"{where}ssl.truststore.location={location} holds no certificate")
    return "".join(c.public_bytes(Encoding.PEM).decode() for c in certs)


__all__ = [
    "JAVA_SECURITY_NAMES",
    "MECHANISMS",
    "PROTOCOLS",
    "is_security_setting",
    "java_settings",
    "librdkafka_settings",
    "lift_connect_settings",
    "producer_settings",
]
