"""Where a Confluent-compatible Schema Registry is, and schemas fetched from it by id or subject.

Shared by the export (decoding Avro records, :mod:`blockgz.sink.convert.schemas_by_id`) and the
reader
(decoding Avro values a bytearray archive kept in Confluent's wire format). One
confluent-kafka ``SchemaRegistryClient`` and one cache per process and registry, so a schema
id costs one HTTP request however many records carry it.

>>> settings = RegistrySettings.from_options({"schema.registry.url": "http://127.0.0.1:8081"},
...                                          "value.converter")
>>> settings.client_config()["url"]
'http://127.0.0.1:8081'
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from blockgz.errors import ConfigError, RegistryError, UnknownSchemaError
from blockgz.option_defs import OptionSet, declarer
from blockgz.options import as_options

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")

CREDENTIAL_SOURCES = ("USER_INFO", "URL")


_registry = declarer("registry", "confluent")

#: The registry client's options, under the AvroConverter's names: the export takes them as
#: ``value.converter.<name>`` (or ``key.converter.<name>``), the readers with or without it.
REGISTRY_OPTIONS = OptionSet(
    _registry(
        "schema.registry.url", "text", "", "the registry (its first URL is used)", also=("reader",)
    ),
    _registry(
        "basic.auth.credentials.source",
        "text",
        "",
        "`USER_INFO` (with `basic.auth.user.info`) or `URL` (credentials in the URL)",
        also=("reader",),
    ),
    _registry("basic.auth.user.info", "text", "", "`user:password`", also=("reader",)),
    _registry(
        "schema.registry.basic.auth.user.info",
        "text",
        "",
        "`user:password` (the older name)",
        also=("reader",),
    ),
    _registry("max.retries", "int", 3, "retries of a registry request", low=0),
    _registry("retries.wait.ms", "int", 1000, "the wait before a retry", low=0),
    _registry(
        "request.timeout.s",
        "int",
        10,
        "the timeout of a registry request, in seconds",
        low=1,
        origin="blockgz",
    ),
)


@dataclass(frozen=True)
class RegistrySettings:
    """Where the registry is and how to log in (Connect's AvroConverter option names)."""

    url: str
    user_info: str | None = None
    max_retries: int = 3
    retries_wait_ms: int = 1000
    timeout_s: int = 10

    @classmethod
    def from_options(cls, options: Mapping[str, Any], prefix: str) -> RegistrySettings:
        """Read ``<prefix>.schema.registry.url`` and friends (``options`` may hold them
        with or without the prefix)."""
        opts = as_options(
            {
                k[len(prefix) + 1 :] if k.startswith(prefix + ".") else k: v
                for k, v in options.items()
            }
        )
        read = REGISTRY_OPTIONS.read
        url = read(opts, "schema.registry.url")
        if not url:
            raise ConfigError(
                f"{prefix}.schema.registry.url is required with the AvroConverter "
                "(for example http://127.0.0.1:8081)"
            )
        source = read(opts, "basic.auth.credentials.source").upper()
        user_info = read(opts, "basic.auth.user.info") or read(
            opts, "schema.registry.basic.auth.user.info"
        )
        if source and source not in CREDENTIAL_SOURCES:
            raise ConfigError(
                f"{prefix}.basic.auth.credentials.source: {source!r} is not supported; allowed: "
                + ", ".join(CREDENTIAL_SOURCES)
            )
        if source == "USER_INFO" and not user_info:
            raise ConfigError(
                f"{prefix}.basic.auth.credentials.source=USER_INFO needs "
                f"{prefix}.basic.auth.user.info (user:password)"
            )
        if user_info and ":" not in user_info:
            raise ConfigError(f"{prefix}.basic.auth.user.info must be user:password")
        return cls(
            url=url.split(",")[0].strip(),
            user_info=None if source == "URL" else user_info,
            max_retries=read(opts, "max.retries"),
            retries_wait_ms=read(opts, "retries.wait.ms"),
            timeout_s=read(opts, "request.timeout.s"),
        )

    def client_config(self) -> dict[str, Any]:
        """The confluent-kafka ``SchemaRegistryClient`` configuration."""
        config: dict[str, Any] = {
            "url": self.url,
            "max.retries": self.max_retries,
            "retries.wait.ms": self.retries_wait_ms,
            "timeout": self.timeout_s,
        }
        if self.user_info:
            config["basic.auth.user.info"] = self.user_info
        return config


class OncePerKey(Generic[K, T]):
    """Values made once per key, thread-safe: a second caller waits for the first one's value
    instead of making it again (one registry request per id). ``functools.cache`` and
    cachetools make a value once per *concurrent* miss, hence this. The lock is re-entrant, so
    making one value may make another of the same cache.

    >>> made = OncePerKey()
    >>> made.get(1, lambda: "one"), made.get(1, lambda: "again")
    ('one', 'one')
    """

    def __init__(self) -> None:
        self._values: dict[K, T] = {}
        self._lock = threading.RLock()

    def get(self, key: K, make: Callable[[], T]) -> T:
        """The value for ``key``, made by ``make()`` if no caller made it before."""
        found = self._values.get(key)
        if found is None:
            with self._lock:
                found = self._values.get(key)
                if found is None:
                    found = self._values[key] = make()
        return found

    def clear(self) -> None:
        """Forget every value (as a fresh process would)."""
        with self._lock:
            self._values.clear()


class SchemaTexts:
    """Avro schema texts by registry id, fetched once each (thread-safe)."""

    def __init__(self, settings: RegistrySettings):
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.settings = settings
        self.client = SchemaRegistryClient(settings.client_config())
        self._texts: OncePerKey[int, str] = OncePerKey()
        self._ids: OncePerKey[tuple[str, str], int] = OncePerKey()

    def get(self, schema_id: int) -> str:
        """The schema registered under ``schema_id``; :class:`RegistryError` if the registry
        cannot be reached (after the client's retries), :class:`UnknownSchemaError` if it has no
        such id."""
        return self._texts.get(schema_id, lambda: self._fetch(schema_id))

    def latest(self, subject: str) -> tuple[int, str]:
        """The id and text of the newest version registered under ``subject``."""
        registered = self._ask(
            lambda: self.client.get_latest_version(subject), f"subject {subject!r}"
        )
        self._check_avro(registered.schema.schema_type, f"subject {subject!r}")
        text = self._texts.get(registered.schema_id, lambda: registered.schema.schema_str)
        return registered.schema_id, text

    def register(self, subject: str, text: str) -> int:
        """The id of the Avro schema ``text`` under ``subject``, registered there if it is not
        yet. A registry answers a schema it already holds with the id it has, so registering
        into the registry a value came from gives back that value's id."""
        from confluent_kafka.schema_registry import Schema

        return self._ids.get(
            (subject, text),
            lambda: self._ask(
                lambda: self.client.register_schema(subject, Schema(text, "AVRO")),
                f"a schema registered under subject {subject!r}",
            ),
        )

    def lookup(self, subject: str, text: str) -> int | None:
        """The id of the Avro schema ``text`` if ``subject`` holds it, else ``None``."""
        from confluent_kafka.schema_registry import Schema

        try:
            return self._ask(
                lambda: self.client.lookup_schema(subject, Schema(text, "AVRO")).schema_id,
                f"a schema under subject {subject!r}",
            )
        except UnknownSchemaError:
            return None

    def _fetch(self, schema_id: int) -> str:
        registered = self._ask(lambda: self.client.get_schema(schema_id), f"schema id {schema_id}")
        self._check_avro(registered.schema_type, f"schema id {schema_id}")
        return registered.schema_str

    def _ask(self, call: Any, what: str) -> Any:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        try:
            return call()
        except SchemaRegistryError as exc:
            if exc.http_status_code == 404:
                raise UnknownSchemaError(
                    f"{what} is not in the registry at {self.settings.url}"
                ) from exc
            raise RegistryError(
                f"the registry at {self.settings.url} answered {exc.http_status_code} for "
                f"{what}: {exc.error_message}"
            ) from exc
        except Exception as exc:  # connection refused, timeouts: after the client's retries
            raise RegistryError(
                f"cannot reach the schema registry at {self.settings.url} for {what} "
                f"({type(exc).__name__}: {exc})"
            ) from exc

    @staticmethod
    def _check_avro(schema_type: str | None, what: str) -> None:
        kind = (schema_type or "AVRO").upper()
        if kind != "AVRO":
            raise RegistryError(f"{what} is {kind}, not AVRO")


# A cached object may build another one in its constructor (the sink's parsed schemas sit on
# this process's schema texts): OncePerKey's lock is re-entrant for that.
_CACHES: OncePerKey[tuple[Any, int, RegistrySettings], Any] = OncePerKey()


def per_process(make: Callable[[RegistrySettings], T], settings: RegistrySettings) -> T:
    """``make(settings)``, made once per process (executors outlive a task) and thread-safe."""
    return _CACHES.get((make, os.getpid(), settings), lambda: make(settings))


def schema_texts_from(settings: RegistrySettings) -> SchemaTexts:
    """This process's schema cache for a registry (one client per process and settings)."""
    return per_process(SchemaTexts, settings)
