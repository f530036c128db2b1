"""Spark's own S3 access (``s3a``) for the read-side benchmark, so both readers read S3.

``spark.read.json`` reads ``s3a://`` through ``hadoop-aws``, which Spark does not ship: it is
resolved from Maven Central with :mod:`blockgz.jars` (Ivy brings its runtime dependencies: the
AWS SDK v2 ``bundle``, 686 MB, the analytics accelerator and wildfly-openssl) and put on the
driver's classpath when the session starts. Benchmarks only: no part of blockgz uses ``s3a``.

>>> HADOOP_AWS.folder_name
'org.apache.hadoop/hadoop-aws-3.5.0'
>>> s3a_conf("http://127.0.0.1:9000")["fs.s3a.endpoint"]
'http://127.0.0.1:9000'
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from blockgz.jars import Artifact
from blockgz.local_servers.moto_s3 import ACCESS_KEY, REGION, SECRET_KEY

#: The ``hadoop-aws`` of the Hadoop client pyspark ships (``hadoop-client-api-3.5.0.jar``):
#: the two must be the same release.
HADOOP_AWS = Artifact("org.apache.hadoop", "hadoop-aws", "3.5.0")


def pyspark_hadoop_version() -> str | None:
    """The Hadoop client version in pyspark's jars, or ``None`` without pyspark."""
    try:
        import pyspark
    except ImportError:
        return None
    found = sorted(Path(pyspark.__file__).parent.joinpath("jars").glob("hadoop-client-api-*.jar"))
    return found[-1].stem.removeprefix("hadoop-client-api-") if found else None


def s3a_jars() -> tuple[list[Path], str | None]:
    """``hadoop-aws`` and its dependencies (fetched on first use, ~20 s for 690 MB), or no
    jars and why not."""
    from blockgz.errors import JarResolutionError
    from blockgz.jars import resolve

    hadoop = pyspark_hadoop_version()
    if hadoop != HADOOP_AWS.version:
        return [], f"pyspark ships Hadoop {hadoop}, the benchmark pins hadoop-aws {HADOOP_AWS}"
    try:
        return resolve(HADOOP_AWS), None
    except JarResolutionError as exc:
        return [], str(exc)


def s3a_session_conf(jars: list[Path]) -> dict[str, str]:
    """Spark settings that put ``jars`` on the driver's classpath at JVM start.

    ``spark.driver.extraClassPath`` rather than ``spark.jars``: in local mode the executor
    fetches every ``spark.jars`` entry through the driver's file server into its work
    directory, a copy of the 686 MB bundle per session, while the driver *is* the executor.
    """
    return {"spark.driver.extraClassPath": os.pathsep.join(str(j) for j in jars)} if jars else {}


def s3a_conf(endpoint_url: str) -> dict[str, str]:
    """Hadoop settings for ``s3a://`` against a local server (plain HTTP, path-style).

    The input stream is pinned to ``classic`` (one GET from the position read to the end of
    the object, what Hadoop 3.4 and earlier do): 3.5.0's default, ``analytics`` (the AWS
    Analytics Accelerator), keeps what it fetched in the JVM's memory across queries: a second
    full scan of a 21 MB archive came from that cache (0 bytes from S3), a cache blockgz's
    reader does not keep and a cold read does not have.
    """
    return {
        "fs.s3a.input.stream.type": "classic",
        "fs.s3a.endpoint": endpoint_url,
        "fs.s3a.endpoint.region": REGION,
        "fs.s3a.path.style.access": "true",
        "fs.s3a.connection.ssl.enabled": "false",
        "fs.s3a.access.key": ACCESS_KEY,
        "fs.s3a.secret.key": SECRET_KEY,
        "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
    }


def set_hadoop_conf(spark, settings: dict[str, str]) -> None:
    """Set ``settings`` on the session's Hadoop configuration (before the first ``s3a`` use:
    Hadoop caches a file system per bucket)."""
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in settings.items():
        conf.set(key, value)


def upload_tree(client, root: Path, bucket: str, prefix: str) -> int:
    """Every file under ``root`` but its ``done`` marker to ``bucket`` under ``prefix``
    (key = prefix + path relative to root); returns the bytes uploaded."""
    from boto3.s3.transfer import TransferConfig

    files = [p for p in sorted(root.rglob("*")) if p.is_file() and p.name != "done"]
    transfer = TransferConfig(multipart_chunksize=64 << 20, max_concurrency=2)

    def put(path: Path) -> int:
        key = prefix + path.relative_to(root).as_posix()
        client.upload_file(str(path), bucket, key, Config=transfer)
        return path.stat().st_size

    with ThreadPoolExecutor(2) as pool:
        return sum(pool.map(put, files))


def s3a_spark(app_name: str, missing: dict[str, str | None]):
    """The benchmarks' ``local[2,3]`` SparkSession with ``s3a`` set up (a pytest fixture's
    body: yields the session, stops it after); ``missing["missing"]`` says why s3a is absent."""
    import shutil

    import pytest

    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17+")
    from blockgz.spark_session import spark_session

    jars, missing["missing"] = s3a_jars()
    session = spark_session("local[2,3]", app_name=app_name, conf=s3a_session_conf(jars))
    yield session
    session.stop()
