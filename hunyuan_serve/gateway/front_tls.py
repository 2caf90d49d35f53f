"""The gateway front's certificate pair: checked, then copied where its Nginx reads it, or refused."""

# Nginx reads the pair on every reload, and the gateway reloads on every routing change. Were it to
# read the configured paths, a renewal `gateway reload` refused (expired, another pair's key) would go
# live at the next host that comes or goes. It reads copies instead, made only of a pair that passed
# the checks (edge/tls.py), so what it serves is always the last pair accepted.

from __future__ import annotations

import os
from pathlib import Path

from hunyuan_serve.config import NginxConfig
from hunyuan_serve.edge.tls import check_pair

FRONT_TLS_DIR = "tls"  # in the gateway's run dir, 0700: the copies its Nginx serves


class FrontPair:
    """nginx.tls_cert and nginx.tls_key as the inventory names them, and the copies Nginx serves."""

    def __init__(self, nginx: NginxConfig, run_dir: Path) -> None:
        self.source = nginx
        self.directory = run_dir / FRONT_TLS_DIR
        self.summary: str | None = None  # what the pair served is (names, end date); None: TLS off

    def install(self) -> NginxConfig | str:
        """The pair at the configured paths checked and copied for Nginx: the nginx settings that point
        at the copies (the configured ones with TLS off), or every reason it is refused, the copies
        already there left as they are."""
        report = check_pair(self.source)
        if report is None:
            return self.source
        if report.problems:
            return "; ".join(report.problems)
        self.directory.mkdir(mode=0o700, exist_ok=True)
        self.directory.chmod(0o700)  # the key's copy is in it
        live, staged = self._at(""), self._at(".new")
        try:
            for source, copy in (
                (self.source.tls_cert, staged.tls_cert),
                (self.source.tls_key, staged.tls_key),
            ):
                _copy(Path(str(source)), Path(str(copy)))
        except OSError as err:
            return f"cannot copy the front's pair into {self.directory}: {err.strerror or err}"
        # A renewal written between the check and the copy: the copies go live only if they pass too.
        again = check_pair(staged)
        if again is not None and again.problems:
            return "; ".join(again.problems)
        os.replace(str(staged.tls_cert), str(live.tls_cert))
        os.replace(str(staged.tls_key), str(live.tls_key))
        self.summary = report.summary
        return live

    def _at(self, suffix: str) -> NginxConfig:
        cert, key = self.directory / f"front.crt{suffix}", self.directory / f"front.key{suffix}"
        return self.source.model_copy(update={"tls_cert": str(cert), "tls_key": str(key)})


def _copy(source: Path, copy: Path) -> None:
    """source's bytes at copy, created readable by its owner only (it may be the key)."""
    data = source.read_bytes()
    copy.unlink(missing_ok=True)
    fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
