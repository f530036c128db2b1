"""The REST endpoints of the Schema Registry stand-in, as plain calls on its state.

Each endpoint of :class:`RegistryEndpoints` takes the path's captures, then the query and the
JSON body, and returns the JSON answer or raises :class:`RegistryApiError` with the registry's
error code; :data:`ROUTES` maps methods and paths to them.
:mod:`blockgz.local_servers.schema_registry` serves them over HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from blockgz.local_servers.schema_registry_state import (
    RegistryApiError,
    RegistryState,
    Version,
    check_level,
    page,
    query_flag,
    subject_not_found,
)


class RegistryEndpoints:
    """The endpoints, answered from one :class:`RegistryState`."""

    def __init__(self, state: RegistryState) -> None:
        self.state = state

    def root(self, query: Mapping[str, str], body: Any) -> Any:
        return {}

    def schema_types(self, query: Mapping[str, str], body: Any) -> Any:
        return ["AVRO"]

    def get_schema(self, schema_id: str, query: Mapping[str, str], body: Any) -> Any:
        stored = self.state.schema(schema_id)
        return {**stored.body(), "guid": stored.guid}

    def get_schema_text(self, schema_id: str, query: Mapping[str, str], body: Any) -> Any:
        return json.loads(self.state.schema(schema_id).text)

    def get_schema_by_guid(self, guid: str, query: Mapping[str, str], body: Any) -> Any:
        stored = self.state.schema_by_guid(guid)
        return {**stored.body(), "id": stored.id, "guid": stored.guid}

    def _uses(self, schema_id: str, query: Mapping[str, str]) -> list[tuple[str, int]]:
        stored = self.state.schema(schema_id)
        deleted = query_flag(query, "deleted")
        wanted = query.get("subject")
        return [
            (subject, v.version)
            for subject, versions in sorted(self.state.subjects.items())
            if wanted in (None, "", subject)
            for v in versions
            if v.schema_id == stored.id and (deleted or not v.deleted)
        ]

    def schema_versions(self, schema_id: str, query: Mapping[str, str], body: Any) -> Any:
        uses = self._uses(schema_id, query)
        return page([{"subject": s, "version": v} for s, v in uses], query)

    def schema_subjects(self, schema_id: str, query: Mapping[str, str], body: Any) -> Any:
        return page(list(dict.fromkeys(s for s, _ in self._uses(schema_id, query))), query)

    def list_subjects(self, query: Mapping[str, str], body: Any) -> Any:
        prefix = query.get("subjectPrefix", "")
        if query_flag(query, "deleted_only"):
            keep: Callable[[list[Version]], bool] = lambda vs: any(v.deleted for v in vs)  # noqa: E731
        elif query_flag(query, "deleted"):
            keep = bool
        else:
            keep = lambda vs: any(not v.deleted for v in vs)  # noqa: E731
        names = sorted(
            s for s, vs in self.state.subjects.items() if s.startswith(prefix) and keep(vs)
        )
        return page(names, query)

    def list_versions(self, subject: str, query: Mapping[str, str], body: Any) -> Any:
        versions = self.state.subjects.get(subject, [])
        if query_flag(query, "deleted_only"):
            numbers = [v.version for v in versions if v.deleted]
        else:
            numbers = [v.version for v in versions if query_flag(query, "deleted") or not v.deleted]
        if not numbers and not self.state.live(subject):
            raise subject_not_found(subject)
        return page(numbers, query)

    def register(self, subject: str, query: Mapping[str, str], body: Any) -> Any:
        text, references, parsed, key = self.state.parse(body)
        live = self.state.live(subject)
        for version in live:
            if self.state.schemas[version.schema_id].key == key:  # already there: idempotent
                stored = self.state.schemas[version.schema_id]
                return {
                    "id": stored.id,
                    "version": version.version,
                    "subject": subject,
                    "guid": stored.guid,
                }
        problems = self.state.incompatibilities(self.state.level(subject), parsed, live)
        if problems:
            raise RegistryApiError(
                409,
                409,
                f'Schema being registered is incompatible with an earlier schema for subject "'
                f'{subject}", details: [{", ".join(problems)}]',
            )
        schema_id = self.state.intern(text, references, parsed, key)
        versions = self.state.subjects.setdefault(subject, [])
        number = max((v.version for v in versions), default=0) + 1
        versions.append(Version(number, schema_id))
        return {
            "id": schema_id,
            "version": number,
            "subject": subject,
            "guid": self.state.schemas[schema_id].guid,
        }

    def lookup(self, subject: str, query: Mapping[str, str], body: Any) -> Any:
        deleted = query_flag(query, "deleted")
        versions = [v for v in self.state.subjects.get(subject, []) if deleted or not v.deleted]
        if not versions:
            raise subject_not_found(subject)
        _, _, _, key = self.state.parse(body)
        for version in reversed(versions):
            if self.state.schemas[version.schema_id].key == key:
                return self.state.version_body(subject, version)
        raise RegistryApiError(404, 40403, "Schema not found")

    def get_version(self, subject: str, version: str, query: Mapping[str, str], body: Any) -> Any:
        found = self.state.find_version(subject, version, deleted=query_flag(query, "deleted"))
        return self.state.version_body(subject, found)

    def get_version_schema(
        self, subject: str, version: str, query: Mapping[str, str], body: Any
    ) -> Any:
        found = self.state.find_version(subject, version, deleted=query_flag(query, "deleted"))
        return json.loads(self.state.schemas[found.schema_id].text)

    def delete_subject(self, subject: str, query: Mapping[str, str], body: Any) -> Any:
        versions = self.state.subjects.get(subject)
        if not versions:
            raise subject_not_found(subject)
        live = [v for v in versions if not v.deleted]
        if query_flag(query, "permanent"):
            if live:
                raise RegistryApiError(
                    404,
                    40405,
                    f"Subject '{subject}' was not deleted first before being permanently deleted",
                )
            del self.state.subjects[subject]
            return [v.version for v in versions]
        if not live:
            raise RegistryApiError(
                404,
                40404,
                f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
            )
        for version in live:
            version.deleted = True
        self.state.subject_levels.pop(subject, None)
        return [v.version for v in live]

    def delete_version(
        self, subject: str, version: str, query: Mapping[str, str], body: Any
    ) -> Any:
        permanent = query_flag(query, "permanent")
        numbered = version not in ("latest", "-1")  # "latest" means the latest live version
        found = self.state.find_version(subject, version, deleted=permanent or numbered)
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
            self.state.subjects[subject].remove(found)
            if not self.state.subjects[subject]:
                del self.state.subjects[subject]
        else:
            found.deleted = True
        return found.version

    def get_config(self, query: Mapping[str, str], body: Any) -> Any:
        return {"compatibilityLevel": self.state.global_level}

    def put_config(self, query: Mapping[str, str], body: Any) -> Any:
        if "compatibility" not in body:
            return {}
        self.state.global_level = check_level(body["compatibility"])
        return {"compatibility": self.state.global_level}

    def delete_config(self, query: Mapping[str, str], body: Any) -> Any:
        old, self.state.global_level = self.state.global_level, self.state.default_level
        return {"compatibilityLevel": old}

    def get_subject_config(self, subject: str, query: Mapping[str, str], body: Any) -> Any:
        if subject in self.state.subject_levels:
            return {"compatibilityLevel": self.state.subject_levels[subject]}
        if query_flag(query, "defaultToGlobal"):
            return {"compatibilityLevel": self.state.global_level}
        raise RegistryApiError(
            404,
            40408,
            f"Subject '{subject}' does not have subject-level compatibility configured",
        )

    def put_subject_config(self, subject: str, query: Mapping[str, str], body: Any) -> Any:
        if "compatibility" not in body:
            return {}
        self.state.subject_levels[subject] = check_level(body["compatibility"])
        return {"compatibility": self.state.subject_levels[subject]}

    def delete_subject_config(self, subject: str, query: Mapping[str, str], body: Any) -> Any:
        if subject not in self.state.subjects and subject not in self.state.subject_levels:
            raise subject_not_found(subject)
        old = self.get_subject_config(subject, {}, None)
        del self.state.subject_levels[subject]
        return old

    def test_latest_or_version(
        self, subject: str, version: str, query: Mapping[str, str], body: Any
    ) -> Any:
        _, _, parsed, _ = self.state.parse(body)
        if version in ("latest", "-1") and not self.state.live(subject):
            problems: list[str] = []  # nothing to be incompatible with
        else:
            old = self.state.find_version(subject, version)
            problems = self.state.incompatibilities(
                self.state.level(subject), parsed, [old], transitive=False
            )
        return _compat_answer(problems, query)

    def test_all_versions(self, subject: str, query: Mapping[str, str], body: Any) -> Any:
        _, _, parsed, _ = self.state.parse(body)
        problems = self.state.incompatibilities(
            self.state.level(subject), parsed, self.state.live(subject)
        )
        return _compat_answer(problems, query)

    def mode(self, *captures_query_body: Any) -> Any:
        return {"mode": "READWRITE"}

    def contexts(self, query: Mapping[str, str], body: Any) -> Any:
        return ["."]

    def associations(self, namespace: str, name: str, query: Mapping[str, str], body: Any) -> Any:
        return []  # none can be made here, so the serdes fall back to the topic strategy


def _compat_answer(problems: list[str], query: Mapping[str, str]) -> dict[str, Any]:
    answer: dict[str, Any] = {"is_compatible": not problems}
    if query_flag(query, "verbose"):
        answer["messages"] = problems
    return answer


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
