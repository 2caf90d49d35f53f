"""TLS pairs checked before a server gets them (the edge's, the replicas'): match, dates, names, key mode."""

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
    return check_pair_files(nginx.tls_cert, nginx.tls_key, "nginx", checked_host(nginx), now)


def check_replica_pair(
    cert: str | None, key: str | None, now: datetime.datetime | None = None
) -> PairReport | None:
    """The replicas' own pair (replica.tls_cert and tls_key) checked as the edge's is, but for names: the
    name it must cover is the gateway's tls_name, which this host's config does not hold."""
    if not cert or not key:
        return None
    return check_pair_files(cert, key, "replica", None, now)


def check_pair_files(
    cert_path: str, key_path: str, section: str, host: str | None, now: datetime.datetime | None = None
) -> PairReport:
    """A certificate and key pair checked: the key's mode, the match, the dates, and that the names
    cover `host` (None: no name checked). Each problem names its file as SECTION.tls_cert or tls_key."""
    when = now or datetime.datetime.now(datetime.UTC)
    cert_key, key_key = f"{section}.tls_cert", f"{section}.tls_key"
    cert, problem = _load_cert(Path(cert_path), cert_key)
    key_problems = _key_problems(Path(key_path), cert, key_key)
    if cert is None:
        return PairReport((problem or "no certificate", *key_problems), cert_path)
    names = cert_names(cert)
    problems = [*key_problems, *_date_problems(cert, when, f"{cert_key} {cert_path}")]
    if host is not None and not covers(names, host):
        shown = ", ".join(names) or "none"
        problems.append(f"{cert_key} {cert_path} does not cover {host} (its names: {shown})")
    until = cert.not_valid_after_utc.strftime("%Y-%m-%d %H:%M UTC")
    unchecked = "no name checked (set nginx.tls_host)" if section == "nginx" else "no name checked"
    checked = f"covers {host}" if host else unchecked
    summary = f"{', '.join(names) or 'no names'}; valid until {until}; {checked}"
    return PairReport(tuple(problems), summary)


def _load_cert(path: Path, what: str) -> tuple[x509.Certificate | None, str | None]:
    """The first certificate of the PEM file (the one Nginx serves), or why there is none."""
    try:
        data = path.read_bytes()
    except OSError as err:
        return None, f"{what} {path}: {err.strerror or err}"
    try:
        return x509.load_pem_x509_certificates(data)[0], None
    except ValueError:
        return None, f"{what} {path}: not a PEM certificate"


def _key_problems(path: Path, cert: x509.Certificate | None, what: str) -> list[str]:
    """The key unreadable, open to others, encrypted, or not the certificate's."""
    exposed = exposed_problem(path, what)
    problems = [exposed] if exposed else []
    try:
        data = path.read_bytes()
    except OSError as err:
        return [*problems, f"{what} {path}: {err.strerror or err}"]
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except TypeError:  # the password is missing: the server would ask for it on a terminal it does not have
        return [*problems, f"{what} {path} is encrypted: give it an unencrypted key"]
    except (ValueError, UnsupportedAlgorithm):
        return [*problems, f"{what} {path}: not a PEM private key"]
    if cert is not None and key.public_key().public_bytes(*_SPKI) != cert.public_key().public_bytes(*_SPKI):
        problems.append(f"{what} {path} does not match the certificate (another key pair's)")
    return problems


def _date_problems(cert: x509.Certificate, now: datetime.datetime, named: str) -> list[str]:
    after, before = cert.not_valid_after_utc, cert.not_valid_before_utc
    if now > after:
        return [f"{named} expired on {after:%Y-%m-%d %H:%M} UTC: install a renewed one"]
    if now < before:
        return [f"{named} is not valid before {before:%Y-%m-%d %H:%M} UTC (check the clock)"]
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
