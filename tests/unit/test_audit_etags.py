"""Which committed files an audit HEADs for their CRC-32 (issue 44): none whose listed ETag is
the one the export recorded; every one whose ETag moved or was not recorded."""

from __future__ import annotations

import pytest

from blockgz.reader.audit.context import AuditedObject
from blockgz.reader.audit.object_checks import needs_stored_crc
from blockgz.store.base import ObjectInfo
from blockgz.written.files import WrittenFile


def _file(**extra) -> WrittenFile:
    return WrittenFile("t/t+0+0.json.gz", "t", 0, "", 0, 9, 10, 50, 90, **extra)


@pytest.mark.parametrize(
    ("recorded", "listed", "crc32", "intact", "asked"),
    [
        ("e1", "e1", 7, True, False),  # the version the export wrote: no HEAD
        ("e1", "e2", 7, True, True),  # rewritten since: HEAD, checked as before
        ("e1", None, 7, True, True),  # the listing gave no ETag
        (None, "e1", 7, True, True),  # an older manifest: not recorded
        (None, None, 7, True, True),
        ("e1", "e2", None, True, False),  # no CRC-32 committed: nothing to compare
        ("e1", "e2", 7, False, False),  # already damage (gone or wrong size)
    ],
)
def test_the_head_is_skipped_only_for_the_recorded_etag(recorded, listed, crc32, intact, asked):
    obj = AuditedObject(_file(crc32=crc32, etag=recorded), ObjectInfo("k", 50, etag=listed))
    obj.intact = intact
    assert needs_stored_crc(obj) is asked


def test_the_etag_is_written_only_when_recorded_and_read_back():
    assert "etag" not in _file().to_dict()
    assert WrittenFile.from_dict(_file().to_dict()).etag is None  # an old manifest
    doc = _file(etag="abc-2").to_dict()
    assert doc["etag"] == "abc-2" and WrittenFile.from_dict(doc).etag == "abc-2"
