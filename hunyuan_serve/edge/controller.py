"""Nginx in its own prefix: every config checked with `nginx -t` before it is started or reloaded."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx

from hunyuan_serve.config import NginxConfig
from hunyuan_serve.logrotate import LogFile
from hunyuan_serve.run import procs
from hunyuan_serve.run.plan import loopback_for
from hunyuan_serve.run.state import write_text_atomic


class NginxError(RuntimeError):
    """Nginx refused a config or did not come up; the message says why."""


def leftover_master(pid_text: str | None, cmdline_of: Callable[[int], str | None], conf: Path) -> int | None:
    """The pid in an Nginx pid file if it still names an Nginx master reading conf: one a SIGKILL-ed
    `up` left running. Anything else (no file, a stale or reused pid, another Nginx) is None.

    Nginx retitles its master "nginx: master process " followed by the command line it was started
    with, which names the config (-c).
    """
    try:
        pid = int((pid_text or "").strip())
    except ValueError:
        return None
    line = cmdline_of(pid) if pid > 1 else None
    if not line or not line.startswith("nginx: master process "):
        return None
    return pid if f" -c {conf} " in f"{line} " else None


class NginxController:
    """Owns one Nginx master process and the config file it reads."""

    def __init__(self, cfg: NginxConfig, prefix: Path, headers: Mapping[str, str] | None = None) -> None:
        self.cfg = cfg
        self.headers = dict(headers or {})  # its own checks carry the peer secret a host's Nginx asks for
        self.binary = cfg.binary
        self.prefix = prefix
        self.conf_path = prefix / "nginx.conf"
        self.error_log = prefix / "logs" / "error.log"
        self.access_log = prefix / "logs" / "access.log"
        self.health_url = f"http://{loopback_for(cfg.listen)}:{cfg.port}/health"
        self.timeout_s = cfg.reload_timeout_s
        self.proc: asyncio.subprocess.Process | None = None

    def prepare(self) -> None:
        for sub in ("logs", "temp"):
            (self.prefix / sub).mkdir(parents=True, exist_ok=True)
        # Its config may hold the peer secret (auth.peer_secret_file); the workers run as this user.
        self.prefix.chmod(0o700)

    def _argv(self, conf: Path, *extra: str) -> list[str]:
        return [self.binary, "-p", str(self.prefix), "-c", str(conf), "-e", str(self.error_log), *extra]

    async def check(self, text: str) -> Path:
        """Write text beside the live config and `nginx -t` it; NginxError (with Nginx's words) if bad."""
        candidate = self.prefix / "nginx.conf.new"
        write_text_atomic(candidate, text)
        try:
            proc = await asyncio.create_subprocess_exec(
                *self._argv(candidate, "-t", "-q"),
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
        except OSError as err:
            raise NginxError(f"cannot run {self.binary}: {err.strerror}") from None
        try:
            out, _ = await asyncio.wait_for(proc.communicate(), timeout=self.timeout_s)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise NginxError(f"`nginx -t` took longer than {self.timeout_s:g}s") from None
        if proc.returncode != 0:
            raise NginxError("nginx -t rejected the config: " + out.decode(errors="replace").strip())
        return candidate

    async def _install(self, text: str) -> None:
        candidate = await self.check(text)
        os.replace(candidate, self.conf_path)

    async def start(self, text: str, log_path: Path) -> int:
        """Check and install the config, start the master, wait until it answers; returns its pid."""
        self.prepare()
        await self._install(text)
        env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")}
        self.proc = await procs.spawn(self._argv(self.conf_path), env, log_path)
        deadline = time.monotonic() + self.timeout_s
        timeout = self.cfg.check_request_timeout_s
        async with httpx.AsyncClient(timeout=timeout, trust_env=False, headers=self.headers) as client:
            while time.monotonic() < deadline:
                if self.proc.returncode is not None:
                    raise NginxError(f"nginx exited with code {self.proc.returncode}; see {self.error_log}")
                try:
                    await client.get(self.health_url)
                    return self.proc.pid
                except httpx.HTTPError:
                    await asyncio.sleep(self.cfg.start_poll_s)
        raise NginxError(f"nginx did not answer {self.health_url} within {self.timeout_s:g}s")

    async def reload(self, text: str, generation: int) -> dict[str, float]:
        """Check, install, SIGHUP; returns once only workers of this config generation accept requests.

        Returns how long the check and the switch took, in milliseconds.
        """
        started = time.monotonic()
        await self._install(text)
        checked = time.monotonic()
        if self.proc is None or self.proc.returncode is not None:
            raise NginxError("nginx is not running")
        old_workers = set(procs.children(self.proc.pid))
        procs.send(self.proc, signal.SIGHUP)
        deadline = time.monotonic() + self.timeout_s
        limits = httpx.Limits(max_keepalive_connections=0)
        timeout = self.cfg.check_request_timeout_s
        async with httpx.AsyncClient(
            timeout=timeout, trust_env=False, limits=limits, headers=self.headers
        ) as client:
            while time.monotonic() < deadline:
                # An old worker accepts new connections until it retitles itself "shutting down".
                accepting_old = [
                    pid
                    for pid, title in procs.children(self.proc.pid).items()
                    if pid in old_workers and "shutting down" not in title
                ]
                if not accepting_old:
                    try:
                        body = (await client.get(self.health_url)).json()
                        if body.get("config") == generation:
                            done = time.monotonic()
                            return {
                                "check_ms": round((checked - started) * 1000, 1),
                                "switch_ms": round((done - checked) * 1000, 1),
                            }
                    except (httpx.HTTPError, ValueError, AttributeError):
                        pass
                await asyncio.sleep(self.cfg.reload_poll_s)
        raise NginxError(f"nginx did not load config generation {generation} within {self.timeout_s:g}s")

    async def wait(self) -> int | None:
        """Return when the master exits (at once if none was started)."""
        return None if self.proc is None else await self.proc.wait()

    async def stop(self, drain_s: float) -> None:
        """Graceful quit (stop accepting, finish in-flight requests) within drain_s, then SIGKILL."""
        if self.proc is not None:
            await procs.stop(self.proc, signal.SIGQUIT, drain_s)

    def stop_leftover(self, drain_s: float, kill_s: float, poll_s: float) -> int | None:
        """Stop the Nginx a previous `up` of this prefix left running (QUIT: it finishes what it has in
        flight, within drain_s; then TERM, kill_s; then SIGKILL to its group); its pid, or None."""
        try:
            text: str | None = (self.prefix / "nginx.pid").read_text(encoding="ascii", errors="replace")
        except OSError:
            text = None
        pid = leftover_master(text, procs.cmdline, self.conf_path)
        if pid is not None:
            procs.end_orphan(pid, [(signal.SIGQUIT, drain_s), (signal.SIGTERM, kill_s)], poll_s)
        return pid

    def logs(self) -> list[LogFile]:
        """Its access and error logs; after a rotation USR1 makes the master and workers reopen them."""
        return [LogFile(self.access_log, self._reopen_logs), LogFile(self.error_log, self._reopen_logs)]

    def _reopen_logs(self) -> None:
        if self.proc is not None:
            procs.send(self.proc, signal.SIGUSR1)

    def describe(self) -> dict[str, object]:
        return {
            "pid": self.proc.pid if self.proc and self.proc.returncode is None else None,
            "config": str(self.conf_path),
            "access_log": str(self.access_log),
            "error_log": str(self.error_log),
        }
