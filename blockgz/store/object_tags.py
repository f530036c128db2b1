"""Object tags: the offsets Confluent's connector tags each committed object with
(``s3.object.tagging``) and the user's extra ``key:value`` pairs, checked against S3's limits.

>>> tag_pairs("team:data, env:prod")
(('team', 'data'), ('env', 'prod'))
>>> tag_pairs("endOffset:9")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
blockgz.errors.ConfigError: s3.object.tagging.key.value.pairs: 'endOffset' is one of the ...
"""

from __future__ import annotations

import re
from typing import Any

from blockgz.errors import ConfigError

#: The tags Confluent's connector puts on each object it commits (``s3.object.tagging``).
OFFSET_TAGS = ("startOffset", "endOffset", "recordCount")
MAX_TAGS = 10  # S3's limit per object
TAGGING_ERROR_BEHAVIORS = ("ignore", "fail")
_TAG_TEXT = re.compile(r"^[\w\s+\-=.:/@]*$")  # the characters S3 allows in a tag


def tagging_fields(tagging: bool, pairs_text: str, on_error: str) -> dict[str, Any]:
    """``s3.object.tagging``, its extra tags (checked against S3's limits) and
    ``s3.object.behavior.on.tagging.error``, as :class:`~blockgz.store.settings.S3Settings`
    fields."""
    pairs = tag_pairs(pairs_text)
    if pairs and not tagging:
        raise ConfigError(
            "s3.object.tagging.key.value.pairs: only used with s3.object.tagging=true"
        )
    return {
        "object_tagging": tagging,
        "object_tags": pairs,
        "on_tagging_error": on_error,
    }


def tag_pairs(text: str) -> tuple[tuple[str, str], ...]:
    """``s3.object.tagging.key.value.pairs`` as (key, value) pairs, in order."""
    name = "s3.object.tagging.key.value.pairs"
    pairs: dict[str, str] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        key, sep, value = (s.strip() for s in item.partition(":"))
        if not sep or not key:
            raise ConfigError(f"{name}: {item!r} is not key:value (e.g. team:data,env:prod)")
        if key in OFFSET_TAGS:
            raise ConfigError(
                f"{name}: {key!r} is one of the offset tags ({', '.join(OFFSET_TAGS)})"
            )
        if key in pairs:
            raise ConfigError(f"{name}: tag {key!r} is given twice")
        if len(key) > 128 or len(value) > 256:
            raise ConfigError(
                f"{name}: {item!r}: S3 allows keys of 128 and values of 256 characters"
            )
        if not (_TAG_TEXT.match(key) and _TAG_TEXT.match(value)):
            raise ConfigError(
                f"{name}: {item!r}: S3 tags allow letters, digits, spaces and + - = . _ : / @"
            )
        pairs[key] = value
    if len(pairs) + len(OFFSET_TAGS) > MAX_TAGS:
        raise ConfigError(
            f"{name}: {len(pairs)} tags; S3 allows {MAX_TAGS} per object, "
            f"{len(OFFSET_TAGS)} of them the offset tags, so at most {MAX_TAGS - len(OFFSET_TAGS)}"
        )
    return tuple(pairs.items())
