"""A time window that holds no record is an error, as a reversed ``--offsets`` window is
(issue 42): ``blockgz restore`` said "0 records" with exit 0."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from blockgz.cli import main
from blockgz.errors import ConfigError
from blockgz.reader.restore.request import RestoreRequest
from blockgz.reader.restore.send import SendSettings


@pytest.mark.parametrize(("low", "high"), [(2_000, 1_000), (1_000, 1_000)])
def test_a_window_ending_at_or_before_its_start_is_refused(low, high):
    with pytest.raises(ConfigError, match="is not before --to-time"):
        RestoreRequest(from_time=low, to_time=high)
    with pytest.raises(ConfigError, match="is not before --to-time"):
        SendSettings(topic="t", to_topic="u", from_time=low, to_time=high)


def test_open_and_proper_windows_pass():
    assert RestoreRequest(from_time=1_000, to_time=1_001).to_time == 1_001
    assert RestoreRequest(from_time=1_000).to_time is None
    assert SendSettings(topic="t", to_topic="u", to_time=5).to_time == 5


def test_restore_refuses_a_reversed_time_window_in_one_line(tmp_path):
    result = CliRunner().invoke(
        main,
        ["restore", str(tmp_path), "t", "--from-time", "2026-11-02T00:00:00Z",
         "--to-time", "2026-11-01T00:00:00Z", "--dry-run"],
    )  # fmt: skip
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "--from-time 2026-11-02T00:00:00.000+00:00 is not before --to-time" in lines[0]
