"""doctor's rows on the secret files and the edge's TLS pair (edge/tls.py): `up` refuses what they fail."""

from __future__ import annotations

from hunyuan_serve.doctor.rows import Check, Facts, fail, ok

SECRET_ROW = "secret files"  # a FAIL of it is exit 2, as every command refusing a secret file exits


def check_secret_files(f: Facts) -> list[Check]:
    """Every secret file the config names (keys, peer secret, TLS keys) readable by its owner only: one
    FAIL row per file others may read, with its fix."""
    if f.exposed:
        return [fail(SECRET_ROW, problem) for problem in f.exposed]
    if not f.secret_files:
        return [ok(SECRET_ROW, "none configured (auth.keys_file, auth.peer_secret_file, *tls_key)")]
    return [ok(SECRET_ROW, f"{', '.join(f.secret_files)}: readable by their owner only")]


def check_tls(f: Facts) -> list[Check]:
    """The certificate and key of nginx.tls_cert and nginx.tls_key: one FAIL row per problem found, with
    its fix (a key others may read is the secret files' row), else one ok row saying what the pair is."""
    if f.tls is None:
        return [ok("tls", "off: plain HTTP only (nginx.tls_cert unset)")]
    problems = [p for p in f.tls.problems if p not in f.exposed]
    if problems:
        return [fail("tls", problem) for problem in problems]
    if f.tls.problems:  # only its key's mode, which the secret files' row names with its fix
        return [fail("tls", f"nginx.tls_key: others may read it (the {SECRET_ROW} row)")]
    return [ok("tls", f.tls.summary)]
