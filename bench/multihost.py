"""The bench's multi-host row: one k6 ramp through the gateway to one host, then to two (namespaces)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import yaml

from bench import names, netns, targets
from bench.k6run import K6Result
from bench.procs import Server, counter_delta, counter_value, free_port, running, server_env, warm_up
from bench.report import Row, ratio
from bench.session import TOKENS_COUNTER, Bench
from bench.targets import HUNYUAN, Hardware

HOSTS = ("a", "b")
HOST_PORT = 8080  # each host's Nginx on its own address: namespaces share no ports
REPLICA_PORT = 8101
PEER_HEADER = "X-Hunyuan-Peer"
WARM_RAMP = "5s"  # the uncounted ramp before each measured one (up, then held as long)


def unavailable(hw: Hardware, cores: Sequence[int], why_not_netns: str | None) -> str | None:
    """Why two hosts cannot be benched here (None: they can): a device each, and namespaces to make."""
    if hw.on_gpu and len(hw.gpus) < len(HOSTS):
        return f"{len(hw.gpus)} GPU(s): two hosts need one each"
    if not hw.on_gpu and len(cores) < len(HOSTS):
        return f"{len(cores)} CPU core(s): two hosts need one each"
    return f"no network namespaces: {why_not_netns}" if why_not_netns else None


def host_prefix(hw: Hardware, index: int, cores: Sequence[int]) -> list[str]:
    """What runs a host's `up` on its own device: taskset to its core (CPU), nothing on GPUs."""
    return [] if hw.on_gpu else ["taskset", "--cpu-list", str(sorted(cores)[index])]


def host_argv(model: Path, run_dir: Path, hw: Hardware, index: int, addr: str, secret: Path) -> list[str]:
    """The stack's own `up` argv (targets.stack_argv: the same engine settings) with one replica on the
    host's address behind the peer secret; on GPUs the host's own device."""
    device = targets.stack_device_flags(Hardware((hw.gpus[index],)) if hw.on_gpu else hw, 1)
    argv = targets.stack_argv(
        model, run_dir, device, port=HOST_PORT, base_port=REPLICA_PORT, balance="least_conn"
    )
    return [*argv, "--replica-host", addr, "--nginx-listen", addr, "--peer-secret-file", str(secret)]


def inventory(urls: Sequence[tuple[str, str]], secret: Path, port: int) -> dict[str, Any]:
    """The gateway's inventory for these (name, url) hosts; its front on loopback."""
    return {
        "peer_secret_file": str(secret),
        # The bench's hosts are network namespaces on this machine: plain HTTP carries nothing off it.
        "hosts": [{"name": name, "url": url, "allow_plain": True} for name, url in urls],
        "nginx": {"port": port},
    }


def _host_ready(run_dir: Path) -> bool:
    from hunyuan_serve.run.state import read_state

    state = read_state(run_dir)
    if state is None or not state.get("running"):
        return False
    return all(r["state"] == "ready" for r in state["replicas"]) and state["nginx"]["ready"] >= 1


def _wait(server: Server, ready: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.name} exited with {server.proc.returncode}; see {server.log_path}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not within {timeout_s:.0f} s; see {server.log_path}")
        time.sleep(1.0)


def _tokens(urls: Sequence[str], secret: str) -> list[float | None]:
    """Each replica's generated-token counter, asked with the peer secret (the replicas refuse without)."""
    import httpx

    found: list[float | None] = []
    for url in urls:
        try:
            text = httpx.get(url, headers={PEER_HEADER: secret}, timeout=5, trust_env=False).text
            found.append(counter_value(text, TOKENS_COUNTER))
        except httpx.HTTPError:
            found.append(None)
    return found


@contextlib.contextmanager
def _gateway(b: Bench, urls: Sequence[tuple[str, str]], secret: Path, timeout_s: float) -> Iterator[str]:
    """The gateway in the root namespace in front of these hosts; yields its URL once all are routed."""
    port, run_dir = free_port(), b.work / f"gateway-{len(urls)}"
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "inventory.yaml"
    path.write_text(yaml.safe_dump(inventory(urls, secret, port)), encoding="utf-8")
    argv = [*HUNYUAN, "gateway", "--inventory", str(path), "--run-dir", str(run_dir)]
    url = f"http://127.0.0.1:{port}"
    with running(Server(f"gateway-{len(urls)}", argv, run_dir / "gateway.log", server_env())) as server:
        server.wait_http(
            f"{url}/health", timeout_s, ok=lambda j: isinstance(j, dict) and j.get("ready") == len(urls)
        )
        yield url


def _measure(b: Bench, setup: str, urls: Sequence[tuple[str, str]], secret: Path, timeout_s: float) -> None:
    """The stack's ramp through the gateway to these hosts, recorded under setup."""
    metrics = [
        f"http://{u.removeprefix('http://').rsplit(':', 1)[0]}:{REPLICA_PORT}/metrics" for _, u in urls
    ]
    token = secret.read_text(encoding="utf-8").strip()
    with _gateway(b, urls, secret, timeout_s) as url:
        warm_up(f"{url}/translate", {"text": "Open file", "source_lang": "en", "target_lang": "zh"})
        # A short ramp first, not counted: an engine may be slower on batch sizes it has not met yet,
        # and the two-host run would otherwise meet host a warm and host b cold.
        warm = b.env(url, stack=True, vus=b.plan.ramp_vus, ramp=WARM_RAMP, hold=WARM_RAMP)
        b.cursor += b.k6("ramp.js", f"warm-{len(urls)}host", warm, samples=False).requests
        env = b.env(url, stack=True, vus=b.plan.ramp_vus, ramp=b.plan.ramp, hold=b.plan.hold)
        before = _tokens(metrics, token)
        result = b.k6("ramp.js", f"ramp-{len(urls)}host", env)
        after = _tokens(metrics, token)
        result.server_tokens = sum(counter_delta(x, y) for x, y in zip(before, after, strict=True))
        b.add(names.HOSTS, setup, result, cached=True)


def bench_hosts(b: Bench, hw: Hardware, start_timeout_s: float, timings: dict[str, float]) -> None:
    """Host a alone behind the gateway, then hosts a and b (b started only then, so that its idle
    engine takes nothing from the first run); each host one replica on its own core or GPU."""
    cores = sorted(os.sched_getaffinity(0))
    why = unavailable(hw, cores, netns.unavailable())
    if why:
        b.notes.append(f"Two hosts behind the gateway: skipped ({why}).")
        return
    t0 = time.monotonic()
    secret = b.work / "peer.secret"
    secret.write_text(os.urandom(24).hex() + "\n", encoding="utf-8")
    secret.chmod(0o600)  # `up` and the gateway refuse a peer secret others may read
    with netns.hosts(HOSTS) as lab, contextlib.ExitStack() as stack:
        urls: list[tuple[str, str]] = []
        for index, name in enumerate(HOSTS):
            host, run_dir = lab.host(name), b.work / f"host-{name}"
            argv = host.argv(
                [*host_prefix(hw, index, cores), *host_argv(b.model, run_dir, hw, index, host.addr, secret)]
            )
            server = stack.enter_context(
                running(Server(f"host-{name}", argv, b.work / f"up-host-{name}.log", server_env()))
            )
            _wait(server, lambda d=run_dir: _host_ready(d), start_timeout_s, f"host {name} ready")
            urls.append((name, host.url(HOST_PORT)))
            setup = names.GATEWAY_1 if len(urls) == 1 else names.GATEWAY_2
            _measure(b, setup, urls, secret, start_timeout_s)
    timings["two hosts behind the gateway"] = time.monotonic() - t0
    b.notes.append(
        "Two hosts behind the gateway: each run is preceded by an uncounted ramp "
        f"({WARM_RAMP} up, {WARM_RAMP} held); host b starts only after host a's run."
    )


def comparison(rows: Sequence[Row]) -> list[tuple[str, K6Result, K6Result]]:
    """The report's ratio row: two hosts over one."""
    one = next((r.result for r in rows if r.setup == names.GATEWAY_1), None)
    two = next((r.result for r in rows if r.setup == names.GATEWAY_2), None)
    return [(f"{names.GATEWAY_2} / {names.GATEWAY_1}", two, one)] if one and two else []


def headline(b: Bench) -> list[str]:
    """The throughput ratio of two hosts to one, in words."""
    pairs = comparison(b.results.get(names.HOSTS, []))
    if not pairs:
        return []
    _, two, one = pairs[0]
    return [
        f"- Two hosts vs one behind the gateway (ramp to {b.plan.ramp_vus} VUs, one replica per host): "
        f"{ratio(two.req_per_s, one.req_per_s)} the requests/s ({two.req_per_s:.1f} vs {one.req_per_s:.1f}), "
        f"p95 {two.latency_ms('p(95)'):.0f} ms vs {one.latency_ms('p(95)'):.0f} ms; "
        f"failed {two.failed} vs {one.failed}."
    ]
