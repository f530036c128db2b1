"""Shared fixtures, and the one rule that splits the suite.

``tests/unit/`` holds tests of pure logic and local files; ``tests/integration/`` holds tests
that talk to a real local server (S3, Kafka, Spark). Every test under ``integration/`` is
marked ``integration`` here, so ``-m "not integration"`` runs the unit tests alone. Servers are
started once per session on free loopback ports. Helpers shared with the benchmarks live in
``testkit/``.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from hypothesis import settings

from testkit.servers import fresh_bucket, running

_INTEGRATION = Path(__file__).parent / "integration"

# Property tests check what is computed, not how fast: a shared 2-core machine makes an example
# slow now and then (the first one pays for imports and warm-ups), which is no failure.
settings.register_profile("blockgz", deadline=None)
settings.load_profile("blockgz")


def pytest_configure(config) -> None:
    # The tests' Spark drivers (this process's session and every `blockgz export` a test
    # launches) live for seconds to minutes: the client compiler alone and the serial collector
    # start them ~2 s sooner each (measured: session + first job 11.6 s -> 9.7 s). Production
    # runs keep the JVM's defaults.
    os.environ.setdefault("SPARK_SUBMIT_OPTS", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
    # Every option blockgz's code reads must be declared (blockgz.option_defs): reads of names
    # no set of ALL_OPTION_SETS declares are recorded while the tests run, and fail the test
    # that made them.
    from blockgz import option_defs
    from blockgz.cli.option_sets import ALL_OPTIONS

    option_defs.track_reads_against(ALL_OPTIONS)


@pytest.fixture(autouse=True)
def _only_declared_options_are_read():
    from blockgz import option_defs

    option_defs.UNDECLARED_READS.clear()
    yield
    undeclared = sorted(option_defs.UNDECLARED_READS)
    option_defs.UNDECLARED_READS.clear()
    assert not undeclared, f"options read but not declared (module, name): {undeclared}"


def pytest_collection_modifyitems(items) -> None:
    for item in items:
        if _INTEGRATION in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def moto_s3():
    """A real moto S3 server on a free loopback port, for the whole test session."""
    from testkit.s3 import MotoS3

    with MotoS3() as server:
        yield server


@pytest.fixture(scope="session")
def seaweed_s3():
    """SeaweedFS's S3 gateway (``weed mini``) on free loopback ports, for the whole session."""
    from blockgz.local_servers.seaweed import SeaweedS3

    yield from running(SeaweedS3)


@pytest.fixture
def weed_bucket(seaweed_s3, request):
    """A fresh, empty SeaweedFS bucket per test (named after the test)."""
    return fresh_bucket(seaweed_s3, request, "t-")


@pytest.fixture
def weed_proxy(seaweed_s3):
    """The request-logging, fault-injecting proxy in front of SeaweedFS."""
    from testkit.s3 import FaultProxy

    with FaultProxy(seaweed_s3.endpoint_url) as proxy:
        yield proxy


@pytest.fixture(scope="session")
def ceph_s3():
    """Ceph's radosgw over a one-node in-memory cluster on loopback, for the whole session."""
    from testkit.ceph import CephRgwS3

    yield from running(CephRgwS3)


@pytest.fixture
def ceph_bucket(ceph_s3, request):
    """A fresh, empty radosgw bucket per test (named after the test)."""
    return fresh_bucket(ceph_s3, request, "c-")


@pytest.fixture(scope="session")
def s3_server(seaweed_s3):
    """The S3 server of the integration tests: SeaweedFS (real ranged GETs and multipart).
    ``moto_s3`` is there for the few tests about moto itself."""
    return seaweed_s3


@pytest.fixture
def s3_proxy(s3_server):
    """A fault-injecting, request-logging proxy in front of the S3 server."""
    from testkit.s3 import FaultProxy

    with FaultProxy(s3_server.endpoint_url) as proxy:
        yield proxy


@pytest.fixture
def bucket(s3_server, request):
    """A fresh, empty bucket per test, on :func:`s3_server`; dropped afterwards (SeaweedFS
    has room for a bounded number of buckets, see :func:`testkit.s3.drop_bucket`)."""
    import hashlib
    import re

    from testkit.s3 import drop_bucket

    digest = hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:8]
    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:45].strip("-") + "-" + digest
    client = s3_server.client()
    client.create_bucket(Bucket=name)
    yield name
    drop_bucket(client, name)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory):
    """A Spark standalone master and one worker on loopback, for the whole session.

    The nodes have no AWS variables of the driver; their profile file is
    ``spark_cluster.credentials_file`` (empty until a test writes a profile into it).
    """
    pytest.importorskip("pyspark", reason="pyspark is in the [spark] extra")
    from blockgz.local_servers.spark_cluster import LocalSparkCluster

    reason = LocalSparkCluster.unavailable_reason()
    if reason:
        pytest.skip(reason)
    credentials = tmp_path_factory.mktemp("node-aws") / "credentials"
    credentials.write_text("")
    node_env = {
        "AWS_SHARED_CREDENTIALS_FILE": str(credentials),
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_EC2_METADATA_DISABLED": "true",  # no instance role to wait for on loopback
    }
    with LocalSparkCluster(workers=1, cores=2, node_env=node_env) as cluster:
        cluster.credentials_file = credentials
        yield cluster


@pytest.fixture(scope="session")
def kafka():
    """Apache Kafka 4 (KRaft, one node) on free loopback ports, for the whole session.

    Topics outlive tests: give each test its own topic names. The jars come from Maven Central
    on first use (cached in ``~/.cache/blockgz/jars``).
    """
    from blockgz.local_servers.apache_kafka import ApacheKafka

    yield from running(ApacheKafka)


@pytest.fixture(scope="session")
def secured_kafka():
    """Apache Kafka 4 with SASL_SSL listeners (SCRAM-SHA-512, a test CA) and the
    StandardAuthorizer (:class:`testkit.secured_kafka.SecuredKafka`), started
    only when a test asks for it (~7 s). Its PLAINTEXT listener is a super user's, for
    producing test data; principals and their ACLs are each test's own
    (:meth:`~testkit.secured_kafka.SecuredKafka.add_user`)."""
    from testkit.secured_kafka import SecuredKafka

    yield from running(SecuredKafka)


@pytest.fixture(scope="session")
def tls_ca(tmp_path_factory):
    """A CA for the session's TLS servers, a server certificate it signed, and a CA that signed
    nothing (:func:`testkit.certs.make_test_ca`)."""
    from testkit.certs import make_test_ca

    return make_test_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="session")
def secure_s3(tls_ca):
    """SeaweedFS over HTTPS (the session's CA) with per-action policy users
    (:func:`testkit.secure_s3.secure_users`)."""
    from blockgz.local_servers.seaweed import SeaweedS3, TlsFiles
    from testkit.secure_s3 import secure_users

    tls = TlsFiles(tls_ca.cert_file, tls_ca.key_file, tls_ca.ca_file)
    yield from running(SeaweedS3, tls=tls, users=secure_users())


@pytest.fixture
def secure_bucket(secure_s3, request):
    """A fresh ``sec-*`` bucket on :func:`secure_s3` (the users' policies name those)."""
    import hashlib
    import re

    from testkit.s3 import drop_bucket
    from testkit.secure_s3 import BUCKETS

    digest = hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:12]
    name = BUCKETS + re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:30] + "-" + digest
    client = secure_s3.client()
    client.create_bucket(Bucket=name)
    yield name
    drop_bucket(client, name)


@pytest.fixture(scope="session")
def registry():
    """The loopback Schema Registry stand-in, for the whole session (subjects are per topic)."""
    from testkit.schema_registries import FaultyRegistry

    with FaultyRegistry() as server:
        yield server


@pytest.fixture(scope="session")
def apicurio():
    """Apicurio Registry (a real registry, Confluent's API at ``/apis/ccompat/v7``), for the
    whole session; skipped where it cannot be built or started."""
    from testkit.apicurio import ApicurioRegistry

    reason = ApicurioRegistry.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    registry = ApicurioRegistry()
    try:
        registry.start()
    except (RuntimeError, TimeoutError, OSError) as exc:
        pytest.skip(f"Apicurio Registry cannot start here: {exc}")
    with registry:
        yield registry


@pytest.fixture(scope="session")
def spark():
    """One SparkSession (``local[2,3]``) for the whole session, blockgz's data sources registered.

    Built by :func:`blockgz.spark_session.spark_session`, so tests run with the product's
    settings.
    """
    pytest.importorskip("pyspark", reason="pyspark is in the [spark] extra")
    pytest.importorskip("pyarrow", reason="pyarrow is in the [spark] extra")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17+ (no java on PATH and no JAVA_HOME)")
    session = _test_spark_session()
    yield session
    session.stop()


def _test_spark_session():
    try:
        from blockgz.spark_session import spark_session

        return spark_session("local[2,3]", app_name="blockgz-tests")
    except ImportError as exc:  # the blockgz sink is not there yet: register the source alone
        if exc.name != "blockgz.sink.write.datasource":
            raise
        from pyspark.sql import SparkSession

        from blockgz.sink.kafka.source import KafkaDataSource

        session = SparkSession.getActiveSession()
        assert session is not None
        session.dataSource.register(KafkaDataSource)
        return session
