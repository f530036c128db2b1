"""A throw-away certificate authority for local TLS servers (PEM files, ``cryptography``).

:class:`TestCA` makes a CA key and self-signed certificate, and issues server certificates
for the names and addresses a test connects to. Keys are ECDSA P-256 (fast to make, and
both OpenSSL and Java's PEM keystore read PKCS#8 EC keys). Nothing here is fit for anything
but tests: the keys are written unencrypted.

>>> ca = TestCA("test CA")
>>> key_pem, cert_pem = ca.issue(["localhost", "127.0.0.1"])
>>> cert_pem.startswith(b"-----BEGIN CERTIFICATE-----"), b"PRIVATE KEY" in key_pem
(True, True)
>>> ca.names_of(cert_pem)
['localhost', '127.0.0.1']
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from pathlib import Path

_VALID = dt.timedelta(days=2)


def _ca_usage():
    from cryptography import x509

    flags = dict.fromkeys(
        ("content_commitment", "key_encipherment", "data_encipherment", "key_agreement",
         "encipher_only", "decipher_only"),
        False,
    )  # fmt: skip
    return x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, **flags)


class TestCA:
    """A CA that issues server certificates (``issue``) and writes PEM files (``write``)."""

    __test__ = False  # not a pytest test class, whatever its name says

    def __init__(self, name: str = "blockgz test CA") -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(_ca_usage(), critical=True)
            .add_extension(
                x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False
            )
            .sign(self._key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        """The CA's certificate, PEM: what clients trust (``ssl.ca.location``)."""
        from cryptography.hazmat.primitives.serialization import Encoding

        return self._cert.public_bytes(Encoding.PEM)

    def issue(self, names: Sequence[str]) -> tuple[bytes, bytes]:
        """``(key PEM, certificate PEM)`` of a server certificate for ``names`` (DNS names or
        IP addresses, as subject alternative names; the first is also the common name)."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + _VALID)
            .add_extension(x509.SubjectAlternativeName([_general_name(n) for n in names]), False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), False
            )
            .sign(self._key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        return key_pem, cert.public_bytes(serialization.Encoding.PEM)

    def write_server_pem(self, path: Path, names: Sequence[str]) -> Path:
        """A PEM file holding a new server key and its certificate chain (certificate, then
        this CA's): what Kafka's ``ssl.keystore.type=PEM`` keystore reads."""
        key_pem, cert_pem = self.issue(names)
        path.write_bytes(key_pem + cert_pem + self.cert_pem)
        path.chmod(0o600)
        return path

    def write_ca(self, path: Path) -> Path:
        """This CA's certificate as a PEM file (a client's ``ssl.ca.location``)."""
        path.write_bytes(self.cert_pem)
        return path

    def write_pkcs12_truststore(self, path: Path, password: str) -> Path:
        """This CA's certificate in a PKCS12 truststore (as ``keytool -importcert
        -storetype PKCS12`` would write, without Java's trusted-certificate attribute)."""
        from cryptography.hazmat.primitives.serialization import BestAvailableEncryption
        from cryptography.hazmat.primitives.serialization.pkcs12 import (
            serialize_key_and_certificates,
        )

        data = serialize_key_and_certificates(
            b"ca", None, None, [self._cert], BestAvailableEncryption(password.encode())
        )
        path.write_bytes(data)
        return path

    @staticmethod
    def names_of(cert_pem: bytes) -> list[str]:
        """The subject alternative names of a PEM certificate, as text."""
        from cryptography import x509

        cert = x509.load_pem_x509_certificate(cert_pem)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        return [str(n.value) for n in names]


def _general_name(name: str):
    from cryptography import x509

    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)
