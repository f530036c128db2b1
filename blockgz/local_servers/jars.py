"""Moved to :mod:`blockgz.jars` (the export resolves Spark's Kafka connector with it too)."""

from blockgz.jars import Artifact, cache_root, ivy_jar, resolve, resolved

__all__ = ["Artifact", "cache_root", "ivy_jar", "resolve", "resolved"]
