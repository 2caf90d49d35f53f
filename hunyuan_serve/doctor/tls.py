"""doctor's row on the edge's TLS pair (edge/tls.py checks it): `up` refuses to start when it fails."""

from __future__ import annotations

from hunyuan_serve.doctor.rows import Check, Facts, fail, ok


def check_tls(f: Facts) -> Check:
    """The certificate and key of nginx.tls_cert and nginx.tls_key: every problem found, with its fix."""
    if f.tls is None:
        return ok("tls", "off: plain HTTP only (nginx.tls_cert unset)")
    if f.tls.problems:
        return fail("tls", "; ".join(f.tls.problems))
    return ok("tls", f.tls.summary)
