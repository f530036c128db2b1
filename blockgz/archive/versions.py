"""Document versions: what a blockgz reads from a newer blockgz, and what it refuses.

Every JSON document of the archive's commit log (manifests, catalog roots) says
``"version": <major>``. A newer blockgz may add fields without raising it: older readers keep
or ignore what they do not know. A change an older reader would misread raises the major
version, and an older reader then refuses the document with a message that says to upgrade,
instead of calling it corrupt.

>>> check_major({"version": 1}, 1, what="manifest", source="m.json")
1
>>> check_major({}, 1, what="manifest", source="m.json")
1
>>> check_major({"version": "1.3"}, 1, what="manifest", source="m.json")
1
>>> check_major({"version": 2}, 1, what="manifest", source="m.json")
Traceback (most recent call last):
...
blockgz.errors.NewerVersionError: m.json: manifest version 2 was written by a newer blockgz \
(this one reads up to version 1); upgrade blockgz to read it
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from blockgz.errors import NewerVersionError


def check_major(
    doc: Mapping[str, Any], newest: int, *, what: str, source: str, default: int = 1
) -> int:
    """The document's ``version`` (``default`` when it has none); a
    :class:`~blockgz.errors.NewerVersionError` when it is above ``newest``."""
    version = doc.get("version", default)
    text = str(version)
    if type(version) is bool or not (type(version) is int or isinstance(version, str)):
        raise ValueError(f"version {version!r} is not a number")
    if not text.split(".")[0].isdigit():
        raise ValueError(f"version {version!r} is not a number")
    major = int(text.split(".")[0])
    if major > newest:
        raise NewerVersionError(
            f"{source}: {what} version {version} was written by a newer blockgz (this one "
            f"reads up to version {newest}); upgrade blockgz to read it"
        )
    return major
