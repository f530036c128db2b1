"""A loopback stand-in for the Confluent Schema Registry, for the tests and ``blockgz quickstart``.

No registry server can be installed here (DESIGN.md), so `LocalSchemaRegistry` serves the REST
endpoints that confluent-kafka's ``SchemaRegistryClient``, ``AvroSerializer`` and
``AvroDeserializer`` call, with the real registry's JSON bodies, content type and error codes,
from a ``ThreadingHTTPServer`` thread on a free loopback port. Only Avro is supported. Schema ids
are global and shared by equal schemas; compatibility is checked with the Apache ``avro``
package's reader/writer checker, imported only when a schema is parsed. A schema's text is
answered as it was first registered, without whitespace (the real registry answers its own
canonical form); equality ignores whitespace, key order and ``"string"`` vs
``{"type": "string"}`` but not docs, defaults or aliases, as in the real registry.

The state lives in the object, not in the server thread: ``stop()`` and ``start()`` (or
``with registry.outage():``) serve the same schemas on the same URL again, ``fail_next()``
answers the next requests with an error, and ``requests`` / ``request_count()`` show what the
clients asked for. (confluent-kafka 2.16's default subject name strategy first asks
``GET /associations/resources/-/{topic}``, answered ``[]`` here, then uses ``{topic}-value``:
that is one extra request per topic, field and serializer or deserializer.)

Example:

    >>> import json, urllib.request
    >>> with LocalSchemaRegistry() as registry:
    ...     request = urllib.request.Request(
    ...         registry.url + "/subjects/orders-value/versions",
    ...         data=json.dumps({"schema": '{"type": "string"}'}).encode(),
    ...         headers={"Content-Type": CONTENT_TYPE},
    ...     )
    ...     with urllib.request.urlopen(request) as response:
    ...         print(json.load(response)["id"])
    ...     with urllib.request.urlopen(registry.url + "/schemas/ids/1") as response:
    ...         print(json.load(response)["schema"])
    ...     print(registry.request_count("/schemas/ids/1"))
    1
    {"type":"string"}
    1
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hmac
import json
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import ModuleType
from typing import Any, Self
from urllib.parse import parse_qs, unquote, urlsplit

from blockgz.errors import MissingDependencyError
from blockgz.local_servers.ports import LOOPBACK, StartStop

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"

#: The compatibility levels, as the registry spells them.
LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
DEFAULT_LEVEL = "BACKWARD"


class _ApiError(Exception):
    """An error answer: HTTP status and the registry's ``error_code`` and ``message``."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


def _subject_not_found(subject: str) -> _ApiError:
    return _ApiError(404, 40401, f"Subject '{subject}' not found.")


def _invalid_schema(detail: str) -> _ApiError:
    return _ApiError(422, 42201, f"Invalid schema: {detail}")


def _avro() -> tuple[ModuleType, ModuleType, ModuleType]:
    """The Apache ``avro`` modules ``schema``, ``name`` and ``compatibility``, imported lazily."""
    try:
        import avro.compatibility
        import avro.name
        import avro.schema
    except ImportError as exc:
        raise MissingDependencyError(
            "the local Schema Registry needs the avro package: pip install 'avro>=1.12'"
            " (or the [local] extra)"
        ) from exc
    return avro.schema, avro.name, avro.compatibility


@dataclass
class _Schema:
    """A registered schema: its global id, its text as first registered, compacted, parsed."""

    id: int
    guid: str
    text: str
    references: list[dict[str, Any]]
    key: tuple[str, tuple[tuple[str, str, int], ...]]
    parsed: Any  # avro.schema.Schema

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema": self.text}
        if self.references:
            out["references"] = self.references
        return out


@dataclass
class _Version:
    version: int
    schema_id: int
    deleted: bool = False


def _flag(query: Mapping[str, str], name: str) -> bool:
    return query.get(name, "").strip().lower() == "true"


def _page(items: list[Any], query: Mapping[str, str]) -> list[Any]:
    """Apply the ``offset`` and ``limit`` query parameters (a negative limit means all)."""
    try:
        offset = max(int(query.get("offset", "0")), 0)
        limit = int(query.get("limit", "-1"))
    except ValueError as exc:
        raise _ApiError(400, 400, "offset and limit must be integers") from exc
    items = items[offset:]
    return items if limit < 0 else items[:limit]


def _check_level(level: Any) -> str:
    if not isinstance(level, str) or level.upper() not in LEVELS:
        raise _ApiError(
            422,
            42203,
            "Invalid compatibility level. Valid values are none, backward, forward, full, "
            "backward_transitive, forward_transitive, and full_transitive",
        )
    return level.upper()


class _Store:
    """The registry's state and the endpoint logic; every method runs under the caller's lock."""

    def __init__(self, default_level: str) -> None:
        self.default_level = default_level
        self.global_level = default_level
        self.subject_levels: dict[str, str] = {}
        self.schemas: dict[int, _Schema] = {}
        self.ids_by_key: dict[tuple[str, tuple[tuple[str, str, int], ...]], int] = {}
        self.subjects: dict[str, list[_Version]] = {}

    # -- schemas ----------------------------------------------------------------------------

    def parse(self, body: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]], Any, Any]:
        """Validate a request's schema: its compact text, references, parsed form and id key."""
        schema_type = body.get("schemaType") or "AVRO"
        if schema_type != "AVRO":
            raise _ApiError(
                422,
                42201,
                f"Invalid schema type {schema_type}: this local registry supports only AVRO",
            )
        text = body.get("schema")
        if not isinstance(text, str) or not text.strip():
            raise _invalid_schema("the schema is empty")
        raw_refs = body.get("references") or []
        if not isinstance(raw_refs, list):
            raise _invalid_schema("references must be a list")
        references: list[dict[str, Any]] = []
        for ref in raw_refs:
            if not (
                isinstance(ref, dict)
                and isinstance(ref.get("name"), str)
                and isinstance(ref.get("subject"), str)
                and isinstance(ref.get("version"), int)
            ):
                raise _invalid_schema(f"a reference needs a name, subject and version: {ref!r}")
            references.append(
                {"name": ref["name"], "subject": ref["subject"], "version": ref["version"]}
            )
        avro_schema, avro_name, _ = _avro()
        names = avro_name.Names(validate_names=True)
        seen: set[tuple[str, int]] = set()
        try:
            data = json.loads(text)
            for ref in references:
                self._load_reference(ref, names, seen, avro_schema)
            parsed = avro_schema.make_avsc_object(data, names)
            normal = json.dumps(parsed.to_json(), sort_keys=True, separators=(",", ":"))
        except _ApiError:
            raise
        except Exception as exc:  # json, avro.errors and whatever odd input makes avro raise
            raise _invalid_schema(str(exc) or type(exc).__name__) from exc
        compact = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
        key = (normal, tuple((r["name"], r["subject"], r["version"]) for r in references))
        return compact, references, parsed, key

    def _load_reference(
        self, ref: dict[str, Any], names: Any, seen: set[tuple[str, int]], avro_schema: ModuleType
    ) -> None:
        """Parse a referenced schema (and its own references) into ``names``."""
        try:
            version = self.find_version(ref["subject"], str(ref["version"]), deleted=True)
        except _ApiError as exc:
            raise _invalid_schema(f"reference {ref['name']!r}: {exc.message}") from exc
        if (ref["subject"], version.version) in seen:
            return
        seen.add((ref["subject"], version.version))
        stored = self.schemas[version.schema_id]
        for inner in stored.references:
            self._load_reference(inner, names, seen, avro_schema)
        avro_schema.make_avsc_object(json.loads(stored.text), names)

    def schema(self, schema_id: str) -> _Schema:
        try:
            return self.schemas[int(schema_id)]
        except (ValueError, KeyError):
            raise _ApiError(404, 40403, f"Schema {schema_id} not found") from None

    def schema_by_guid(self, guid: str) -> _Schema:
        for stored in self.schemas.values():
            if stored.guid == guid:
                return stored
        raise _ApiError(404, 40403, f"Schema {guid} not found")

    def intern(self, text: str, references: list[dict[str, Any]], parsed: Any, key: Any) -> int:
        """The id of an equal schema registered before, or a new id."""
        schema_id = self.ids_by_key.get(key)
        if schema_id is None:
            schema_id = max(self.schemas, default=0) + 1
            self.schemas[schema_id] = _Schema(
                schema_id, str(uuid.uuid4()), text, references, key, parsed
            )
            self.ids_by_key[key] = schema_id
        return schema_id

    # -- subjects and versions --------------------------------------------------------------

    def live(self, subject: str) -> list[_Version]:
        return [v for v in self.subjects.get(subject, []) if not v.deleted]

    def find_version(self, subject: str, version: str, *, deleted: bool = False) -> _Version:
        """Version ``version`` (a number, ``latest`` or ``-1``) of a subject."""
        versions = [v for v in self.subjects.get(subject, []) if deleted or not v.deleted]
        if not versions:
            raise _subject_not_found(subject)
        if version in ("latest", "-1"):
            return versions[-1]
        try:
            number = int(version)
        except ValueError:
            number = 0
        if not 1 <= number <= 2**31 - 1:
            raise _ApiError(
                422,
                42202,
                f"The specified version '{version}' is not a valid version id. Allowed values "
                'are between [1, 2^31-1] and the string "latest"',
            )
        for candidate in versions:
            if candidate.version == number:
                return candidate
        raise _ApiError(404, 40402, f"Version {number} not found.")

    def version_body(self, subject: str, version: _Version) -> dict[str, Any]:
        stored = self.schemas[version.schema_id]
        return {
            "subject": subject,
            "version": version.version,
            "id": stored.id,
            "guid": stored.guid,
            **stored.body(),
        }

    def level(self, subject: str | None) -> str:
        if subject is not None and subject in self.subject_levels:
            return self.subject_levels[subject]
        return self.global_level

    # -- compatibility ----------------------------------------------------------------------

    def incompatibilities(
        self, level: str, new: Any, olds: list[_Version], *, transitive: bool | None = None
    ) -> list[str]:
        """Why ``new`` breaks ``level`` against the old versions (latest only unless transitive)."""
        if level == "NONE" or not olds:
            return []
        if transitive is None:
            transitive = level.endswith("_TRANSITIVE")
        base = level.removesuffix("_TRANSITIVE")
        for old in reversed(olds if transitive else olds[-1:]):
            stored = self.schemas[old.schema_id]
            found: list[str] = []
            if base in ("BACKWARD", "FULL"):
                found += _check(new, stored.parsed, "the new schema cannot read data written by")
            if base in ("FORWARD", "FULL"):
                found += _check(
                    stored.parsed, new, "data written by the new schema cannot be read by"
                )
            if found:
                return [
                    *found,
                    f"{{oldSchemaVersion: {old.version}}}",
                    f"{{oldSchema: '{stored.text}'}}",
                    f"{{compatibility: '{level}'}}",
                ]
        return []

    # -- endpoints (each takes the path's captures, then query and body) ---------------------

    def root(self, query: Mapping[str, str], body: Any) -> Any:
        return {}

    def schema_types(self, query: Mapping[str, str], body: Any) -> Any:
        return ["AVRO"]

    def get_schema(self, schema_id: str, query: Mapping[str, str], body: Any) -> Any:
        stored = self.schema(schema_id)
        return {**stored.body(), "guid": stored.guid}

    def get_schema_text(self, schema_id: str, query: Mapping[str, str], body: Any) -> Any:
        return json.loads(self.schema(schema_id).text)

    def get_schema_by_guid(self, guid: str, query: Mapping[str, str], body: Any) -> Any:
        stored = self.schema_by_guid(guid)
        return {**stored.body(), "id": stored.id, "guid": stored.guid}

    def _uses(self, schema_id: str, query: Mapping[str, str]) -> list[tuple[str, int]]:
        stored = self.schema(schema_id)
        deleted = _flag(query, "deleted")
        wanted = query.get("subject")
        return [
            (subject, v.version)
            for subject, versions in sorted(self.subjects.items())
            if wanted in (None, "", subject)
            for v in versions
            if v.schema_id == stored.id and (deleted or not v.deleted)
        ]

    def schema_versions(self, schema_id: str, query: Mapping[str, str], body: Any) -> Any:
        uses = self._uses(schema_id, query)
        return _page([{"subject": s, "version": v} for s, v in uses], query)

    def schema_subjects(self, schema_id: str, query: Mapping[str, str], body: Any) -> Any:
        return _page(list(dict.fromkeys(s for s, _ in self._uses(schema_id, query))), query)

    def list_subjects(self, query: Mapping[str, str], body: Any) -> Any:
        prefix = query.get("subjectPrefix", "")
        if _flag(query, "deleted_only"):
            keep: Callable[[list[_Version]], bool] = lambda vs: any(v.deleted for v in vs)  # noqa: E731
        elif _flag(query, "deleted"):
            keep = bool
        else:
            keep = lambda vs: any(not v.deleted for v in vs)  # noqa: E731
        names = sorted(s for s, vs in self.subjects.items() if s.startswith(prefix) and keep(vs))
        return _page(names, query)

    def list_versions(self, subject: str, query: Mapping[str, str], body: Any) -> Any:
        versions = self.subjects.get(subject, [])
        if _flag(query, "deleted_only"):
            numbers = [v.version for v in versions if v.deleted]
        else:
            numbers = [v.version for v in versions if _flag(query, "deleted") or not v.deleted]
        if not numbers and not self.live(subject):
            raise _subject_not_found(subject)
        return _page(numbers, query)

    def register(self, subject: str, query: Mapping[str, str], body: Any) -> Any:
        text, references, parsed, key = self.parse(body)
        live = self.live(subject)
        for version in live:
            if self.schemas[version.schema_id].key == key:  # already there: idempotent
                stored = self.schemas[version.schema_id]
                return {
                    "id": stored.id,
                    "version": version.version,
                    "subject": subject,
                    "guid": stored.guid,
                }
        problems = self.incompatibilities(self.level(subject), parsed, live)
        if problems:
            raise _ApiError(
                409,
                409,
                f'Schema being registered is incompatible with an earlier schema for subject "'
                f'{subject}", details: [{", ".join(problems)}]',
            )
        schema_id = self.intern(text, references, parsed, key)
        versions = self.subjects.setdefault(subject, [])
        number = max((v.version for v in versions), default=0) + 1
        versions.append(_Version(number, schema_id))
        return {
            "id": schema_id,
            "version": number,
            "subject": subject,
            "guid": self.schemas[schema_id].guid,
        }

    def lookup(self, subject: str, query: Mapping[str, str], body: Any) -> Any:
        deleted = _flag(query, "deleted")
        versions = [v for v in self.subjects.get(subject, []) if deleted or not v.deleted]
        if not versions:
            raise _subject_not_found(subject)
        _, _, _, key = self.parse(body)
        for version in reversed(versions):
            if self.schemas[version.schema_id].key == key:
                return self.version_body(subject, version)
        raise _ApiError(404, 40403, "Schema not found")

    def get_version(self, subject: str, version: str, query: Mapping[str, str], body: Any) -> Any:
        found = self.find_version(subject, version, deleted=_flag(query, "deleted"))
        return self.version_body(subject, found)

    def get_version_schema(
        self, subject: str, version: str, query: Mapping[str, str], body: Any
    ) -> Any:
        found = self.find_version(subject, version, deleted=_flag(query, "deleted"))
        return json.loads(self.schemas[found.schema_id].text)

    def delete_subject(self, subject: str, query: Mapping[str, str], body: Any) -> Any:
        versions = self.subjects.get(subject)
        if not versions:
            raise _subject_not_found(subject)
        live = [v for v in versions if not v.deleted]
        if _flag(query, "permanent"):
            if live:
                raise _ApiError(
                    404,
                    40405,
                    f"Subject '{subject}' was not deleted first before being permanently deleted",
                )
            del self.subjects[subject]
            return [v.version for v in versions]
        if not live:
            raise _ApiError(
                404,
                40404,
                f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
            )
        for version in live:
            version.deleted = True
        self.subject_levels.pop(subject, None)
        return [v.version for v in live]

    def delete_version(
        self, subject: str, version: str, query: Mapping[str, str], body: Any
    ) -> Any:
        permanent = _flag(query, "permanent")
        numbered = version not in ("latest", "-1")  # "latest" means the latest live version
        found = self.find_version(subject, version, deleted=permanent or numbered)
        if found.deleted and not permanent:
            raise _ApiError(
                404,
                40406,
                f"Subject '{subject}' Version {found.version} was soft deleted.Set "
                "permanent=true to delete permanently",
            )
        if permanent:
            if not found.deleted:
                raise _ApiError(
                    404,
                    40407,
                    f"Subject '{subject}' Version {found.version} was not deleted first before "
                    "being permanently deleted",
                )
            self.subjects[subject].remove(found)
            if not self.subjects[subject]:
                del self.subjects[subject]
        else:
            found.deleted = True
        return found.version

    def get_config(self, query: Mapping[str, str], body: Any) -> Any:
        return {"compatibilityLevel": self.global_level}

    def put_config(self, query: Mapping[str, str], body: Any) -> Any:
        if "compatibility" not in body:
            return {}
        self.global_level = _check_level(body["compatibility"])
        return {"compatibility": self.global_level}

    def delete_config(self, query: Mapping[str, str], body: Any) -> Any:
        old, self.global_level = self.global_level, self.default_level
        return {"compatibilityLevel": old}

    def get_subject_config(self, subject: str, query: Mapping[str, str], body: Any) -> Any:
        if subject in self.subject_levels:
            return {"compatibilityLevel": self.subject_levels[subject]}
        if _flag(query, "defaultToGlobal"):
            return {"compatibilityLevel": self.global_level}
        raise _ApiError(
            404,
            40408,
            f"Subject '{subject}' does not have subject-level compatibility configured",
        )

    def put_subject_config(self, subject: str, query: Mapping[str, str], body: Any) -> Any:
        if "compatibility" not in body:
            return {}
        self.subject_levels[subject] = _check_level(body["compatibility"])
        return {"compatibility": self.subject_levels[subject]}

    def delete_subject_config(self, subject: str, query: Mapping[str, str], body: Any) -> Any:
        if subject not in self.subjects and subject not in self.subject_levels:
            raise _subject_not_found(subject)
        old = self.get_subject_config(subject, {}, None)
        del self.subject_levels[subject]
        return old

    def test_latest_or_version(
        self, subject: str, version: str, query: Mapping[str, str], body: Any
    ) -> Any:
        _, _, parsed, _ = self.parse(body)
        if version in ("latest", "-1") and not self.live(subject):
            problems: list[str] = []  # nothing to be incompatible with
        else:
            old = self.find_version(subject, version)
            problems = self.incompatibilities(self.level(subject), parsed, [old], transitive=False)
        return _compat_answer(problems, query)

    def test_all_versions(self, subject: str, query: Mapping[str, str], body: Any) -> Any:
        _, _, parsed, _ = self.parse(body)
        problems = self.incompatibilities(self.level(subject), parsed, self.live(subject))
        return _compat_answer(problems, query)

    def mode(self, *captures_query_body: Any) -> Any:
        return {"mode": "READWRITE"}

    def contexts(self, query: Mapping[str, str], body: Any) -> Any:
        return ["."]

    def associations(self, namespace: str, name: str, query: Mapping[str, str], body: Any) -> Any:
        return []  # none can be made here, so the serdes fall back to the topic strategy


def _compat_answer(problems: list[str], query: Mapping[str, str]) -> dict[str, Any]:
    answer: dict[str, Any] = {"is_compatible": not problems}
    if _flag(query, "verbose"):
        answer["messages"] = problems
    return answer


def _check(reader: Any, writer: Any, what: str) -> list[str]:
    """The registry's messages for why ``reader`` cannot read ``writer``'s data (``[]``: it can)."""
    _, _, compatibility = _avro()
    result = compatibility.ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)
    if result.compatibility is not compatibility.SchemaCompatibilityType.incompatible:
        return []
    detail = "; ".join(sorted(result.messages))
    where = ", ".join(sorted(result.locations))
    kinds = dict.fromkeys(kind.name.upper() for kind in result.incompatibilities) or {
        "INCOMPATIBLE": None
    }
    return [
        f"{{errorType:'{kind}', description:'At {where}: {what} the old schema: {detail}', "
        f"additionalInfo:'{detail}'}}"
        for kind in kinds
    ]


#: (method, path pattern, endpoint name); ``*`` captures one path segment.
_ROUTES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("GET", (), "root"),
    ("GET", ("schemas", "types"), "schema_types"),
    ("GET", ("schemas", "ids", "*"), "get_schema"),
    ("GET", ("schemas", "ids", "*", "schema"), "get_schema_text"),
    ("GET", ("schemas", "ids", "*", "versions"), "schema_versions"),
    ("GET", ("schemas", "ids", "*", "subjects"), "schema_subjects"),
    ("GET", ("schemas", "guids", "*"), "get_schema_by_guid"),
    ("GET", ("subjects",), "list_subjects"),
    ("POST", ("subjects", "*"), "lookup"),
    ("DELETE", ("subjects", "*"), "delete_subject"),
    ("GET", ("subjects", "*", "versions"), "list_versions"),
    ("POST", ("subjects", "*", "versions"), "register"),
    ("GET", ("subjects", "*", "versions", "*"), "get_version"),
    ("DELETE", ("subjects", "*", "versions", "*"), "delete_version"),
    ("GET", ("subjects", "*", "versions", "*", "schema"), "get_version_schema"),
    ("GET", ("config",), "get_config"),
    ("PUT", ("config",), "put_config"),
    ("DELETE", ("config",), "delete_config"),
    ("GET", ("config", "*"), "get_subject_config"),
    ("PUT", ("config", "*"), "put_subject_config"),
    ("DELETE", ("config", "*"), "delete_subject_config"),
    ("POST", ("compatibility", "subjects", "*", "versions"), "test_all_versions"),
    ("POST", ("compatibility", "subjects", "*", "versions", "*"), "test_latest_or_version"),
    ("GET", ("mode",), "mode"),
    ("GET", ("mode", "*"), "mode"),
    ("GET", ("contexts",), "contexts"),
    ("GET", ("associations", "resources", "*", "*"), "associations"),
)


def _route(method: str, segments: list[str]) -> tuple[str, list[str]]:
    """The endpoint name and path captures for a request, or a 404 / 405 error."""
    path_matched = False
    for route_method, pattern, name in _ROUTES:
        if len(pattern) != len(segments):
            continue
        if all(p in ("*", s) for p, s in zip(pattern, segments, strict=True)):
            path_matched = True
            if route_method == method:
                captures = [s for p, s in zip(pattern, segments, strict=True) if p == "*"]
                return name, captures
    if path_matched:
        raise _ApiError(405, 405, "HTTP 405 Method Not Allowed")
    raise _ApiError(404, 404, "HTTP 404 Not Found")


@dataclass
class _Fault:
    remaining: int
    status: int
    error_code: int
    message: str
    path: str | None = None


@dataclass
class _Answer:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


class _Handler(BaseHTTPRequestHandler):
    """One HTTP/1.0 request (the connection closes after it, so ``stop()`` is an outage)."""

    server: _Server
    server_version = "LocalSchemaRegistry/1"

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def log_message(self, format: str, *args: Any) -> None:
        pass  # quiet: tests read ``requests`` instead

    def _handle(self, method: str) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        answer = self.server.registry._answer(
            method, self.path, raw, self.headers.get("Authorization")
        )
        data = json.dumps(answer.body, separators=(",", ":")).encode()
        self.send_response(answer.status)
        self.send_header("Content-Type", CONTENT_TYPE)
        self.send_header("Content-Length", str(len(data)))
        for name, value in answer.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True  # so start() after stop() can bind the same port again

    def __init__(self, address: tuple[str, int], registry: LocalSchemaRegistry) -> None:
        super().__init__(address, _Handler)
        self.registry = registry


class LocalSchemaRegistry(StartStop):
    """A Confluent-compatible Schema Registry (Avro only) on a loopback port, in a thread.

    ``users`` (``{"user": "password"}``) turns on HTTP basic auth for every request, as
    ``basic.auth.user.info`` sends it. ``compatibility`` is the global level it starts with and
    returns to on ``DELETE /config``. ``port=0`` takes a free port on the first ``start()``;
    later starts bind the same port, so a ``stop()`` / ``start()`` pair is an outage, not a new
    registry: the schemas, ids and configuration are kept until ``reset()``.

    Example (starts a server, so not a doctest)::

        with LocalSchemaRegistry(users={"alice": "secret"}) as registry:
            client = SchemaRegistryClient(
                {"url": registry.url, "basic.auth.user.info": "alice:secret"}
            )
            schema_id = client.register_schema("orders-value", Schema(avsc, "AVRO"))
            registry.fail_next(2, status=503)  # the next two requests get 503
            with registry.outage():  # connections are refused in here
                ...
            consume_everything()  # e.g. with an AvroDeserializer on a new client
            assert registry.request_count(f"/schemas/ids/{schema_id}") == 1
    """

    def __init__(
        self,
        *,
        port: int = 0,
        users: Mapping[str, str] | None = None,
        compatibility: str = DEFAULT_LEVEL,
    ) -> None:
        if compatibility.upper() not in LEVELS:
            raise ValueError(f"compatibility must be one of {', '.join(LEVELS)}: {compatibility!r}")
        self.host = LOOPBACK
        self.port: int | None = port or None
        self.users = dict(users) if users is not None else None
        self._lock = threading.RLock()
        self._store = _Store(compatibility.upper())
        self._requests: list[tuple[str, str]] = []
        self._faults: list[_Fault] = []
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``, the client's ``url`` (known once started; kept on stop)."""
        if self.port is None:
            raise RuntimeError("LocalSchemaRegistry is not started")
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the server is accepting connections."""
        return self._server is not None

    def start(self) -> Self:
        """Listen (again) and serve in a daemon thread; returns at once, ready for requests."""
        if self._server is not None:
            return self
        server = _Server((self.host, self.port or 0), self)
        self.port = int(server.server_address[1])
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"schema-registry-{self.port}",
            daemon=True,
        )
        thread.start()
        self._server, self._thread = server, thread
        return self

    def stop(self) -> None:
        """Close the listening socket (clients get "connection refused"); keeps all state."""
        server, self._server = self._server, None
        thread, self._thread = self._thread, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join()

    @contextlib.contextmanager
    def outage(self) -> Iterator[None]:
        """``with registry.outage():`` the registry is down inside the block and back after it."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    def fail_next(
        self,
        n: int = 1,
        status: int = 503,
        *,
        error_code: int | None = None,
        message: str = "Injected failure (LocalSchemaRegistry.fail_next)",
        path: str | None = None,
    ) -> None:
        """Answer the next ``n`` requests (whose path starts with ``path``, if given) with an error.

        ``error_code`` defaults to 50001 for a 5xx status and to ``status`` otherwise. Failed
        requests are counted in ``requests`` too. Note that the client retries 408, 429, 500,
        502, 503 and 504 (``max.retries``, default 2, waiting ``retries.wait.ms``).
        """
        if error_code is None:
            error_code = 50001 if status >= 500 else status
        with self._lock:
            self._faults.append(_Fault(n, status, error_code, message, path))

    @property
    def requests(self) -> list[tuple[str, str]]:
        """Every request so far as ``(method, path)``; the path percent-decoded, no query."""
        with self._lock:
            return list(self._requests)

    def request_count(self, path: str | None = None, method: str | None = None) -> int:
        """How many requests had exactly this path (and method); all of them by default."""
        with self._lock:
            return sum(
                1
                for m, p in self._requests
                if (path is None or p == path) and (method is None or m == method.upper())
            )

    def clear_requests(self) -> None:
        """Forget the requests counted so far."""
        with self._lock:
            self._requests.clear()

    def reset(self) -> None:
        """Forget every schema, subject, setting, request and pending fault (a new registry)."""
        with self._lock:
            self._store = _Store(self._store.default_level)
            self._requests.clear()
            self._faults.clear()

    # -- request handling (called from the server's threads) --------------------------------

    def _answer(self, method: str, target: str, raw: bytes, authorization: str | None) -> _Answer:
        split = urlsplit(target)
        segments = [unquote(s) for s in split.path.split("/") if s]
        path = "/" + "/".join(segments)
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        with self._lock:
            self._requests.append((method, path))
            fault = self._take_fault(path)
        if fault is not None:
            return _Answer(fault.status, {"error_code": fault.error_code, "message": fault.message})
        if self.users is not None and not self._authorized(authorization):
            return _Answer(
                401,
                {"error_code": 40101, "message": "Unauthorized"},
                {"WWW-Authenticate": 'Basic realm="SchemaRegistry"'},
            )
        try:
            name, captures = _route(method, segments)
            body: Any = {}
            if raw:
                try:
                    body = json.loads(raw)
                except ValueError as exc:
                    raise _ApiError(400, 400, f"Malformed JSON body: {exc}") from exc
                if not isinstance(body, dict):
                    raise _ApiError(400, 400, "The request body must be a JSON object")
            with self._lock:
                result = getattr(self._store, name)(*captures, query, body)
            return _Answer(200, result)
        except _ApiError as exc:
            return _Answer(exc.status, {"error_code": exc.error_code, "message": exc.message})
        except Exception as exc:  # a bug or a missing dependency: answer, do not drop the line
            return _Answer(500, {"error_code": 50001, "message": f"{type(exc).__name__}: {exc}"})

    def _take_fault(self, path: str) -> _Fault | None:
        for fault in self._faults:
            if fault.path is None or path.startswith(fault.path):
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self._faults.remove(fault)
                return fault
        return None

    def _authorized(self, authorization: str | None) -> bool:
        assert self.users is not None
        scheme, _, encoded = (authorization or "").partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, sep, password = (
                base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
            )
        except (binascii.Error, UnicodeDecodeError):
            return False
        expected = self.users.get(user)
        return (
            bool(sep)
            and expected is not None
            and hmac.compare_digest(expected.encode(), password.encode())
        )


__all__ = ["CONTENT_TYPE", "DEFAULT_LEVEL", "LEVELS", "LocalSchemaRegistry"]
