"""Talking to Kafka from anywhere in blockgz: quiet admin clients, security settings, and Kafka's
columns as Arrow types."""
