"""The serving layer's own cost: `up` on the engine stand-in, k6 through Nginx, CPU per string.

The stack (`up`, its Nginx and its replicas) runs pinned to --stack-cores, k6 to --load-core with
GOMAXPROCS=1, so the load generator never takes the layer's CPU. Every string is unique (a WebUI
string plus a per-request suffix): the cache never answers, and the run checks that it did not.

    flock /tmp/hs-heavy.lock .venv/bin/python -m bench.layer
    flock /tmp/hs-heavy.lock .venv/bin/python -m bench.layer --profile /tmp/profile-layer.txt
    flock /tmp/hs-heavy.lock .venv/bin/python -m bench.layer --code /tmp/base  # another checkout's stack
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.k6run import K6_DIR, find_k6
from bench.procs import REPO, Server, counter_delta, free_port, scrape_counter, server_env

DATA = REPO / "bench" / "data" / "sd-webui-zh_CN.json"
SCRIPT = K6_DIR / "layer.js"
TICKS = os.sysconf("SC_CLK_TCK")
TOP_ENTRIES = 25
_LINE = re.compile(r":\d+\)$")  # py-spy names frames "func (file:line)"; entries are per function


@dataclass(frozen=True)
class LayerPlan:
    """What one run measures, and where each part runs."""

    duration_s: int = 10
    warmup_s: int = 3
    single_vus: int = 64  # connections at once, one string per request
    batch_vus: int = 8  # connections at once, `batch` strings per request
    batch: int = 32
    replicas: int = 1
    stack_cores: str = "0"
    load_core: str = "1"
    code: Path = REPO  # the checkout whose hunyuan_serve the stack runs
    profile: Path | None = None  # py-spy's top entries of the replica under each load, written here
    qa: str | None = None  # the stack's replica.qa (off, flag, retry); None: the checkout's default


def proc_cpu_s(pid: int) -> float:
    """utime + stime of one process (all its threads) from /proc/<pid>/stat; 0 once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / TICKS  # fields 14 and 15 of proc(5)


def _tree(pid: int) -> list[int]:
    import psutil

    try:
        root = psutil.Process(pid)
        return [root.pid, *(child.pid for child in root.children(recursive=True))]
    except psutil.Error:
        return []


def stack_pids(up_pid: int) -> dict[str, list[int]]:
    """The replicas' process trees and Nginx's processes among `up`'s descendants."""
    import psutil

    found: dict[str, list[int]] = {"replica": [], "nginx": []}
    for proc in psutil.Process(up_pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            cmdline = proc.cmdline()
            if proc.name().startswith("nginx"):
                found["nginx"].append(proc.pid)
            elif "replica" in cmdline and "hunyuan_serve" in cmdline:
                found["replica"] += _tree(proc.pid)
    return found


def cpu_of(pids: dict[str, list[int]]) -> dict[str, float]:
    return {part: sum(proc_cpu_s(pid) for pid in each) for part, each in pids.items()}


def start_stack(plan: LayerPlan, model: Path, work: Path) -> tuple[Server, str, int]:
    """`up` with the stand-in on the tiny checkpoint; returns it, Nginx's URL and the first replica port."""
    port, base = free_port(), free_port()
    # Run from the checkout: `python -m` puts the working directory first on sys.path, before
    # PYTHONPATH, and the replicas `up` starts inherit it.
    argv = ["env", "-C", str(plan.code), "taskset", "-c", plan.stack_cores]
    argv += [sys.executable, "-m", "hunyuan_serve", "up"]
    argv += ["--model", str(model), "--replicas", str(plan.replicas), "--stand-in", "true"]
    argv += ["--port", str(port), "--base-port", str(base), "--run-dir", str(work / "run")]
    # The tiny checkpoint's own length: 512 refuses a few of the WebUI file's longest strings (413).
    argv += ["--max-model-len", "2048", "--log-level", "warning"]
    argv += ["--qa", plan.qa] if plan.qa else []  # the answer checks: --qa off against the default
    env = server_env({"PYTHONPATH": str(plan.code)})
    server = Server("up (stand-in)", argv, work / "up.log", env)
    url = f"http://127.0.0.1:{port}"
    server.wait_http(f"{url}/health", 180, ok=lambda body: body.get("ready") == plan.replicas)
    return server, url, base


def k6_run(plan: LayerPlan, url: str, batch: int, vus: int, duration_s: int, tag: str, work: Path) -> Any:
    """One constant-VUs k6 run pinned to the load core; its JSON summary."""
    summary = work / f"k6-{tag}.json"
    env = server_env(
        {
            "BASE_URL": url,
            "BATCH": str(batch),
            "VUS": str(vus),
            "DURATION": f"{duration_s}s",
            "DATA": str(DATA),
            "RUN": tag,
            "SUMMARY": str(summary),
            "GOMAXPROCS": "1",
        }
    )
    argv = ["taskset", "-c", plan.load_core, find_k6(), "run", "--quiet", "--no-color", str(SCRIPT)]
    subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL, cwd=str(work))
    return json.loads(summary.read_text())


def _metric(summary: Any, name: str, stat: str) -> float:
    return float(summary["metrics"].get(name, {}).get("values", {}).get(stat, 0.0))


@contextlib.contextmanager
def profiled(plan: LayerPlan, pids: list[int], name: str, seconds: int, out: list[str]) -> Iterator[None]:
    """py-spy samples the first replica (pinned to the load core) while the body runs: its figures are
    lower than an unprofiled run's, so a profiled run's figures are not the ones to compare."""
    if plan.profile is None or not pids:
        yield
        return
    raw = plan.profile.with_suffix(f".{name}.raw")
    argv = ["taskset", "-c", plan.load_core, str(Path(sys.executable).parent / "py-spy"), "record"]
    argv += ["-p", str(pids[0]), "-d", str(seconds), "-r", "200", "-f", "raw", "-o", str(raw)]
    # --gil: only samples that hold the GIL, i.e. Python running, not the loop waiting in epoll.
    argv += ["--nonblocking", "--gil", "--threads"]  # a "thread (id)" entry per thread in the cumulative list
    spy = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        spy.wait(seconds + 30)
        out.append(top_entries(raw.read_text(encoding="utf-8"), f"{name} load"))
        raw.unlink()


def top_entries(collapsed: str, title: str, top: int = TOP_ENTRIES) -> str:
    """Own and cumulative time per function from py-spy's collapsed stacks ("a;b;c count" lines)."""
    own: Counter[str] = Counter()
    cumulative: Counter[str] = Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_LINE.sub(")", frame.strip()) for frame in stack.split(";")]
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            cumulative[frame] += count
    lines = [f"## {title}: {total} samples", "", "own %   function"]
    lines += [f"{100 * n / max(total, 1):5.1f}   {frame}" for frame, n in own.most_common(top)]
    lines += ["", "cumul % function"]
    lines += [f"{100 * n / max(total, 1):5.1f}   {frame}" for frame, n in cumulative.most_common(top)]
    return "\n".join(lines) + "\n"


Stack = tuple[Server, str, int]


def phase(
    plan: LayerPlan, stack: Stack, batch: int, vus: int, work: Path, out: list[str]
) -> dict[str, float]:
    """One measured load: requests and strings per second, replica and Nginx CPU-µs per string."""
    server, url, base = stack
    pids = stack_pids(server.proc.pid)
    cwd = {os.readlink(f"/proc/{pid}/cwd") for pid in pids["replica"]}
    if cwd != {str(plan.code)}:
        raise RuntimeError(f"the replicas run from {sorted(cwd)}, not from {plan.code}")
    metrics_url = f"http://127.0.0.1:{base}/metrics"
    name = "batched" if batch else "single"
    hits = scrape_counter(metrics_url, "hunyuan_cache_hits")
    before = cpu_of(pids)
    with profiled(plan, pids["replica"], name, plan.duration_s, out):
        summary = k6_run(plan, url, batch, vus, plan.duration_s, f"{name}-{os.getpid()}", work)
    after = cpu_of(pids)
    requests = _metric(summary, "http_reqs", "count")
    strings = requests * max(batch, 1)
    seconds = requests / max(_metric(summary, "http_reqs", "rate"), 1e-9)  # k6's own run duration
    cores = plan.replicas
    return {
        "requests_per_s": requests / seconds,
        "strings_per_s": strings / seconds,
        "strings_per_s_per_core": strings / seconds / cores,
        "replica_cpu_us_per_string": 1e6 * (after["replica"] - before["replica"]) / max(strings, 1),
        "nginx_cpu_us_per_string": 1e6 * (after["nginx"] - before["nginx"]) / max(strings, 1),
        "failed_rate": _metric(summary, "http_req_failed", "rate"),
        "p50_ms": _metric(summary, "http_req_duration", "med"),
        "p99_ms": _metric(summary, "http_req_duration", "p(99)"),
        "cache_hits": counter_delta(hits, scrape_counter(metrics_url, "hunyuan_cache_hits")),
    }


def checks_cost() -> dict[str, float]:
    """The answer checks alone (hunyuan_serve/qa), in this process: CPU-µs per string over the workload
    with each human zh_CN translation as the answer, as the replica runs them on every answer."""
    from hunyuan_serve.config.qa import QaSettings
    from hunyuan_serve.qa.check import Answer, check

    pairs = json.loads(DATA.read_text(encoding="utf-8"))
    cfg = QaSettings()
    check(Answer("Warm up the detector.", "预热检测器。", "en", "zh"), cfg)  # its model loads once
    started = time.process_time()
    for source, human in pairs.items():
        check(Answer(source, human, "en", "zh"), cfg)
    return {"strings": len(pairs), "cpu_us_per_string": 1e6 * (time.process_time() - started) / len(pairs)}


def measure(plan: LayerPlan) -> dict[str, Any]:
    """The figures of one run (the coordinator's `make bench` can call this): a warm-up, then one
    single-string load and one batched load against the same stack."""
    from hunyuan_serve.tiny_model import build_tiny_model

    profile: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-layer-") as tmp:
        work = Path(tmp)
        model = build_tiny_model(work / "tiny-hunyuan-mt")
        server, url, base = start_stack(plan, model, work)
        try:
            k6_run(plan, url, 0, plan.single_vus, plan.warmup_s, f"warm-{os.getpid()}", work)
            k6_run(plan, url, plan.batch, plan.batch_vus, plan.warmup_s, f"warmb-{os.getpid()}", work)
            single = phase(plan, (server, url, base), 0, plan.single_vus, work, profile)
            batched = phase(plan, (server, url, base), plan.batch, plan.batch_vus, work, profile)
        finally:
            server.stop()
    if plan.profile is not None:
        plan.profile.write_text("".join(profile), encoding="utf-8")
    return {
        "code": str(plan.code),
        "replicas": plan.replicas,
        "stack_cores": plan.stack_cores,
        "load_core": plan.load_core,
        "duration_s": plan.duration_s,
        "qa": plan.qa or "default",
        "checks": checks_cost(),
        "single": {"vus": plan.single_vus, **single},
        "batched": {"vus": plan.batch_vus, "batch": plan.batch, **batched},
    }


def format_figures(figures: dict[str, Any]) -> str:
    single, batched = figures["single"], figures["batched"]
    where = (
        f"stack (up, Nginx, {figures['replicas']} replica(s)) on core(s) {figures['stack_cores']}, "
        f"k6 on core {figures['load_core']} (GOMAXPROCS=1), {figures['duration_s']} s per load; code "
        f"{figures['code']}"
    )
    rows = [where, "", f"{'load':28s} {'req/s':>8s} {'str/s/core':>10s} {'replica µs/str':>14s}"]
    rows[-1] += f" {'nginx µs/str':>12s} {'p50 ms':>7s} {'p99 ms':>7s} {'failed':>6s} {'hits':>5s}"
    for label, row in (
        (f"single, {single['vus']} at once", single),
        (f"batch of {batched['batch']}, {batched['vus']} at once", batched),
    ):
        rows.append(
            f"{label:28s} {row['requests_per_s']:8.0f} {row['strings_per_s_per_core']:10.0f} "
            f"{row['replica_cpu_us_per_string']:14.0f} {row['nginx_cpu_us_per_string']:12.0f} "
            f"{row['p50_ms']:7.1f} {row['p99_ms']:7.1f} {row['failed_rate']:6.3f} {row['cache_hits']:5.0f}"
        )
    if "checks" in figures:  # figures of a run before the answer checks have none
        checks = figures["checks"]
        rows.append(f"{'answer checks, in-process':28s} {'':8s} {'':10s} {checks['cpu_us_per_string']:14.0f}")
        rows.append(f"(stack replica.qa: {figures['qa']}; checks over {checks['strings']} human answers)")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.layer", description=__doc__.splitlines()[0])
    defaults = LayerPlan()
    parser.add_argument("--duration", type=int, default=defaults.duration_s, help="Seconds per load.")
    parser.add_argument("--single-vus", type=int, default=defaults.single_vus)
    parser.add_argument("--batch-vus", type=int, default=defaults.batch_vus)
    parser.add_argument("--batch", type=int, default=defaults.batch, help="Texts per batched request.")
    parser.add_argument("--replicas", type=int, default=defaults.replicas)
    parser.add_argument("--stack-cores", default=defaults.stack_cores, help="taskset list for `up`.")
    parser.add_argument("--load-core", default=defaults.load_core, help="taskset list for k6.")
    parser.add_argument("--code", type=Path, default=REPO, help="Checkout whose hunyuan_serve `up` runs.")
    parser.add_argument("--profile", type=Path, help="Write py-spy's top entries of the replica here.")
    parser.add_argument("--json", type=Path, help="Also write the figures here as JSON.")
    parser.add_argument("--qa", choices=("off", "flag", "retry"), help="The stack's replica.qa.")
    args = parser.parse_args(argv)
    plan = LayerPlan(
        duration_s=args.duration,
        single_vus=args.single_vus,
        batch_vus=args.batch_vus,
        batch=args.batch,
        replicas=args.replicas,
        stack_cores=args.stack_cores,
        load_core=args.load_core,
        code=args.code.resolve(),
        profile=args.profile,
        qa=args.qa,
    )
    figures = measure(plan)
    print(format_figures(figures))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
