"""`make bench`: k6 against the stack and its baselines in one run, then a Markdown report with plots."""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/run.py` as well as `python -m bench.run`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import documents, edge, ensemble, fairness, layer, likeforlike_run, multihost, names, soak, targets
from bench.k6run import find_k6
from bench.procs import REPO, Server, cpu_hog, free_port, running, tree_cpu_s, tree_rss_mb, warm_up
from bench.report import best_rate
from bench.session import LIKEFORLIKE_ONLY, Bench, Plan, lfl_only, only, overload_vus, split_cores
from bench.setups import SetupPlan, plan_setups
from bench.stream_ttft import chat_body, measure, percentile, texts
from bench.targets import Hardware
from bench.write_report import write_likeforlike_report, write_report
from hunyuan_serve.config import ReplicaConfig

DATA = REPO / "bench" / "data" / "sd-webui-zh_CN.json"
# A chat prompt rendered as the replica's engine renders it: ending where the answer starts.
GENERATE = {"add_generation_prompt": True}


def build_items(model: Path, out: Path, limit: int | None = None) -> None:
    """The workload with each string's prompt as the stack builds it, for the vLLM server baseline.
    Blank strings are left out: there is nothing to translate (the service answers them 422).
    """
    texts = [text for text in json.loads(DATA.read_text(encoding="utf-8")) if text.strip()]
    if limit:
        texts = texts[:limit]
    prompts = _prompts(model, texts)
    out.write_text(json.dumps(prompts, ensure_ascii=False), encoding="utf-8")


def _prompts(model: Path, texts: list[str]) -> list[dict[str, Any]]:
    """Completion prompts as the replica builds them (chat prompts rendered by the model's template)."""
    from hunyuan_serve.families.build import build_prompt
    from hunyuan_serve.languages import find_language

    family = targets.model_family(str(model))
    source, target = find_language("en"), find_language("zh")
    tokenizer: Any = None  # loaded for the first chat prompt only
    items = []
    for text in texts:
        prompt = build_prompt(family, source, target, text)
        rendered = prompt.text
        if prompt.is_chat:
            tokenizer = tokenizer or _tokenizer(model)
            chat = tokenizer.apply_chat_template(
                list(prompt.messages), tokenize=False, add_generation_prompt=True
            )
            rendered = str(chat)
        items.append({"text": text, "prompt": rendered, "stop": list(prompt.stop) or None})
    return items


def _tokenizer(model: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model))


def translate_body() -> dict[str, Any]:
    return {"text": "Open file", "source_lang": "en", "target_lang": "zh", "max_tokens": 16}


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
    result = b.k6("overload.js", "overload", env, meter, samples=False)  # no plot: samples cost k6 CPU
    nginx_after, replicas_after = _stack_rss_mb(run_dir)
    own = edge.edge_refusals_ms(access_log, offset) if access_log.is_file() else []
    b.overload = {
        "capacity_rps": capacity,
        "capacity_p95_ms": p95,
        "edge_cap": cap,
        "vus": vus,
        "nginx_refusals": len(own),
        **{f"nginx_refused_{q}_ms": percentile(own, q) for q in (50, 95, 99)},
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


Step = tuple[str, Callable[[], Started], Callable[[Started], None]]


def make_steps(b: Bench, hw: Hardware, setup: SetupPlan) -> list[Step]:
    """The steps the setup plan names, in its order."""
    table: dict[str, Step] = {
        names.STEP_STACK: (
            names.STEP_STACK,
            lambda: start_stack(b, setup.stack_flags, setup.replicas, "stack-run"),
            lambda s: bench_stack(b, s, setup),
        ),
        names.STEP_STACK_1: (
            names.STEP_STACK_1,
            lambda: start_stack(b, setup.one_replica_flags, 1, "stack1-run"),
            lambda s: bench_one_replica(b, s),
        ),
        names.STEP_VLLM: (names.STEP_VLLM, lambda: start_vllm(b, hw), lambda s: bench_vllm(b, s)),
        names.STEP_SERIAL: (names.STEP_SERIAL, lambda: start_serial(b, hw), lambda s: bench_serial(b, s)),
    }
    return [table[step] for step in setup.steps]


def run_steps(b: Bench, steps: Sequence[Step], start_timeout_s: float, *, together: bool) -> dict[str, float]:
    """Start setups, wait until they are ready, then measure them one after another.

    On CPU every setup starts at once: engine start-up is most of a run's time and mostly
    single-threaded, so starting together saves minutes, and measuring only once all are up keeps
    start-up off the cores while k6 runs. On GPUs each setup would claim the same device memory,
    so there they start one at a time. Each setup stops after its own measurements.
    """
    timings: dict[str, float] = {}
    for group in [list(steps)] if together else [[step] for step in steps]:
        with contextlib.ExitStack() as stack:
            started = {name: stack.enter_context(_stopping(start())) for name, start, _ in group}
            failed = _wait_all_ready(started, start_timeout_s, timings)
            for name, _, measure in group:
                _measure(b, name, started, measure, failed.get(name), timings)
    return timings


def _wait_all_ready(
    started: dict[str, Started], timeout_s: float, timings: dict[str, float]
) -> dict[str, str]:
    """Wait for every started setup within one deadline; returns why each one that failed did."""
    t0 = time.monotonic()
    failed: dict[str, str] = {}
    for name, setup in started.items():
        try:
            setup.wait_ready(max(1.0, timeout_s - (time.monotonic() - t0)))
        except (RuntimeError, TimeoutError) as err:
            failed[name] = str(err)
    label = "start of " + ", ".join(started)
    timings[label] = time.monotonic() - t0
    print(f"[bench] {label}: {timings[label]:.0f} s", flush=True)
    return failed


def _measure(
    b: Bench,
    name: str,
    started: dict[str, Started],
    measure: Callable[[Started], None],
    failure: str | None,
    timings: dict[str, float],
) -> None:
    """Measure one setup, note how much CPU the setups waiting their turn took meanwhile, stop it."""
    t1 = time.monotonic()
    others = [s for other, s in started.items() if other != name]
    idle = [s.server.proc.pid for s in others if s.server.proc.poll() is None]
    idle_cpu = sum(tree_cpu_s(pid) for pid in idle)
    try:
        if failure is not None:
            raise RuntimeError(failure)
        measure(started[name])
    except (RuntimeError, TimeoutError, OSError, subprocess.SubprocessError) as err:
        b.notes.append(f"{name}: failed: {err}")
        print(f"[bench] {name} failed: {err}", flush=True)
    timings[name] = time.monotonic() - t1
    if idle:
        # The setups waiting their turn share the cores: say how much they took.
        used = sum(tree_cpu_s(pid) for pid in idle) - idle_cpu
        b.notes.append(
            f"While {name} was measured, the setups waiting their turn used {used:.1f} CPU-s "
            f"({100 * used / max(timings[name], 1e-9):.1f}% of one core)."
        )
    started[name].server.stop()
    print(f"[bench] {name} done in {timings[name]:.0f} s (total {b.elapsed()})", flush=True)


@contextlib.contextmanager
def _stopping(s: Started) -> Iterator[Started]:
    with running(s.server):
        yield s


def run_soak(b: Bench, setup: SetupPlan, args: argparse.Namespace) -> int:
    """The stack alone, under the soak run's steady load and kills; the report lands beside the others."""
    s = start_stack(b, setup.stack_flags, setup.replicas, "soak-run")
    with _stopping(s):
        s.wait_ready(args.start_timeout_s)
        warm_up(f"{s.url}/translate", translate_body())
        path = soak.bench_soak(
            b,
            s.url,
            s.run_dir or b.work,
            args.out / "soak",
            minutes=args.soak_minutes,
            kill_every_min=args.soak_kill_every_min,
            rate=args.soak_rate,
        )
    print(f"[bench] soak report: {path} (total {b.elapsed()})", flush=True)
    return 0


def prepare_model(args: argparse.Namespace, work: Path) -> Path:
    if args.model:
        return Path(args.model)
    # In-process (what `hunyuan-serve tiny-model` runs): one transformers import serves the prompts too.
    from hunyuan_serve.families import HUNYUAN_MT
    from hunyuan_serve.tiny_model import build_tiny_model

    # Named like its family, so that the replicas and the baselines detect it as they would the real one.
    return build_tiny_model(work / f"tiny-{HUNYUAN_MT}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="The under-3-minutes version.")
    parser.add_argument("--model", help="Checkpoint to serve (default: a freshly built tiny checkpoint).")
    parser.add_argument(
        "--replicas", type=int, default=2, help="Replicas of the stack (default 2); on GPUs, one per device."
    )
    parser.add_argument(
        "--device",
        choices=targets.DEVICES,
        default="auto",
        help="cpu, cuda (one replica per GPU), or auto: cuda where nvidia-smi lists GPUs (default).",
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results", help="Report directory.")
    parser.add_argument("--work", type=Path, help="Raw outputs (default bench/.runs/<time>).")
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=(*names.STEPS, names.STEP_HOSTS, names.STEP_ENSEMBLE, names.STEP_LAYER, names.STEP_FAIRNESS),
        help="A setup to leave out (repeatable).",
    )
    parser.add_argument(
        "--start-timeout-s", type=float, default=900.0, help="How long every setup may take to start."
    )
    parser.add_argument(
        "--only",
        choices=(names.OVERLOAD, names.LIKEFORLIKE, *LIKEFORLIKE_ONLY, names.FAIRNESS),
        help="overload: only the stack's ramp and then the overload, sized from the ramp "
        "(report-full-overload.md); likeforlike, or one of its rows job, single, assembled: only "
        "that (report-likeforlike.md, report-likeforlike-<row>.md); fairness: only bench/fairness.py "
        "(report-fairness.md).",
    )
    parser.add_argument(
        "--strings", type=int, help="Distinct strings of the job row (default 2000; QUICK 200)."
    )
    parser.add_argument("--rounds", type=int, help="Rounds of each setup in a like-for-like row (default 3).")
    parser.add_argument(
        "--k6-nice", type=int, default=0, help="k6's nice value (it shares the cores; below 0 needs root)."
    )
    parser.add_argument(
        "--k6-cores",
        type=_cores,
        default=(),
        help="Cores for k6 and the stack's Nginx, e.g. '1'; the stack's replicas get the other cores.",
    )
    parser.add_argument(
        "--stack-flags",
        default="",
        help="More `up` flags for the stacks, one string (e.g. '--max-conns 256 --worker-priority 0').",
    )
    parser.add_argument(
        "--translate-flags",
        default="",
        help="More `translate` flags for the job row, one string (e.g. '--concurrency 8'): the client's "
        "settings against the same stack and engines.",
    )
    parser.add_argument("--soak", action="store_true", help="Only the soak run (SOAK=1): see bench/soak.py.")
    parser.add_argument("--soak-minutes", type=float, default=60.0, help="Length of the soak run.")
    parser.add_argument("--soak-kill-every-min", type=float, default=10.0, help="Minutes between kills.")
    parser.add_argument("--soak-rate", type=int, default=4, help="Steady requests/s of the soak run.")
    return parser.parse_args(argv)


def _sized(plan: Plan, args: argparse.Namespace) -> Plan:
    """--strings and --rounds over the plan's own sizes."""
    if args.strings:
        plan = replace(plan, lfl_strings=args.strings)
    if args.translate_flags:
        plan = replace(plan, translate_flags=tuple(shlex.split(args.translate_flags)))
    return replace(plan, lfl_rounds=args.rounds) if args.rounds else plan


def _cores(text: str) -> tuple[int, ...]:
    """'1' or '0,2': a comma-separated list of core numbers."""
    try:
        cores = tuple(sorted({int(part) for part in text.split(",")}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of core numbers: {text!r}") from None
    if any(core < 0 for core in cores):
        raise argparse.ArgumentTypeError(f"core numbers are 0 or more: {text!r}")
    return cores


def _fairness_args(args: argparse.Namespace) -> list[str]:
    """bench/fairness.py's own flags from this run's: its report lands in this run's --out too."""
    return ["--start-timeout-s", str(args.start_timeout_s), "--out", str(args.out / "report-fairness.md")]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.only == names.FAIRNESS:  # its own stack and workload: nothing of the rest is needed
        return fairness.main(_fairness_args(args))
    plan = replace(only(Plan.quick() if args.quick else Plan(), args.only), k6_nice=args.k6_nice)
    plan = _sized(plan, args)
    if args.k6_cores:
        try:
            rest = split_cores(sorted(os.sched_getaffinity(0)), args.k6_cores)
        except ValueError as err:
            print(f"[bench] {err}", file=sys.stderr)
            return 2
        plan = replace(plan, k6_cores=args.k6_cores, stack_cores=rest)
    try:
        hw = targets.detect_hardware(args.device)
    except ValueError as err:
        print(f"[bench] {err}", file=sys.stderr)
        return 2
    setup = plan_setups(hw, args.replicas, plan, args.skip)
    if args.stack_flags:
        extra = tuple(shlex.split(args.stack_flags))
        setup = replace(setup, stack_flags=setup.stack_flags + extra)
        setup = replace(setup, notes=(*setup.notes, f"The stacks ran with `up {' '.join(extra)}`."))
    # Absolute: k6 resolves the items file's path from its script's folder, not from here.
    work = (args.work or REPO / "bench" / ".runs" / time.strftime("%Y%m%d-%H%M%S")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    model = prepare_model(args, work)
    items = work / "items.json"
    build_items(model, items)
    b = Bench(plan, work, model, items, find_k6(), targets.model_sampling(str(model)))
    b.notes.extend(setup.notes)
    if plan.k6_nice:
        b.notes.append(f"k6 ran at nice {plan.k6_nice}.")
    if args.soak:
        return run_soak(b, setup, args)
    if lfl_only(plan):
        b.alike = likeforlike_run.run_rows(b, hw, plan.likeforlike, args.start_timeout_s)
        path = write_likeforlike_report(
            b, args.out, hw, quick=args.quick, argv=sys.argv[1:] if argv is None else argv
        )
        print(f"[bench] report: {path} (total {b.elapsed()})", flush=True)
        return 0
    timings = run_steps(b, make_steps(b, hw, setup), args.start_timeout_s, together=setup.together)
    if plan.hosts and names.STEP_HOSTS not in args.skip:  # alone: it needs every core
        multihost.bench_hosts(b, hw, args.start_timeout_s, timings)
    if not args.quick and names.STEP_LAYER not in args.skip:  # alone: the stack on core 0, k6 on core 1
        t0 = time.monotonic()
        figures = layer.measure(layer.LayerPlan())
        (args.out / "layer-figures.json").write_text(json.dumps(figures, indent=1), encoding="utf-8")
        b.notes.append("The serving layer alone (engine stand-in): " + layer.format_figures(figures))
        timings["layer"] = time.monotonic() - t0
    if not args.quick and names.STEP_ENSEMBLE not in args.skip:  # alone: two pools, one per core
        t0 = time.monotonic()
        ensemble.main(["--start-timeout-s", str(args.start_timeout_s)])
        b.notes.append("Ensemble requests against single ones: bench/results/report-ensemble.md.")
        timings["ensemble"] = time.monotonic() - t0
    if not args.quick and names.STEP_FAIRNESS not in args.skip:  # alone: its own two-replica stack
        t0 = time.monotonic()
        fairness.main(_fairness_args(args))
        b.notes.append("Interactive and bulk work: bench/results/report-fairness.md.")
        timings["fairness"] = time.monotonic() - t0
    if plan.likeforlike:  # last, each row alone on the cores
        t0 = time.monotonic()
        b.alike = likeforlike_run.run_rows(b, hw, plan.likeforlike, args.start_timeout_s)
        timings["like for like"] = time.monotonic() - t0
    path = write_report(b, args.out, timings, quick=args.quick, hardware=hw)
    print(f"[bench] report: {path} (total {b.elapsed()})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
