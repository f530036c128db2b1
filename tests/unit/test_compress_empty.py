"""``blockgz compress`` of an empty input (issue 42): a valid gzip file (one empty member, which
``gzip -t`` accepts) and an index of no chunks whose length covers it; the index rebuilt from
the file says the same."""

from __future__ import annotations

import gzip
import json
import subprocess

import pytest
from click.testing import CliRunner

from blockgz.blocks.codecs.families import EMPTY_GZIP_MEMBER
from blockgz.cli import main


def _compress(tmp_path, *args: str, stdin: bytes | None = None):
    result = CliRunner().invoke(main, ["compress", *args], input=stdin)
    assert result.exit_code == 0, result.output
    return result


@pytest.mark.parametrize("how", ["file", "stdin"])
def test_an_empty_input_is_a_valid_empty_gzip_with_an_index_of_no_chunks(tmp_path, how):
    source, out = tmp_path / "empty.json", tmp_path / "empty.json.gz"
    source.write_bytes(b"")
    if how == "file":
        _compress(tmp_path, str(source))
    else:
        _compress(tmp_path, "-", "-o", str(out), stdin=b"")
    data = out.read_bytes()
    assert data == EMPTY_GZIP_MEMBER
    assert subprocess.run(["gzip", "-t", str(out)], capture_output=True).returncode == 0
    assert gzip.decompress(data) == b""
    index = json.loads((tmp_path / ".empty.json.index.json").read_text())
    assert index["chunks"] == [] and index["record_count"] == 0
    assert index["byte_length"] == len(data) == index["object"]["size"]
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0 and "ok, 0 blocks, 0 records" in verified.output


def test_the_rebuilt_index_of_an_empty_gzip_covers_its_bytes(tmp_path):
    out = tmp_path / "e.json.gz"
    out.write_bytes(gzip.compress(b"", mtime=0))  # another writer's empty member
    rebuilt = CliRunner().invoke(main, ["index", str(out)])
    assert rebuilt.exit_code == 0, rebuilt.output
    index = json.loads((tmp_path / ".e.json.index.json").read_text())
    assert index["chunks"] == [] and index["byte_length"] == out.stat().st_size
    verified = CliRunner().invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output
