"""External tools for interop tests and peer benchmarks."""

from __future__ import annotations

import shutil

import pytest


def require_tool(name: str) -> str:
    """Path of an external command-line tool, or skip saying how to get it."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (scripts/install-tools installs it)")
    return path
