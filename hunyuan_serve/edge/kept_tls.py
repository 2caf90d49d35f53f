"""The front's certificate pair as Nginx serves it: copies of the last pair the checks accepted."""

# Nginx reads its pair at every reload, and both `up` and the gateway reload it on every routing change
# (a replica or a host coming or going). Were it to read nginx.tls_cert and tls_key where they sit, a
# renewal that `reload` refused (expired, another pair's key) would go live at the next such reload, or
# fail `nginx -t` at each of them. It reads copies instead, replaced only by a pair that passed the
# checks (edge/tls.py), so what it serves is always the last pair accepted.

from __future__ import annotations

import os
from pathlib import Path

from hunyuan_serve.config import NginxConfig
from hunyuan_serve.edge.tls import check_pair

KEPT_TLS_DIR = "tls"  # in the run dir, 0700: the copies Nginx serves
_CERT, _KEY, _STAGED = "front.crt", "front.key", ".new"


class KeptPair:
    """The copies Nginx serves in `directory`: `stage` checks a pair and copies it beside them, `commit`
    renames the staged copies over them (each rename atomic), `install` does both."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.summary: str | None = None  # what the pair served is (names, end date); None: none yet
        self._staged: str | None = None  # the staged pair's summary, until committed

    def stage(self, source: NginxConfig) -> str | None:
        """The pair at source's paths checked and copied beside the copies served, the copies checked
        again (a renewal written between the check and the copy); every reason it is refused, or None.
        TLS off stages nothing. The copies served are never touched here."""
        self._staged = None
        report = check_pair(source)
        if report is None:
            return None
        if report.problems:
            return "; ".join(report.problems)
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.directory.chmod(0o700)  # the key's copy is in it
        staged = self._at(source, _STAGED)
        try:
            _copy(Path(str(source.tls_cert)), Path(str(staged.tls_cert)))
            _copy(Path(str(source.tls_key)), Path(str(staged.tls_key)))
        except OSError as err:
            return f"cannot copy the front's pair into {self.directory}: {err.strerror or err}"
        again = check_pair(staged)
        if again is not None and again.problems:
            return "; ".join(again.problems)
        self._staged = report.summary
        return None

    def commit(self) -> None:
        """The staged pair, if any, served from now on: renamed over the copies."""
        if self._staged is None:
            return
        for name in (_CERT, _KEY):
            os.replace(self.directory / f"{name}{_STAGED}", self.directory / name)
        self.summary, self._staged = self._staged, None

    def install(self, source: NginxConfig) -> str | None:
        """`stage` then `commit`: the pair served from now on, or every reason it is refused (the copies
        served left as they are)."""
        problem = self.stage(source)
        if problem is None:
            self.commit()
        return problem

    def served(self, nginx: NginxConfig) -> NginxConfig:
        """nginx with its pair at the copies (as it is with TLS off): what Nginx is rendered with."""
        if not nginx.tls_cert or not nginx.tls_key:
            return nginx
        return self._at(nginx, "")

    def _at(self, nginx: NginxConfig, suffix: str) -> NginxConfig:
        cert, key = self.directory / f"{_CERT}{suffix}", self.directory / f"{_KEY}{suffix}"
        return nginx.model_copy(update={"tls_cert": str(cert), "tls_key": str(key)})


def _copy(source: Path, copy: Path) -> None:
    """source's bytes at copy, created readable by its owner only (it may be the key)."""
    data = source.read_bytes()
    copy.unlink(missing_ok=True)
    fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
