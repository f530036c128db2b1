"""The state of the Schema Registry stand-in: schemas, ids, subjects, levels, compatibility.

:class:`RegistryState` answers the REST API's requests as plain calls (path segments, query,
JSON body in; JSON body out, or :class:`RegistryApiError` with the registry's error code);
:mod:`blockgz.local_servers.registry` serves it over HTTP. Compatibility is checked with the
Apache ``avro`` package's reader/writer checker, imported only when a schema is parsed.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from blockgz.errors import MissingDependencyError

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


class RegistryApiError(Exception):
    """An error answer: HTTP status and the registry's ``error_code`` and ``message``."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message


def _subject_not_found(subject: str) -> RegistryApiError:
    return RegistryApiError(404, 40401, f"Subject '{subject}' not found.")


def _invalid_schema(detail: str) -> RegistryApiError:
    return RegistryApiError(422, 42201, f"Invalid schema: {detail}")


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
        raise RegistryApiError(400, 400, "offset and limit must be integers") from exc
    items = items[offset:]
    return items if limit < 0 else items[:limit]


def _check_level(level: Any) -> str:
    if not isinstance(level, str) or level.upper() not in LEVELS:
        raise RegistryApiError(
            422,
            42203,
            "Invalid compatibility level. Valid values are none, backward, forward, full, "
            "backward_transitive, forward_transitive, and full_transitive",
        )
    return level.upper()


class RegistryState:
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
            raise RegistryApiError(
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
        except RegistryApiError:
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
        except RegistryApiError as exc:
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
            raise RegistryApiError(404, 40403, f"Schema {schema_id} not found") from None

    def schema_by_guid(self, guid: str) -> _Schema:
        for stored in self.schemas.values():
            if stored.guid == guid:
                return stored
        raise RegistryApiError(404, 40403, f"Schema {guid} not found")

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
            raise RegistryApiError(
                422,
                42202,
                f"The specified version '{version}' is not a valid version id. Allowed values "
                'are between [1, 2^31-1] and the string "latest"',
            )
        for candidate in versions:
            if candidate.version == number:
                return candidate
        raise RegistryApiError(404, 40402, f"Version {number} not found.")

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
            raise RegistryApiError(
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
        raise RegistryApiError(404, 40403, "Schema not found")

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
                raise RegistryApiError(
                    404,
                    40405,
                    f"Subject '{subject}' was not deleted first before being permanently deleted",
                )
            del self.subjects[subject]
            return [v.version for v in versions]
        if not live:
            raise RegistryApiError(
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
            raise RegistryApiError(
                404,
                40406,
                f"Subject '{subject}' Version {found.version} was soft deleted.Set "
                "permanent=true to delete permanently",
            )
        if permanent:
            if not found.deleted:
                raise RegistryApiError(
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
        raise RegistryApiError(
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
ROUTES: tuple[tuple[str, tuple[str, ...], str], ...] = (
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
