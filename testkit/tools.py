"""External tools for interop tests and peer benchmarks."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest


def require_tool(name: str) -> str:
    """Path of an external command-line tool (on PATH or in the venv's bin), or skip saying
    how to get it."""
    path = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if path is None:
        pytest.skip(f"{name} is not installed (scripts/install-tools installs it)")
    return path
