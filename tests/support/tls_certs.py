"""A test CA and the certificates it signs, made with the cryptography package and written as PEM files."""

from __future__ import annotations

import datetime
import ipaddress
import os
import socket
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The names a loopback server is reached by in the tests: curl, httpx and requests all check them.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Pair:
    """A certificate and its key on disk (the key mode 0600, as a server refuses a looser one)."""

    cert: Path
    key: Path
    serial: int

    @property
    def fingerprint(self) -> str:
        """SHA-256 of the certificate's DER, hex: what a client sees on the wire, compared after a swap."""
        return fingerprint_pem(self.cert.read_bytes())


@dataclass(frozen=True)
class CA:
    """A self-signed CA: `cert` is the PEM file clients verify with; it signs with its key in memory."""

    cert: Path
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def issue(
        self,
        directory: Path,
        name: str,
        names: Sequence[str] = LOOPBACK_NAMES,
        *,
        not_before: datetime.datetime | None = None,
        not_after: datetime.datetime | None = None,
        client: bool = False,
    ) -> Pair:
        """A leaf certificate for `names` (DNS names or IP addresses) written as NAME.crt and NAME.key;
        valid from a day ago for thirty days unless told otherwise; `client`: for client auth (mTLS)."""
        now = _now()
        key = ec.generate_private_key(ec.SECP256R1())
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(names[0] if names else name))
            .issuer_name(self.certificate.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before or now - DAY)
            .not_valid_after(not_after or now + 30 * DAY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(_alt_names(names)), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        directory.mkdir(parents=True, exist_ok=True)
        cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        write_key(key_path, key)
        return Pair(cert_path, key_path, cert.serial_number)


def make_ca(directory: Path, name: str = "ca") -> CA:
    """A new CA whose certificate is written to DIRECTORY/NAME.crt."""
    now = _now()
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _name(f"hunyuan-serve test CA {name}")
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - DAY)
        .not_valid_after(now + 365 * DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.crt"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return CA(path, cert, key)


def write_key(path: Path, key: ec.EllipticCurvePrivateKey, mode: int = 0o600) -> None:
    """The key as unencrypted PKCS#8 PEM, created with `mode` (never readable by others in between)."""
    data = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(path, mode)  # the umask may have taken bits off what was asked


def other_key(path: Path) -> Path:
    """A fresh key matching no certificate, at path (mode 0600)."""
    write_key(path, ec.generate_private_key(ec.SECP256R1()))
    return path


def fingerprint_pem(pem: bytes) -> str:
    """SHA-256 fingerprint (hex) of the first certificate in a PEM blob."""
    cert = x509.load_pem_x509_certificate(pem)
    return cert.fingerprint(hashes.SHA256()).hex()


def fingerprint_der(der: bytes) -> str:
    """SHA-256 fingerprint (hex) of a DER certificate, as ssl.SSLSocket.getpeercert(True) gives it."""
    return x509.load_der_x509_certificate(der).fingerprint(hashes.SHA256()).hex()


def served_fingerprint(port: int) -> str | None:
    """The fingerprint of the certificate a loopback TLS port serves a new connection now (None: no
    answer). Unverified, so that an expired or mismatched certificate is seen too."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as sock,
            context.wrap_socket(sock, server_hostname="localhost") as tls,
        ):
            der = tls.getpeercert(binary_form=True)
    except OSError:
        return None
    return fingerprint_der(der) if der else None


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(microsecond=0)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _alt_names(names: Sequence[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for name in names:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            out.append(x509.DNSName(name))
    return out
