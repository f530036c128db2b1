"""Apicurio Registry 2.4.2.Final, built from Maven Central parts and run on loopback in memory.

Apicurio serves Confluent's Schema Registry API under ``/apis/ccompat/v7``, so it is a real
registry (not `LocalSchemaRegistry`'s stand-in) that confluent-kafka's ``SchemaRegistryClient``,
``AvroSerializer`` and ``AvroDeserializer`` talk to unchanged; `ApicurioRegistry.url` is that
API's root.

Maven Central has no runnable Apicurio: ``io.apicurio:apicurio-registry-app`` is the Quarkus
application's classes before Quarkus's build step. So the first start writes a small Maven
project under ``$BLOCKGZ_JAR_CACHE/apicurio/<version>/`` that unpacks the app's classes as its
own and runs ``quarkus-maven-plugin:build`` (Maven is needed; Ivy cannot run that step), giving
``apicurio-wrap-1-runner.jar`` and ``lib/`` (~150 MB, with a private Maven repository of
~230 MB beside it: ~470 MB in all; a cold build took 40 s here), kept for later starts.
Only 2.4.2.Final builds from the Central reachable here (checked in November 2026): for 3.3.x,
``apicurio-registry-config-index`` 3.3.x and most Quarkus 3.33.3.1 deployment jars are not
served, the 3.0.9 and 3.3.2 parent POMs are missing, and 2.6.13.Final lacks several of its own
modules. 2.4.2.Final lacks two things: ``org.everit.json.schema`` (a JitPack artifact, replaced
by ``com.github.erosb:everit-json-schema``, the same classes) and the deployment half of
``apicurio-common-app-components-config-index`` 0.1.18.Final: the project installs the served
0.1.10.Final deployment jar under that version (its one build step calls the same recorder
method, unchanged in 0.1.18).

Apicurio's ccompat API differs from Confluent's in the error codes: a schema refused as
incompatible is HTTP 409 with ``error_code`` 0 (Confluent: 409). Started in about 7 s, with an
RSS of about 220 MB at ``-Xmx256m``.

Example (builds and starts a JVM, so not a doctest)::

    with ApicurioRegistry() as registry:
        client = SchemaRegistryClient({"url": registry.url})
        schema_id = client.register_schema("orders-value", Schema(avsc, "AVRO"))
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO, Self

from blockgz.jars import cache_root
from blockgz.local_servers.ports import LOOPBACK, StartStop, die_with_parent, free_port

VERSION = "2.4.2.Final"
QUARKUS = "2.16.4.Final"
#: The config-index extension's version 2.4.2.Final uses, and the published deployment jar.
_CONFIG_INDEX = "0.1.18.Final"
_CONFIG_INDEX_DEPLOYMENT = "0.1.10.Final"
#: Seconds the first Maven build may take (a first download of ~230 MB).
BUILD_TIMEOUT_S = 1200
#: Seconds the JVM may take to answer (about 7 s on 2 cores).
START_TIMEOUT_S = 90
CCOMPAT = "/apis/ccompat/v7"
_RUNNER = "apicurio-wrap-1-runner.jar"

_SETTINGS = """<settings><mirrors><mirror><id>central-only</id><mirrorOf>*</mirrorOf>
<url>https://repo1.maven.org/maven2</url></mirror></mirrors></settings>
"""

# The config-index deployment jar Central lacks, as 0.1.10.Final's jar under 0.1.18.Final.
_STUB_POM = f"""<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>io.apicurio</groupId>
<artifactId>apicurio-common-app-components-config-index-deployment</artifactId>
<version>{_CONFIG_INDEX}</version>
<dependencies>
<dependency><groupId>io.apicurio</groupId>
<artifactId>apicurio-common-app-components-config-definitions</artifactId>
<version>{_CONFIG_INDEX}</version></dependency>
<dependency><groupId>io.apicurio</groupId>
<artifactId>apicurio-common-app-components-config-index</artifactId>
<version>{_CONFIG_INDEX}</version></dependency>
<dependency><groupId>io.quarkus</groupId><artifactId>quarkus-arc-deployment</artifactId>
<version>{QUARKUS}</version></dependency>
</dependencies></project>
"""

_POM = f"""<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.blockgz</groupId>
  <artifactId>apicurio-wrap</artifactId>
  <version>1</version>
  <properties>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencyManagement>
    <dependencies>
      <dependency>
        <groupId>io.quarkus</groupId><artifactId>quarkus-bom</artifactId>
        <version>{QUARKUS}</version><type>pom</type><scope>import</scope>
      </dependency>
      <dependency>
        <groupId>io.apicurio</groupId><artifactId>apicurio-registry</artifactId>
        <version>{VERSION}</version><type>pom</type><scope>import</scope>
      </dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <dependency>
      <groupId>io.apicurio</groupId><artifactId>apicurio-registry-app</artifactId>
      <version>{VERSION}</version>
      <exclusions><exclusion>
        <!-- on JitPack only; com.github.erosb's build of it is on Central -->
        <groupId>com.github.everit-org.json-schema</groupId>
        <artifactId>org.everit.json.schema</artifactId>
      </exclusion></exclusions>
    </dependency>
    <dependency>
      <groupId>com.github.erosb</groupId><artifactId>everit-json-schema</artifactId>
      <version>1.14.2</version>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>3.6.1</version>
        <executions>
          <execution>
            <id>app-classes</id><phase>generate-resources</phase><goals><goal>unpack</goal></goals>
            <configuration><artifactItems><artifactItem>
              <groupId>io.apicurio</groupId><artifactId>apicurio-registry-app</artifactId>
              <version>{VERSION}</version>
              <outputDirectory>${{project.build.outputDirectory}}</outputDirectory>
            </artifactItem></artifactItems></configuration>
          </execution>
          <execution>
            <id>config-index-deployment</id><phase>generate-resources</phase>
            <goals><goal>copy</goal></goals>
            <configuration><artifactItems><artifactItem>
              <groupId>io.apicurio</groupId>
              <artifactId>apicurio-common-app-components-config-index-deployment</artifactId>
              <version>{_CONFIG_INDEX_DEPLOYMENT}</version>
              <outputDirectory>${{project.build.directory}}/stub</outputDirectory>
              <destFileName>deployment.jar</destFileName>
            </artifactItem></artifactItems></configuration>
          </execution>
        </executions>
      </plugin>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-install-plugin</artifactId>
        <version>3.1.1</version>
        <executions>
          <execution>
            <id>config-index-deployment</id><phase>process-resources</phase>
            <goals><goal>install-file</goal></goals>
            <configuration>
              <file>${{project.build.directory}}/stub/deployment.jar</file>
              <pomFile>${{project.basedir}}/stub-pom.xml</pomFile>
            </configuration>
          </execution>
        </executions>
      </plugin>
      <plugin>
        <groupId>io.quarkus</groupId><artifactId>quarkus-maven-plugin</artifactId>
        <version>{QUARKUS}</version>
        <executions><execution><goals><goal>build</goal></goals></execution></executions>
      </plugin>
    </plugins>
  </build>
</project>
"""


def build_dir() -> Path:
    """Where the Maven project and its output live (under the jar cache)."""
    return cache_root() / "apicurio" / VERSION


def runner_jar() -> Path | None:
    """The built runner jar, or ``None`` before the first build."""
    jar = build_dir() / "target" / _RUNNER
    return jar if jar.exists() else None


def build(*, mvn: str = "mvn") -> Path:
    """The runner jar, built with Maven on first use (minutes; later calls cost a stat).

    Raises ``RuntimeError`` with Maven's last lines when the build fails.
    """
    jar = runner_jar()
    if jar is not None:
        return jar
    home = build_dir()
    home.mkdir(parents=True, exist_ok=True)
    (home / "pom.xml").write_text(_POM)
    (home / "stub-pom.xml").write_text(_STUB_POM)
    (home / "settings.xml").write_text(_SETTINGS)
    command = [
        mvn, "-B", "-q", "-s", str(home / "settings.xml"),
        f"-Dmaven.repo.local={home / 'm2'}", "package",
    ]  # fmt: skip
    done = subprocess.run(
        command,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    jar = runner_jar()
    if done.returncode != 0 or jar is None:
        lines = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line]
        tail = "\n".join(lines[:6])
        raise RuntimeError(f"building Apicurio Registry {VERSION} with Maven failed:\n{tail}")
    return jar


class ApicurioRegistry(StartStop):
    """Apicurio Registry with in-memory storage on a free loopback port, in a child JVM.

    ``url`` is the root of its Confluent-compatible API (``http://127.0.0.1:PORT/apis/ccompat/v7``).
    Every start is a new, empty registry.
    """

    def __init__(self, *, heap: str = "256m") -> None:
        self.host = LOOPBACK
        self.port: int | None = None
        self.heap = heap
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @staticmethod
    def unavailable_reason() -> str | None:
        """Why it cannot run here, or ``None`` (a failed build shows only on ``start()``)."""
        if shutil.which("java") is None:
            return "java is not on PATH (Apicurio Registry needs Java 11 or newer)"
        if runner_jar() is None and shutil.which("mvn") is None:
            return "mvn is not on PATH (Apicurio Registry is built from Maven Central parts)"
        return None

    @property
    def url(self) -> str:
        """The Confluent-compatible API's root URL (known once started)."""
        if self.port is None:
            raise RuntimeError("ApicurioRegistry is not started")
        return f"http://{self.host}:{self.port}{CCOMPAT}"

    @property
    def log_text(self) -> str:
        """What the JVM printed so far."""
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read().decode(errors="replace")

    def start(self) -> Self:
        """Build (first time), start the JVM, and return once the API answers."""
        if self._process is not None:
            return self
        jar = build()
        self.port = free_port(self.host)
        self._log = tempfile.TemporaryFile(prefix="blockgz-apicurio-")  # noqa: SIM115
        command = [
            "java", f"-Xmx{self.heap}", "-Djava.awt.headless=true",
            f"-Dquarkus.http.host={self.host}", f"-Dquarkus.http.port={self.port}",
            "-jar", str(jar),
        ]  # fmt: skip
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent(),  # runs only prctl() in the child
        )
        try:
            self._wait_ready(time.monotonic() + START_TIMEOUT_S)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, deadline: float) -> None:
        process = self._process
        assert process is not None
        while time.monotonic() < deadline:
            if process.poll() is not None:
                output = self.log_text[-3000:]
                raise RuntimeError(f"Apicurio Registry exited while starting:\n{output}")
            try:
                with urllib.request.urlopen(self.url + "/subjects", timeout=1) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)  # poll interval; the deadline bounds the wait
        raise TimeoutError(f"Apicurio Registry did not start:\n{self.log_text[-3000:]}")

    def stop(self) -> None:
        """Stop the JVM (SIGTERM, then SIGKILL after 10 s). Safe to call twice."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
