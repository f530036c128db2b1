"""Throughput, ratio, decode and seek benchmarks for blockgz against its peers (``make bench``)."""
