"""blockgz.runtime.process_tuning: the settings ``blockgz compress`` gives its own process."""

from __future__ import annotations

import os
import platform
import subprocess
import sys

import pytest

from blockgz.runtime.process_tuning import keep_freed_heap

PROBE = (
    "import os, sys; from blockgz.runtime.process_tuning import tune_command_process; "
    "tune_command_process(); import numpy; "
    "print(os.environ.get('OPENBLAS_NUM_THREADS'), 'numpy' in sys.modules)"
)


def _probe(**env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env={**environ, **env}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_openblas_gets_one_thread_when_the_user_chose_none():
    assert _probe() == "1 True"


def test_the_users_openblas_setting_wins():
    assert _probe(OPENBLAS_NUM_THREADS="4") == "4 True"


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_glibc_takes_the_heap_pad():
    assert keep_freed_heap() is True
