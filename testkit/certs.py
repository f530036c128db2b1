"""The files of a throwaway certificate authority for TLS tests: a CA, a server certificate it
signed for 127.0.0.1 and localhost, and a second CA that signed nothing (the "wrong CA"), as
PEM files in one directory. The CA itself is :class:`testkit.throwaway_ca.TestCA`,
which the secured Kafka broker uses too.

>>> import tempfile
>>> ca = make_test_ca(tempfile.mkdtemp())
>>> sorted(p.name for p in (ca.ca_file, ca.cert_file, ca.key_file, ca.other_ca_file))
['ca.pem', 'other-ca.pem', 'server.key', 'server.pem']
>>> b"BEGIN CERTIFICATE" in ca.ca_file.read_bytes()
True
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from testkit.throwaway_ca import TestCA

#: The names the server certificate is valid for.
SERVER_NAMES = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class CAFiles:
    """Where :func:`make_test_ca` wrote its files."""

    ca_file: Path  # the CA's certificate: what a client trusts
    cert_file: Path  # the server's certificate, signed by the CA
    key_file: Path  # the server's private key (unencrypted PKCS#8)
    other_ca_file: Path  # a CA that did not sign the server's certificate


def make_test_ca(directory: str | Path, *, names: tuple[str, ...] = SERVER_NAMES) -> CAFiles:
    """Write a CA, a server certificate for ``names`` (DNS names or IP addresses) and a second,
    unrelated CA into ``directory``."""
    where = Path(directory)
    where.mkdir(parents=True, exist_ok=True)
    files = CAFiles(
        where / "ca.pem", where / "server.pem", where / "server.key", where / "other-ca.pem"
    )
    ca = TestCA("blockgz test CA")
    key_pem, cert_pem = ca.issue(names)
    ca.write_ca(files.ca_file)
    TestCA("blockgz other CA").write_ca(files.other_ca_file)
    files.cert_file.write_bytes(cert_pem)
    files.key_file.write_bytes(key_pem)
    files.key_file.chmod(0o600)
    return files
