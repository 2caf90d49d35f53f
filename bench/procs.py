"""Processes the bench starts: servers in their own process groups, waited for, always stopped."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from hunyuan_serve.run.ports import free_ports

REPO = Path(__file__).resolve().parent.parent


def server_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Our environment for a server the bench starts; device settings come from bench/targets.py."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.update(extra or {})
    return env


# Ports kept free above each one free_port returns: a stack's replicas listen on base_port + i, and a
# reload starts each new replica on the other port of its pair.
PORT_ROOM = 8


def free_port() -> int:
    """A loopback port with PORT_ROOM free ones from it, below the ephemeral range: k6 opens tens of
    thousands of connections, and one of them must not hold a replica's port when it starts."""
    return free_ports(PORT_ROOM)[0]


def http_json(url: str, body: Any = None, timeout: float = 10.0) -> tuple[int, Any]:
    """GET (or POST `body` as JSON) and return (status, parsed JSON or text); status 0 if unreachable."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read().decode("utf-8", "replace")
            status = resp.status
    except urllib.error.HTTPError as err:
        raw, status = err.read().decode("utf-8", "replace"), err.code
    except (urllib.error.URLError, OSError, TimeoutError):
        return 0, None
    try:
        return status, json.loads(raw)
    except json.JSONDecodeError:
        return status, raw


class Server:
    """A started server process (its own session, so that stopping it stops what it started)."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, env: Mapping[str, str]) -> None:
        self.name = name
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("ab")
        print(f"[bench] start {name}: {' '.join(argv)}", flush=True)
        self.proc = subprocess.Popen(
            list(argv),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=str(REPO),
            start_new_session=True,
        )
        self.started = time.monotonic()

    def wait_http(self, url: str, timeout_s: float, ok: Any = None) -> float:
        """Wait until GET url answers 200 (and ok(json) holds); return seconds since start."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}; see {self.log_path}")
            status, data = http_json(url, timeout=5)
            if status == 200 and (ok is None or ok(data)):
                ready = time.monotonic() - self.started
                print(f"[bench] {self.name} ready after {ready:.0f} s", flush=True)
                return ready
            time.sleep(1.0)
        raise TimeoutError(f"{self.name} not ready within {timeout_s:.0f} s; see {self.log_path}")

    def stop(self, grace_s: float = 40.0) -> None:
        """SIGTERM the process (its own shutdown stops its children), SIGKILL the group if it lingers."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                print(f"[bench] {self.name} did not stop in {grace_s:.0f} s: SIGKILL", flush=True)
        # Whatever is left in its process group (replicas, nginx, engine cores) goes too.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self._log.close()


@contextlib.contextmanager
def running(server: Server) -> Iterator[Server]:
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def cpu_hog(core: int, count: int = 1) -> Iterator[list[int]]:
    """Busy loops pinned to one core, to make the replica pinned there slower than the others."""
    argv = ["taskset", "-c", str(core), sys.executable, "-c", "while True: pass"]
    procs = [subprocess.Popen(argv, start_new_session=True) for _ in range(count)]
    try:
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def tree_procs(pid: int) -> list[Any]:
    """A process and its live descendants (psutil.Process each); none when it is gone."""
    import psutil

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _tree_sum(pid: int, measure: Callable[[Any], float]) -> float:
    """`measure` summed over a process and its live descendants; 0 when it is gone."""
    import psutil

    total = 0.0
    for proc in tree_procs(pid):
        try:
            total += measure(proc)
        except psutil.Error:  # exited between the listing and the reading
            continue
    return total


ROLES = ("engine cores", "API processes", "Nginx", "supervisor", "other")


def process_role(name: str, cmdline: Sequence[str], is_root: bool) -> str:
    """Which part of a setup a process of its tree is. A forked or spawned vLLM engine core names itself
    VLLM::EngineCore (setproctitle); a replica's front is `python -m hunyuan_serve replica`, `vllm
    serve`'s is its API server; Nginx's master and workers are named nginx; the root of any other
    tree (`up`) is its supervisor."""
    if name.startswith("VLLM::") or any(arg.startswith("VLLM::") for arg in cmdline[:1]):
        return "engine cores"
    if name == "nginx" or (cmdline and cmdline[0].startswith("nginx")):
        return "Nginx"
    if "hunyuan_serve" in cmdline and "replica" in cmdline:
        return "API processes"
    if any(arg.startswith("vllm.entrypoints") for arg in cmdline) or _is_vllm_serve(cmdline):
        return "API processes"
    return "supervisor" if is_root else "other"


def _is_vllm_serve(cmdline: Sequence[str]) -> bool:
    """`vllm serve ...`, run as a script or through an interpreter."""
    head = [Path(arg).name for arg in cmdline[:3]]
    return "serve" in head and "vllm" in head[: head.index("serve")]


def cpu_by_role(pids: Sequence[int]) -> dict[str, float]:
    """CPU seconds so far of the live processes of the trees under `pids` (one setup's: the assembled
    side has several), summed by process_role."""
    import psutil

    totals = dict.fromkeys(ROLES, 0.0)
    for pid in pids:
        for proc in tree_procs(pid):
            try:
                times = proc.cpu_times()
                role = process_role(proc.name(), proc.cmdline(), proc.pid == pid)
            except psutil.Error:  # exited between the listing and the reading
                continue
            totals[role] += float(times.user + times.system)
    return totals


def cpu_since(pids: Sequence[int], before: Mapping[str, float]) -> dict[str, float]:
    """cpu_by_role now, less `before` (an earlier cpu_by_role of the same pids)."""
    return {role: cpu_s - before[role] for role, cpu_s in cpu_by_role(pids).items()}


def tree_rss_mb(pid: int) -> float:
    """Resident memory (MB) of a process and its live descendants; 0 when it is gone."""
    return _tree_sum(pid, lambda proc: proc.memory_info().rss) / 2**20


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process and its live descendants have used so far."""

    def cpu(proc: Any) -> float:
        times = proc.cpu_times()
        return float(times.user + times.system)

    return _tree_sum(pid, cpu)


def scrape_counter(url: str, name: str) -> float | None:
    """A Prometheus counter (`name` or `name_total`, summed over labels); None when unreachable."""
    status, text = http_json(url, timeout=5)
    if status != 200 or not isinstance(text, str):
        return None
    return counter_value(text, name)


def counter_value(exposition: str, name: str) -> float:
    """Sum of a counter's samples (`name` or `name_total`, any labels) in Prometheus text format."""
    total = 0.0
    for line in exposition.splitlines():
        metric, _, value = line.partition(" ")
        if metric.split("{")[0] in (name, f"{name}_total"):
            total += float(value.split()[0])
    return total


def counter_delta(before: float | None, after: float | None) -> float:
    """Growth of a counter between two scrapes; a restarted process starts again from zero."""
    if after is None:
        return 0.0
    if before is None or after < before:
        return after
    return after - before


def warm_up(url: str, body: Any, count: int = 4) -> None:
    """A few requests first, so that the measured run does not include lazy first-request work."""
    for _ in range(count):
        http_json(url, body, timeout=120)
