"""The Parquet record format: Arrow schemas of Kafka records, the writer, and column reads."""
