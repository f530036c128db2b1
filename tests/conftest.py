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


@pytest.fixture(scope="session")
def moto_s3():
    """A real moto S3 server on a free loopback port, for the whole test session."""
    from .s3_servers import MotoS3

    with MotoS3() as server:
        yield server


@pytest.fixture
def s3_proxy(moto_s3):
    """A fault-injecting, request-logging proxy in front of the S3 server."""
    from .s3_servers import FaultProxy

    with FaultProxy(moto_s3.endpoint_url) as proxy:
        yield proxy


@pytest.fixture
def bucket(moto_s3, request):
    """A fresh, empty bucket per test."""
    import re

    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:50].strip("-") + "-b"
    moto_s3.client().create_bucket(Bucket=name)
    return name


def s3_options(endpoint_url: str, **extra) -> dict:
    """Options for blockgz's S3 store against a test server (fast retries)."""
    return {
        "store.url": endpoint_url,
        "s3.region": "us-east-1",
        "aws.access.key.id": "testing",
        "aws.secret.access.key": "testing",
        "s3.retry.backoff.ms": "1",
        **extra,
    }
