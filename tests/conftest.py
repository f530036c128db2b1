"""Shared fixtures. Servers (moto S3, Tansu Kafka, Spark) join here as the product grows."""

from __future__ import annotations

import shutil

import pytest


def require_tool(name: str) -> str:
    """Path of an external tool, or skip the test with the install hint."""
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (scripts/install-tools installs it)")
    return path
