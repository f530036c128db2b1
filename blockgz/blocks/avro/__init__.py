"""Avro object container files as blocks: each container block indexed so it can be fetched and
decoded alone."""
