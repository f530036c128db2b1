"""The Spark side of blockgz: Kafka to S3 in the layout of Confluent's S3 sink (in progress)."""
