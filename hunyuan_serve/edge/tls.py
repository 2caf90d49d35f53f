"""The edge's certificate and key pair checked before Nginx gets them: match, dates, names, the key's mode."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from hunyuan_serve.config import NginxConfig
from hunyuan_serve.private_files import exposed_problem

_SPKI = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


@dataclass(frozen=True)
class PairReport:
    """What the checks found: every problem (empty: the pair is good) and a line saying what it is."""

    problems: tuple[str, ...]
    summary: str


def checked_host(nginx: NginxConfig) -> str | None:
    """The name the certificate must cover: nginx.tls_host, else nginx.listen when it is one specific
    address (a wildcard or loopback listen says nothing of the name clients use), else None."""
    if nginx.tls_host:
        return nginx.tls_host
    bare = nginx.listen.strip("[]")
    if bare in ("0.0.0.0", "*", "", "::") or bare.startswith("127.") or bare == "::1":
        return None
    return bare


def check_pair(nginx: NginxConfig, now: datetime.datetime | None = None) -> PairReport | None:
    """The pair of nginx.tls_cert and nginx.tls_key checked (None: TLS is off)."""
    if not nginx.tls_cert or not nginx.tls_key:
        return None
    when = now or datetime.datetime.now(datetime.UTC)
    cert, problem = _load_cert(Path(nginx.tls_cert))
    key_problems = _key_problems(Path(nginx.tls_key), cert)
    if cert is None:
        return PairReport((problem or "no certificate", *key_problems), nginx.tls_cert)
    host = checked_host(nginx)
    names = cert_names(cert)
    problems = [*key_problems, *_date_problems(cert, when, nginx.tls_cert)]
    if host is not None and not covers(names, host):
        shown = ", ".join(names) or "none"
        problems.append(f"nginx.tls_cert {nginx.tls_cert} does not cover {host} (its names: {shown})")
    until = cert.not_valid_after_utc.strftime("%Y-%m-%d %H:%M UTC")
    checked = f"covers {host}" if host else "no name checked (set nginx.tls_host)"
    summary = f"{', '.join(names) or 'no names'}; valid until {until}; {checked}"
    return PairReport(tuple(problems), summary)


def _load_cert(path: Path) -> tuple[x509.Certificate | None, str | None]:
    """The first certificate of the PEM file (the one Nginx serves), or why there is none."""
    try:
        data = path.read_bytes()
    except OSError as err:
        return None, f"nginx.tls_cert {path}: {err.strerror or err}"
    try:
        return x509.load_pem_x509_certificates(data)[0], None
    except ValueError:
        return None, f"nginx.tls_cert {path}: not a PEM certificate"


def _key_problems(path: Path, cert: x509.Certificate | None) -> list[str]:
    """The key unreadable, open to others, encrypted, or not the certificate's."""
    exposed = exposed_problem(path, "nginx.tls_key")
    problems = [exposed] if exposed else []
    try:
        data = path.read_bytes()
    except OSError as err:
        return [*problems, f"nginx.tls_key {path}: {err.strerror or err}"]
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:  # the password is missing: Nginx would ask for it on a terminal it does not have
        return [*problems, f"nginx.tls_key {path} is encrypted: give Nginx an unencrypted key"]
    except (ValueError, UnsupportedAlgorithm):
        return [*problems, f"nginx.tls_key {path}: not a PEM private key"]
    if cert is not None and key.public_key().public_bytes(*_SPKI) != cert.public_key().public_bytes(*_SPKI):
        problems.append(f"nginx.tls_key {path} does not match the certificate (another key pair's)")
    return problems


def _date_problems(cert: x509.Certificate, now: datetime.datetime, path: str) -> list[str]:
    after, before = cert.not_valid_after_utc, cert.not_valid_before_utc
    if now > after:
        return [f"nginx.tls_cert {path} expired on {after:%Y-%m-%d %H:%M} UTC: install a renewed one"]
    if now < before:
        return [f"nginx.tls_cert {path} is not valid before {before:%Y-%m-%d %H:%M} UTC (check the clock)"]
    return []


def cert_names(cert: x509.Certificate) -> list[str]:
    """The certificate's DNS names and IP addresses (subjectAltName), else its common name."""
    try:
        alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        common = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
        return [str(common[0].value)] if common else []
    dns = [str(n) for n in alt.get_values_for_type(x509.DNSName)]
    return dns + [str(ip) for ip in alt.get_values_for_type(x509.IPAddress)]


def covers(names: list[str], host: str) -> bool:
    """Whether a client reaching `host` accepts a certificate with these names (RFC 6125: an IP only
    by an equal IP; a wildcard only as the whole leftmost label, standing for one label)."""
    bare = host.strip("[]").rstrip(".").lower()
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        ip = None
    for name in names:
        if ip is not None:
            if _ip(name) == ip:
                return True
            continue
        pattern = name.rstrip(".").lower()
        if pattern == bare:
            return True
        if pattern.startswith("*.") and "." in bare and bare.split(".", 1)[1] == pattern[2:]:
            return True
    return False


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None
