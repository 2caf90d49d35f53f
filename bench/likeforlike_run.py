"""The like-for-like rows run: each starts its two sides on the same cores, then alternates rounds."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from bench import likeforlike as lfl
from bench import names, targets
from bench.k6run import run_k6
from bench.likeforlike import Comparison, Pin, Round
from bench.likeforlike_job import bench_job, role_cpu_note
from bench.likeforlike_sides import (
    GPU_SKIPPED,
    PROMPT_TOKENS,
    TOKENS,
    Side,
    check_replicas,
    cores,
    load_note,
    openai_sampling,
    paused,
    replica_pids,
    sampling,
    scrape,
    start_stack,
    start_vllm,
    wait_stack,
    warm,
)
from bench.procs import (
    Server,
    cpu_by_role,
    cpu_since,
    free_port,
    running,
    tree_cpu_s,
)
from bench.session import Bench
from bench.targets import Hardware
from hunyuan_serve.replica.command import TEST_IGNORE_EOS_ENV


def run_rows(b: Bench, hw: Hardware, rows: Sequence[str], timeout_s: float) -> list[Comparison]:
    """The like-for-like rows asked for, one after another, each alone on the machine's cores."""
    table: dict[str, Callable[[], Comparison]] = {
        names.JOB: lambda: bench_job(b, hw, timeout_s),
        names.SINGLE: lambda: bench_single(b, hw, timeout_s),
        names.ASSEMBLED: lambda: bench_assembled(b, hw, timeout_s),
    }
    if hw.on_gpu and rows:
        b.notes.append(GPU_SKIPPED)
        return []
    done = []
    for row in rows:
        before = load_note()
        started = time.monotonic()
        comparison = _attempts(b, row, table[row])
        if comparison is None:
            continue
        comparison.notes.append(
            f"Row took {time.monotonic() - started:.0f} s; {before} before it, {load_note()} after "
            f"(on {os.cpu_count()} cores, shared with other sessions' work)."
        )
        done.append(comparison)
    return done


def _attempts(b: Bench, row: str, measure: Callable[[], Comparison], tries: int = 2) -> Comparison | None:
    """The row, started again once if it fails: on a shared machine a port the bench picked can be
    taken by another process before a server binds it."""
    for attempt in range(1, tries + 1):
        try:
            return measure()
        except (RuntimeError, TimeoutError, OSError, subprocess.SubprocessError) as err:
            b.notes.append(f"Like-for-like row {row}, attempt {attempt} of {tries}: failed: {err}")
            print(f"[bench] like-for-like {row} failed: {err}", flush=True)
    return None


# --- job vs engine limit ---------------------------------------------------------------------------


# --- one replica vs vllm serve, and the stack vs hand-assembled servers ---------------------------


def k6_round(
    b: Bench, side: Side, number: int, setup: str, *, client: Sequence[int], vus: int, idle: Sequence[int]
) -> Round:
    """One closed-loop pass: `lfl_requests` single-string requests, `vus` at once, from string
    number * lfl_requests on (both setups of a round send the same strings)."""
    url, api, meter = side.url, side.api, side.meter
    env = b.env(url, api=api, vus=vus, iterations=b.plan.lfl_requests)
    env["OFFSET"] = str(number * b.plan.lfl_requests)
    env["SAMPLING"] = json.dumps(openai_sampling(b) if api == "openai" else sampling(b), sort_keys=True)
    tokens0, prompt0 = scrape(meter, TOKENS), scrape(meter, PROMPT_TOKENS)
    cpu0, roles0 = sum(tree_cpu_s(pid) for pid in idle), cpu_by_role(side.pids)
    name = f"{setup.split(',')[0].replace(' ', '-')}-{number}"
    result = run_k6("pass.js", f"lfl-{name}", b.work / "k6", env, k6=b.k6_bin, samples=False, cores=client)
    idle_cpu = sum(tree_cpu_s(pid) for pid in idle) - cpu0
    roles = cpu_since(side.pids, roles0)
    tokens = scrape(meter, TOKENS) - tokens0 if meter else result.value("gen_tokens", "count")
    prompt = scrape(meter, PROMPT_TOKENS) - prompt0 if meter else result.value("prompt_tokens", "count")
    count = result.requests - result.failed
    return Round(
        number,
        setup,
        count,
        count / result.req_per_s if result.req_per_s else 0.0,
        tokens,
        prompt,
        result.failed,
        idle_cpu,
        f"p50 {result.latency_ms('med'):.0f} ms, p95 {result.latency_ms('p(95)'):.0f} ms; "
        f"{role_cpu_note(roles, count, 'a request')}",
    )


def alternate(b: Bench, c: Comparison, sides: Mapping[str, Side], client: Sequence[int], vus: int) -> None:
    """Alternating rounds; the side not measured is paused (SIGSTOP of its whole process tree)."""
    for number, setup in lfl.alternating(b.plan.lfl_rounds, c.setup, c.baseline):
        side = sides[setup]
        idle = [pid for other, s in sides.items() if other != setup for pid in s.pids]
        with paused(idle):
            side.ready()
            c.rounds.append(k6_round(b, side, number, setup, client=client, vus=vus, idle=idle))


def bench_single(b: Bench, hw: Hardware, timeout_s: float) -> Comparison:
    """`up --replicas 1` and `vllm serve`, each wholly on the first core, the client on the others."""
    pin, client = lfl.single_layout(hw, cores())
    flags = targets.stack_device_flags(hw, 1)
    stack, url, run_dir = start_stack(b, "single-stack", flags, cpus=pin.cores)
    vllm, vurl = start_vllm(b, hw, pin, "single-vllm")
    c = _single_comparison(b, pin, client)
    with running(stack), running(vllm):
        wait_stack(stack, url, run_dir, timeout_s)
        vllm.wait_http(f"{vurl}/v1/models", timeout_s)
        warm(url, "translate")
        warm(vurl, "openai")
        replicas = replica_pids(run_dir)
        sides = {
            c.setup: stack_side(stack, url, run_dir),
            c.baseline: Side(vurl, "openai", [], [vllm.proc.pid], lambda: None),
        }
        alternate(b, c, sides, client, b.plan.lfl_vus)
        check_replicas(c, run_dir, replicas)
    return c


def stack_side(stack: Server, url: str, run_dir: Path) -> Side:
    """The stack as one side: after a pause its supervisor and replicas are given up to a minute to
    say ready again before the round starts."""
    return Side(
        url,
        "translate",
        targets.replica_metrics(run_dir),
        [stack.proc.pid],
        lambda: wait_stack(stack, url, run_dir, 60),
    )


def _single_comparison(b: Bench, pin: Pin, client: Sequence[int]) -> Comparison:
    where = "k6 " + (f"on core(s) {','.join(map(str, client))}" if client else "unpinned")
    return Comparison(
        names.SINGLE,
        f"One replica vs `vllm serve` on the same {pin.label}",
        names.STACK_1,
        names.VLLM_PINNED,
        "req/s",
        pins=[
            f"stack: `taskset` to {pin.label} around `up --replicas 1`: its replica, Nginx and supervisor "
            "all there",
            "vLLM: `python -m vllm.entrypoints.openai.api_server` (API server and engine core) on "
            f"{pin.label}, "
            f"VLLM_CPU_OMP_THREADS_BIND as the replica's; {where}",
        ],
        notes=_load_notes(b, "/translate", single=True),
    )


def _load_notes(b: Bench, stack_api: str, *, single: bool) -> list[str]:
    return [
        f"Load: k6 pass.js, {b.plan.lfl_requests} single-string requests per round, "
        f"{b.plan.lfl_vus if single else b.plan.lfl_vus_assembled} at once; the stack gets {stack_api}, "
        "vLLM /v1/completions with the prompt the replica renders (bench/run.py build_items), "
        "tokenized without special tokens as the replica does (add_special_tokens false).",
        f"Every request: the family's sampling, max_tokens {b.plan.lfl_max_tokens}, EOS ignored (vLLM: "
        f"the request's ignore_eos; stack: {TEST_IGNORE_EOS_ENV}=1 on its replicas). Both setups of a "
        "round send the same strings; each round new ones, so the stack's cache never answers.",
        f"Rounds alternate, {b.plan.lfl_rounds} each, both servers started once; the one not measured is "
        "paused with SIGSTOP of its whole process tree (SIGCONT after), its CPU meanwhile in the table.",
        "Engine settings of both: bench/targets.ENGINE through the replicas' engine_kwargs (dtype, eager, "
        "max_num_seqs, context), the CPU environment of apply_cpu_env (KV cache size included).",
    ]


def start_assembled(b: Bench, hw: Hardware, pins: Sequence[Pin]) -> tuple[list[Server], list[str], str]:
    """N `vllm serve`, each on its own pin, and an Nginx from a hand-written nginx.conf before them
    (last in the list); returns the servers, the vLLM servers' URLs and Nginx's."""
    servers, urls = [], []
    for index, pin in enumerate(pins):
        server, url = start_vllm(b, hw, pin, f"assembled-vllm-{index}")
        servers.append(server)
        urls.append(url)
    ports = [int(url.rsplit(":", 1)[1]) for url in urls]
    prefix, port = b.work / "assembled-nginx", free_port()
    for sub in ("logs", "temp"):
        (prefix / sub).mkdir(parents=True, exist_ok=True)
    conf = prefix / "nginx.conf"
    conf.write_text(lfl.assembled_nginx_conf(str(prefix), port, ports), encoding="utf-8")
    nginx = ["nginx", "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "logs" / "error.log")]
    nginx += ["-g", "daemon off;"]
    servers.append(Server("assembled-nginx", nginx, prefix / "nginx.log", os.environ))
    return servers, urls, f"http://127.0.0.1:{port}"


def bench_assembled(b: Bench, hw: Hardware, timeout_s: float) -> Comparison:
    """`up --replicas N` against N `vllm serve` pinned as its replicas, behind a hand-written Nginx."""
    count = min(len(hw.gpus) if hw.on_gpu else len(cores()), b.plan.lfl_replicas)
    pins = lfl.engine_pins(hw, count, cores())
    flags = targets.stack_device_flags(hw, count)
    stack, url, run_dir = start_stack(b, "assembled-stack", flags)
    servers, upstreams, vurl = start_assembled(b, hw, pins)
    c = _assembled_comparison(b, pins, " ".join(flags))
    with contextlib.ExitStack() as stop:
        for server in (stack, *servers):
            stop.enter_context(running(server))
        wait_stack(stack, url, run_dir, timeout_s)
        for server, upstream in zip(servers, upstreams, strict=False):
            server.wait_http(f"{upstream}/v1/models", timeout_s)
        servers[-1].wait_http(f"{vurl}/v1/models", 30)
        warm(url, "translate")
        warm(vurl, "openai")
        replicas = replica_pids(run_dir)
        sides = {
            c.setup: stack_side(stack, url, run_dir),
            c.baseline: Side(vurl, "openai", [], [s.proc.pid for s in servers], lambda: None),
        }
        alternate(b, c, sides, (), b.plan.lfl_vus_assembled)
        check_replicas(c, run_dir, replicas)
    return c


def _assembled_comparison(b: Bench, pins: Sequence[Pin], flags: str) -> Comparison:
    return Comparison(
        names.ASSEMBLED,
        f"The stack vs {len(pins)} `vllm serve` behind a hand-written Nginx, on the same cores",
        names.STACK,
        names.ASSEMBLED_VLLM,
        "req/s",
        pins=[
            f"stack: `up {flags}`, its replicas on {', '.join(p.label for p in pins)}; Nginx and supervisor "
            "unpinned",
            f"vLLM: {len(pins)} api_servers on {', '.join(p.label for p in pins)} (taskset + "
            "VLLM_CPU_OMP_THREADS_BIND, as `up` pins), Nginx unpinned, from a minimal nginx.conf "
            "(least_conn, keepalive 64 to the upstreams, default access log: "
            "likeforlike.assembled_nginx_conf)",
            "k6 unpinned on both sides (there is no core left over)",
        ],
        notes=_load_notes(b, "/translate", single=False),
    )
