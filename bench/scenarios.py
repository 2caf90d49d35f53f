"""Each setup's start and the k6 scenarios run against it: the stack's, one replica's and the baselines'."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import documents, edge, names, refusal_probe, targets
from bench.procs import Server, cpu_hog, free_port, running, tree_rss_mb, warm_up
from bench.report import best_rate
from bench.session import Bench, overload_vus
from bench.setups import SetupPlan
from bench.stream_ttft import chat_body, measure, percentile, texts
from bench.targets import Hardware
from bench.workload import translate_body
from hunyuan_serve.config import ReplicaConfig

# The refusal probe's bound: it stops when the overload's k6 run ends, or after this (k6 starts its
# thousands of VUs before the run's 30 s).
OVERLOAD_PROBE_S = 600.0


@dataclass
class Started:
    """A setup whose server is starting: where it answers, and how to tell that it is ready."""

    server: Server
    url: str
    ready_path: str
    ready: Callable[[Any], bool] | None = None
    run_dir: Path | None = None
    base_port: int = 0
    replicas: int = 1

    def wait_ready(self, timeout_s: float) -> None:
        self.server.wait_http(f"{self.url}{self.ready_path}", timeout_s=timeout_s, ok=self.ready)


def start_serial(b: Bench, hw: Hardware) -> Started:
    server, url = targets.start_serial(b.model, b.work, hw)
    return Started(server, url, "/health")


def bench_serial(b: Bench, s: Started) -> None:
    warm_up(f"{s.url}/translate", translate_body())
    b.add(names.RAMP, names.SERIAL, b.k6("ramp.js", "ramp-serial", _ramp_env(b, s.url)))


def start_vllm(b: Bench, hw: Hardware) -> Started:
    server, url = targets.start_vllm(b.model, b.work, hw)
    return Started(server, url, "/v1/models")


def bench_vllm(b: Bench, s: Started) -> None:
    url = s.url
    warm_up(f"{url}/v1/completions", {"model": names.SERVED_NAME, "prompt": "Hello", "max_tokens": 8})
    b.add(names.RAMP, names.VLLM, b.k6("ramp.js", "ramp-vllm", _ramp_env(b, url, api="openai")))
    for rate in b.plan.rates:
        env = b.env(url, api="openai", rate=rate, duration=b.plan.rate_duration)
        b.add(names.RATE, names.VLLM, b.k6("rate.js", f"rate{rate}-vllm", env), offered=rate)
    bench_streaming(b, url, names.SERVED_NAME, names.VLLM)


def bench_streaming(b: Bench, url: str, model: str, setup: str) -> None:
    """Streamed chat completions (the family's prompt as the user turn, its sampling): TTFT and tokens/s."""
    from hunyuan_serve.families.build import build_prompt
    from hunyuan_serve.languages import find_language

    family = targets.model_family(str(b.model))
    bodies = []
    for text in texts(b.plan.stream_requests):
        prompt = build_prompt(family, find_language("en"), find_language("zh"), text)
        content = prompt.messages[0]["content"] if prompt.is_chat else prompt.text
        bodies.append(chat_body(model, content, b.sampling.as_dict(), b.plan.max_tokens))
    b.streaming[setup] = asyncio.run(measure(url, bodies, b.plan.stream_concurrency))


def _ramp_env(b: Bench, url: str, api: str = "translate", *, stack: bool = False) -> dict[str, str]:
    return b.env(url, api=api, stack=stack, vus=b.plan.ramp_vus, ramp=b.plan.ramp, hold=b.plan.hold)


def start_stack(b: Bench, device_flags: Sequence[str], replicas: int, name: str) -> Started:
    run_dir = b.work / name
    base_port = free_port()
    cpus = b.plan.stack_cores
    server, url = targets.start_stack(b.model, run_dir, device_flags, base_port=base_port, cpus=cpus)
    return Started(
        server, url, "/health", lambda _: targets.ready_replicas(run_dir) > 0, run_dir, base_port, replicas
    )


def bench_one_replica(b: Bench, s: Started) -> None:
    """The stack with a single replica over the same ramp: our serving layer against the vLLM server's
    with one engine each, apart from what a second replica changes."""
    meter = targets.replica_metrics(s.run_dir or b.work)
    warm_up(f"{s.url}/translate", translate_body())
    b.add(names.RAMP, names.STACK_1, b.k6("ramp.js", "ramp-stack1", _ramp_env(b, s.url), meter))
    bench_streaming(b, s.url, _served_model(s.url), names.STACK_1)


def bench_stack(b: Bench, s: Started, setup: SetupPlan) -> None:
    """The ramp, the open loop at each rate and the repeat passes; then, with two replicas or more,
    unequal replicas (where the setup plan has them) and chaos."""
    url, run_dir, base_port = s.url, s.run_dir or b.work, s.base_port
    replicas = targets.ready_replicas(run_dir) or s.replicas
    if replicas != s.replicas:
        b.notes.append(f"The stack runs {replicas} replica(s), not the {s.replicas} planned.")
    meter = targets.replica_metrics(run_dir)
    if b.plan.k6_cores:  # before the ramp: the capacity the overload is sized from, in the same layout
        _pin_nginx(b, run_dir, b.plan.k6_cores)
    warm_up(f"{url}/translate", translate_body())
    ramp = b.k6("ramp.js", "ramp-stack", _ramp_env(b, url, stack=True), meter)
    b.add(names.RAMP, names.STACK, ramp, cached=True)
    if b.plan.only == names.OVERLOAD:  # sized from the ramp's capacity, compared with its p95
        bench_overload(b, url, run_dir, meter, replicas)
        return
    for rate in b.plan.rates:
        env = b.env(url, stack=True, rate=rate, duration=b.plan.rate_duration)
        result = b.k6("rate.js", f"rate{rate}-stack", env, meter)
        b.add(names.RATE, names.STACK, result, offered=rate, cached=True)
    # Both passes send the same strings (one env): the second one is what the cache saves.
    env = b.env(url, stack=True, iterations=b.plan.pass_iterations, vus=b.plan.pass_vus)
    for attempt, setup_name in (("first", names.FIRST_PASS), ("second", names.SECOND_PASS)):
        result = b.k6("pass.js", f"pass-{attempt}", env, meter)
        b.add(names.REPEAT, setup_name, result, cached=attempt == "second")
    bench_streaming(b, url, _served_model(url), names.STACK)
    b.documents = documents.run(url, b.plan.document_sentences, serial=b.plan.document_serial)
    bench_overload(b, url, run_dir, meter, replicas)
    if replicas < 2:
        b.notes.append("Unequal replicas and chaos need two replicas or more: skipped.")
        return
    if setup.unequal:
        bench_unequal(b, url, run_dir, setup.stack_flags, base_port, meter)
    bench_chaos(b, url, run_dir, meter)


def _pin_nginx(b: Bench, run_dir: Path, cores: Sequence[int]) -> None:
    """Move the stack's Nginx (master and workers; workers it starts later inherit the master's) onto
    `cores`, beside k6 and away from the replicas: no product setting pins Nginx's workers."""
    import psutil

    pid = int((targets.stack_status(run_dir).get("nginx") or {}).get("pid") or 0)
    try:
        procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)] if pid else []
        for proc in procs:
            os.sched_setaffinity(proc.pid, set(cores))
    except (psutil.Error, OSError) as err:
        b.notes.append(f"Nginx could not be pinned to core(s) {list(cores)}: {err}")
        return
    replicas = [r.get("device") for r in targets.stack_status(run_dir).get("replicas", [])]
    b.notes.append(
        f"Pinned: k6 and Nginx ({len(procs)} processes) on core(s) {list(cores)}, the stack's `up` on "
        f"{list(b.plan.stack_cores)} (replica devices {replicas})."
    )


def _served_model(url: str) -> str:
    """The id the stack's /v1/models gives: what its OpenAI clients send as `model`."""
    import httpx

    return str(httpx.get(f"{url}/v1/models", timeout=10, trust_env=False).json()["data"][0]["id"])


def _chaos_rate(b: Bench) -> int:
    best = best_rate(b.results.get(names.RATE, []), b.plan.p95_ms, b.plan.fail_rate)
    return max(2, int((best.offered or 4) * 0.5)) if best else max(2, b.plan.rates[0] // 2)


def bench_unequal(
    b: Bench, url: str, run_dir: Path, device_flags: Sequence[str], base_port: int, meter: Sequence[str]
) -> None:
    """CPU only: replica 1 shares its core with busy loops; the same open loop through least_conn
    and round robin (a second Nginx in front of the same replicas)."""
    rate = _chaos_rate(b)
    rr_server, rr_url = targets.start_round_robin_nginx(
        b.model, device_flags, base_port, b.work / "round-robin"
    )
    with running(rr_server), cpu_hog(core=_replica_core(run_dir, 1), count=b.plan.hogs):
        rr_server.wait_http(f"{rr_url}/health", timeout_s=30)
        for setup, target in ((names.LEAST_CONN, url), (names.ROUND_ROBIN, rr_url)):
            env = b.env(target, stack=True, rate=rate, duration=b.plan.unequal_duration)
            name = "unequal-" + setup.removeprefix("stack, ").replace(" ", "-")
            result = b.k6("rate.js", name, env, meter)
            b.add(names.UNEQUAL, setup, result, offered=rate, cached=True)
    b.notes.append(
        f"Unequal replicas: {b.plan.hogs} busy loop(s) pinned to replica 1's core; open loop at {rate} req/s."
    )


def _capacity(b: Bench) -> tuple[float, float]:
    """The stack's measured capacity (req/s) and its p95 there (ms): the most requests/s any of its runs
    so far served without failures (the ramp, the open loop, the first pass). Not the highest offered
    rate of the open loop that held its targets: QUICK offers one low rate only, far under capacity."""
    served = [(names.RAMP, names.STACK), (names.RATE, names.STACK), (names.REPEAT, names.FIRST_PASS)]
    rows = [r for scenario, setup in served for r in b.results.get(scenario, []) if r.setup == setup]
    top = max((r for r in rows if r.result.failed == 0), key=lambda r: r.result.req_per_s, default=None)
    if top is None or top.result.req_per_s <= 0:
        return 1.0, 0.0
    return round(top.result.req_per_s, 1), top.result.latency_ms("p(95)")


def _stack_rss_mb(run_dir: Path) -> tuple[float, float]:
    """Resident memory (MB) of the stack's Nginx (master and workers) and of all its replicas' trees."""
    status = targets.stack_status(run_dir)
    nginx_pid = int((status.get("nginx") or {}).get("pid") or 0)
    pids = [int(r.get("pid") or 0) for r in status.get("replicas", [])]
    return (tree_rss_mb(nginx_pid) if nginx_pid else 0.0), sum(tree_rss_mb(p) for p in pids if p)


def bench_overload(b: Bench, url: str, run_dir: Path, meter: Sequence[str], replicas: int) -> None:
    """The open loop at overload_factor times the measured capacity: the excess should be refused at
    the edge in milliseconds (JSON 503, Retry-After) while the accepted requests stay served. Nginx's
    access log gives its own time for each refusal, beside the time k6 measured (on the same cores)."""
    capacity, p95 = _capacity(b)
    rate = max(1, round(capacity * b.plan.overload_factor))
    nginx = targets.stack_status(run_dir).get("nginx") or {}
    access_log = Path(str(nginx.get("access_log") or run_dir / "nginx" / "logs" / "access.log"))
    cap = edge.edge_cap(Path(str(nginx.get("config") or run_dir / "nginx" / "nginx.conf")))
    vus = overload_vus(b.plan, rate, replicas, cap or ReplicaConfig().max_in_flight)
    nginx_before, replicas_before = _stack_rss_mb(run_dir)
    offset = edge.log_size(access_log)
    env = b.env(url, stack=True, rate=rate, duration=b.plan.overload_duration, vus=vus, pre_vus=vus)
    # The probe beside k6 times refusals as a client with a core to spare would see them: k6's own
    # figure counts its lateness among thousands of VUs (bench/refusal_probe.py says what was measured).
    probe_file = b.work / "refusal-probe.jsonl"
    with refusal_probe.probing(url, probe_file, OVERLOAD_PROBE_S, cores=b.plan.k6_cores) as probed:
        result = b.k6("overload.js", "overload", env, meter, samples=False)  # no plot: samples cost CPU
    probe = refusal_probe.refused_ms(refusal_probe.read_samples(probed))
    nginx_after, replicas_after = _stack_rss_mb(run_dir)
    own = edge.edge_refusals_ms(access_log, offset) if access_log.is_file() else []
    b.overload = {
        "capacity_rps": capacity,
        "capacity_p95_ms": p95,
        "edge_cap": cap,
        "vus": vus,
        "nginx_refusals": len(own),
        **{f"nginx_refused_{q}_ms": percentile(own, q) for q in (50, 95, 99)},
        "probe_refusals": len(probe),
        **{f"probe_refused_{q}_ms": percentile(probe, q) for q in (50, 95, 99)},
        "nginx_mb_before": nginx_before,
        "nginx_mb_after": nginx_after,
        "replicas_mb_before": replicas_before,
        "replicas_mb_after": replicas_after,
    }
    b.add(names.OVERLOAD, names.OVERLOADED, result, offered=rate, cached=True)


def _replica_core(run_dir: Path, index: int) -> int:
    replicas = targets.stack_status(run_dir).get("replicas", [])
    device = str(replicas[index].get("device", f"cpu:{index}")) if len(replicas) > index else f"cpu:{index}"
    first = device.split(":", 1)[-1].split(",")[0].split("-")[0]
    return int(first) if first.isdigit() else index


def bench_chaos(b: Bench, url: str, run_dir: Path, meter: Sequence[str]) -> None:
    """An open loop while one replica gets kill -9 part-way; the supervisor should keep it invisible."""
    rate = _chaos_rate(b)
    env = b.env(url, stack=True, rate=rate, duration=f"{b.plan.chaos_duration_s}s")
    replicas = targets.stack_status(run_dir).get("replicas", [])
    pid = int(replicas[0].get("pid") or 0) if replicas else 0
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        future = pool.submit(b.k6, "chaos.js", "chaos", env, meter)
        time.sleep(b.plan.chaos_kill_at_s)
        if pid > 0:
            os.kill(pid, signal.SIGKILL)
            b.chaos_kill_time = time.time()
            b.notes.append(f"Chaos: kill -9 of replica 0 (pid {pid}) {b.plan.chaos_kill_at_s:.0f} s in.")
        else:
            b.notes.append("Chaos: no replica pid found in `status --json`; nothing was killed.")
        b.add(names.CHAOS, names.KILLED, future.result(), offered=rate, cached=True)
