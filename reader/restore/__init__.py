"""``blockgz restore``: archived topics back into Kafka, with their tombstones, positions and
consumer groups; resumable after a kill, exactly once."""
