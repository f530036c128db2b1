"""A throwaway certificate authority for TLS tests: a CA, a server certificate it signed for
127.0.0.1 and localhost, and a second CA that signed nothing (the "wrong CA").

Everything is written as PEM files into one directory; the keys are EC P-256, valid for a day.
Made with ``cryptography`` (already installed with moto), not by shelling out to ``openssl``:
no binary to find, and the extensions a strict client checks (SAN, key usage, basic
constraints) are set explicitly.

>>> import tempfile
>>> ca = make_test_ca(tempfile.mkdtemp())
>>> sorted(p.name for p in (ca.ca_file, ca.cert_file, ca.key_file, ca.other_ca_file))
['ca.pem', 'other-ca.pem', 'server.key', 'server.pem']
>>> b"BEGIN CERTIFICATE" in ca.ca_file.read_bytes()
True
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: The names the server certificate is valid for.
SERVER_NAMES = ("localhost", "127.0.0.1")


@dataclass(frozen=True)
class TestCA:
    """Where :func:`make_test_ca` wrote its files."""

    __test__ = False  # not a pytest test class

    ca_file: Path  # the CA's certificate: what a client trusts
    cert_file: Path  # the server's certificate, signed by the CA
    key_file: Path  # the server's private key (unencrypted PKCS#8)
    other_ca_file: Path  # a CA that did not sign the server's certificate


def make_test_ca(directory: str | Path, *, names: tuple[str, ...] = SERVER_NAMES) -> TestCA:
    """Write a CA, a server certificate for ``names`` (DNS names or IP addresses) and a second,
    unrelated CA into ``directory``."""
    where = Path(directory)
    where.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = _ca("blockgz test CA")
    _, other_cert = _ca("blockgz other CA")
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(names[0]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([_san(n) for n in names]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    files = TestCA(
        where / "ca.pem", where / "server.pem", where / "server.key", where / "other-ca.pem"
    )
    files.ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.other_ca_file.write_bytes(other_cert.public_bytes(serialization.Encoding.PEM))
    files.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    files.key_file.chmod(0o600)
    return files


def _ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    usage = x509.KeyUsage(
        digital_signature=True,
        key_cert_sign=True,
        crl_sign=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        encipher_only=False,
        decipher_only=False,
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _san(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)
