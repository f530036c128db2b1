"""``blockgz export`` takes SIGINT and SIGTERM first thing (issue 42): a stop while it starts
is recorded for the job, a second one aborts, and the handlers before it come back after."""

from __future__ import annotations

import signal

import pytest

from blockgz.cli.export import _EarlyStop


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_while_starting_is_recorded_and_a_second_one_aborts(signum):
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with _EarlyStop() as stop:
        assert not stop.event.is_set() and not stop.signalled
        signal.raise_signal(signum)  # to this thread: handled before the next line
        assert stop.event.is_set() and stop.signalled
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signum)
    assert {s: signal.getsignal(s) for s in before} == before
