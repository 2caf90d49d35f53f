"""`make bench`: k6 against the stack and its baselines in one run, then a Markdown report with plots."""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/run.py` as well as `python -m bench.run`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import targets
from bench.k6run import K6Result, find_k6, run_k6
from bench.procs import (
    REPO,
    Server,
    counter_delta,
    cpu_hog,
    free_port,
    running,
    scrape_counter,
    tree_cpu_s,
    warm_up,
)
from bench.report import Row, best_rate

DATA = REPO / "bench" / "data" / "sd-webui-zh_CN.json"
# Target languages of the runs against the stack, in order: see Bench.env.
STACK_TARGETS = ("zh", "ja", "ko", "fr", "de", "es", "ru", "ar")
# The replicas' counter of generated tokens (their /translate answers do not carry token counts).
TOKENS_COUNTER = "hunyuan_generation_tokens"


@dataclass(frozen=True)
class Plan:
    """How long and how hard each scenario runs; QUICK=1 is the small one."""

    ramp_vus: int = 100
    ramp: str = "40s"
    hold: str = "20s"
    rates: tuple[int, ...] = (10, 20, 40, 80)
    rate_duration: str = "12s"
    pass_iterations: int = 300
    pass_vus: int = 32
    chaos_duration_s: int = 30
    chaos_kill_at_s: float = 10.0
    unequal_duration: str = "30s"
    hogs: int = 2  # busy loops on replica 1's core: it keeps a third of the core
    baselines: tuple[str, ...] = ("serial", "vllm")
    unequal: bool = True
    one_replica: bool = True  # also ramp a one-replica stack
    p95_ms: float = 5000.0
    max_tokens: int = 32

    @staticmethod
    def quick() -> Plan:
        return Plan(
            ramp_vus=20,
            ramp="10s",
            hold="5s",
            rates=(8,),
            rate_duration="8s",
            pass_iterations=80,
            pass_vus=16,
            chaos_duration_s=20,
            chaos_kill_at_s=6.0,
            baselines=("serial",),
            unequal=False,
            one_replica=False,
        )


@dataclass
class Bench:
    """What one run collected: k6 results by scenario and setup, notes, timings."""

    plan: Plan
    work: Path
    model: Path
    items: Path
    k6_bin: str
    results: dict[str, list[Row]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    chaos_kill_time: float | None = None
    cursor: int = 0  # how many requests the stack has answered: where its next run starts
    started: float = field(default_factory=time.monotonic)

    def env(self, url: str, api: str = "translate", *, stack: bool = False, **extra: Any) -> dict[str, str]:
        """k6's environment. Every setup starts on the same strings in the same language, except that
        runs against the (caching) stack start past what it has answered, and past the last string
        go on in the next language: only its repeat pass may be answered from its cache."""
        env = {
            "OFFSET": str(self.cursor if stack else 0),
            "TARGET_LANGS": ",".join(STACK_TARGETS if stack else STACK_TARGETS[:1]),
            "BASE_URL": url,
            "API": api,
            "DATA": str(self.items),
            "MODEL": "model",
            "MAX_TOKENS": str(self.plan.max_tokens),
            "P95_MS": str(int(self.plan.p95_ms)),
        }
        env.update({k.upper(): str(v) for k, v in extra.items()})
        return env

    def k6(self, script: str, name: str, env: dict[str, str], meter: Sequence[str] = ()) -> K6Result:
        """Run a k6 script; with `meter` (replica /metrics URLs) count generated tokens server-side."""
        before = [scrape_counter(url, TOKENS_COUNTER) for url in meter]
        result = run_k6(script, name, self.work / "k6", env, k6=self.k6_bin)
        if meter:
            after = [scrape_counter(url, TOKENS_COUNTER) for url in meter]
            result.server_tokens = sum(counter_delta(b, a) for b, a in zip(before, after, strict=True))
        return result

    def add(
        self,
        scenario: str,
        setup: str,
        result: K6Result,
        offered: float | None = None,
        *,
        cached: bool = False,
    ) -> None:
        """Record a run; `cached`: it ran against the stack whose cache later runs must get past."""
        self.results.setdefault(scenario, []).append(Row(setup, result, offered))
        if cached:
            self.cursor += result.requests

    def elapsed(self) -> str:
        return f"{time.monotonic() - self.started:.0f} s"


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
    from transformers import AutoTokenizer

    from hunyuan_serve import prompts
    from hunyuan_serve.languages import find_language

    family = prompts.family_from_config("auto", prompts.read_model_config(str(model)))
    source, target = find_language("en"), find_language("zh")
    tokenizer = AutoTokenizer.from_pretrained(str(model)) if family == "hunyuan" else None
    items = []
    for text in texts:
        prompt = prompts.build_prompt(family, source, target, text)
        rendered = prompt.text
        if prompt.is_chat and tokenizer is not None:
            rendered = str(
                tokenizer.apply_chat_template(
                    list(prompt.messages), tokenize=False, add_generation_prompt=True
                )
            )
        items.append({"text": text, "prompt": rendered, "stop": list(prompt.stop) or None})
    return items


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


def start_serial(b: Bench) -> Started:
    server, url = targets.start_serial(b.model, b.work)
    return Started(server, url, "/health")


def bench_serial(b: Bench, s: Started) -> None:
    warm_up(f"{s.url}/translate", translate_body())
    b.add("ramp", "one-at-a-time", b.k6("ramp.js", "ramp-serial", _ramp_env(b, s.url)))


def start_vllm(b: Bench) -> Started:
    server, url = targets.start_vllm(b.model, b.work)
    return Started(server, url, "/v1/models")


def bench_vllm(b: Bench, s: Started) -> None:
    url = s.url
    warm_up(f"{url}/v1/completions", {"model": "model", "prompt": "Hello", "max_tokens": 8})
    b.add("ramp", "vLLM server", b.k6("ramp.js", "ramp-vllm", _ramp_env(b, url, api="openai")))
    for rate in b.plan.rates:
        env = b.env(url, api="openai", rate=rate, duration=b.plan.rate_duration)
        b.add("rate", "vLLM server", b.k6("rate.js", f"rate{rate}-vllm", env), offered=rate)


def _ramp_env(b: Bench, url: str, api: str = "translate", *, stack: bool = False) -> dict[str, str]:
    return b.env(url, api=api, stack=stack, vus=b.plan.ramp_vus, ramp=b.plan.ramp, hold=b.plan.hold)


def start_stack(b: Bench, replicas: int, name: str = "stack-run") -> Started:
    run_dir = b.work / name
    base_port = free_port()
    server, url = targets.start_stack(b.model, run_dir, replicas=replicas, base_port=base_port)
    return Started(
        server, url, "/health", lambda _: targets.ready_replicas(run_dir) > 0, run_dir, base_port, replicas
    )


def bench_one_replica(b: Bench, s: Started) -> None:
    """The stack with a single replica over the same ramp: our serving layer against the vLLM server's
    with one engine each, apart from what a second replica changes."""
    meter = [f"http://127.0.0.1:{s.base_port}/metrics"]
    warm_up(f"{s.url}/translate", translate_body())
    b.add("ramp", "stack, 1 replica", b.k6("ramp.js", "ramp-stack1", _ramp_env(b, s.url), meter))


def bench_stack(b: Bench, s: Started) -> None:
    url, run_dir, base_port = s.url, s.run_dir or b.work, s.base_port
    replicas = targets.ready_replicas(run_dir) or s.replicas
    if replicas != s.replicas:
        b.notes.append(f"The stack runs {replicas} replica(s) (one per GPU), not the {s.replicas} asked for.")
    meter = [f"http://127.0.0.1:{base_port + i}/metrics" for i in range(replicas)]
    warm_up(f"{url}/translate", translate_body())
    b.add("ramp", "stack", b.k6("ramp.js", "ramp-stack", _ramp_env(b, url, stack=True), meter), cached=True)
    for rate in b.plan.rates:
        env = b.env(url, stack=True, rate=rate, duration=b.plan.rate_duration)
        result = b.k6("rate.js", f"rate{rate}-stack", env, meter)
        b.add("rate", "stack", result, offered=rate, cached=True)
    # Both passes send the same strings (one env): the second one is what the cache saves.
    env = b.env(url, stack=True, iterations=b.plan.pass_iterations, vus=b.plan.pass_vus)
    for attempt in ("first", "second"):
        result = b.k6("pass.js", f"pass-{attempt}", env, meter)
        b.add("repeat", f"stack, {attempt} pass", result, cached=attempt == "second")
    if replicas < 2:
        b.notes.append("Unequal replicas and chaos need two replicas or more: skipped.")
        return
    if b.plan.unequal:
        bench_unequal(b, url, run_dir, replicas, base_port, meter)
    bench_chaos(b, url, run_dir, meter)


def _chaos_rate(b: Bench) -> int:
    best = best_rate(b.results.get("rate", []), b.plan.p95_ms)
    return max(2, int((best.offered or 4) * 0.5)) if best else max(2, b.plan.rates[0] // 2)


def bench_unequal(
    b: Bench, url: str, run_dir: Path, replicas: int, base_port: int, meter: Sequence[str]
) -> None:
    """Replica 1 shares its core with busy loops; the same open loop through least_conn and round robin."""
    rate = _chaos_rate(b)
    rr_server, rr_url = targets.start_round_robin_nginx(replicas, base_port, b.work / "round-robin")
    with running(rr_server), cpu_hog(core=_replica_core(run_dir, 1), count=b.plan.hogs):
        rr_server.wait_http(f"{rr_url}/health", timeout_s=30)
        for setup, target in (("least_conn", url), ("round robin", rr_url)):
            env = b.env(target, stack=True, rate=rate, duration=b.plan.unequal_duration)
            name = "unequal-" + setup.replace(" ", "-")
            result = b.k6("rate.js", name, env, meter)
            b.add("unequal", f"stack, {setup}", result, offered=rate, cached=True)
    b.notes.append(
        f"Unequal replicas: {b.plan.hogs} busy loop(s) pinned to replica 1's core; open loop at {rate} req/s."
    )


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
        b.add("chaos", "stack, replica killed", future.result(), offered=rate, cached=True)


Step = tuple[str, Callable[[], Started], Callable[[Started], None]]


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
            t0 = time.monotonic()
            failed: dict[str, str] = {}
            for name, setup in started.items():
                try:
                    setup.wait_ready(max(1.0, start_timeout_s - (time.monotonic() - t0)))
                except (RuntimeError, TimeoutError) as err:
                    failed[name] = str(err)
            label = "start of " + (", ".join(started) if len(started) > 1 else next(iter(started)))
            timings[label] = time.monotonic() - t0
            print(f"[bench] {label}: {timings[label]:.0f} s", flush=True)
            for name, _, measure in group:
                t1 = time.monotonic()
                idle = [
                    s.server.proc.pid
                    for other, s in started.items()
                    if other != name and s.server.proc.poll() is None
                ]
                idle_cpu = sum(tree_cpu_s(pid) for pid in idle)
                try:
                    if name in failed:
                        raise RuntimeError(failed[name])
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
    return timings


@contextlib.contextmanager
def _stopping(s: Started) -> Iterator[Started]:
    with running(s.server):
        yield s


def prepare_model(args: argparse.Namespace, work: Path) -> Path:
    if args.model:
        return Path(args.model)
    # In-process (what `hunyuan-serve tiny-model` runs): one transformers import serves the prompts too.
    from hunyuan_serve.tiny_model import build_tiny_model

    return build_tiny_model(work / "tiny-model")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="The under-3-minutes version.")
    parser.add_argument("--model", help="Checkpoint to serve (default: a freshly built tiny checkpoint).")
    parser.add_argument("--replicas", type=int, default=2, help="Replicas of the stack (default 2).")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results", help="Report directory.")
    parser.add_argument("--work", type=Path, help="Raw outputs (default bench/.runs/<time>).")
    parser.add_argument(
        "--skip", action="append", default=[], help="serial, vllm, stack1, stack (repeatable)."
    )
    parser.add_argument(
        "--start-timeout-s", type=float, default=900.0, help="How long every setup may take to start."
    )
    args = parser.parse_args(argv)

    plan = Plan.quick() if args.quick else Plan()
    work = args.work or REPO / "bench" / ".runs" / time.strftime("%Y%m%d-%H%M%S")
    work.mkdir(parents=True, exist_ok=True)
    model = prepare_model(args, work)
    items = work / "items.json"
    build_items(model, items)
    b = Bench(plan, work, model, items, find_k6())
    steps: list[Step] = [
        # The stacks first: waiting their turn, they probe their replicas (a little CPU); the
        # baselines wait idle. Any bias of the order goes against the stack, and the report says how much.
        ("stack", lambda: start_stack(b, args.replicas), lambda s: bench_stack(b, s)),
        ("stack1", lambda: start_stack(b, 1, "stack1-run"), lambda s: bench_one_replica(b, s)),
        ("vllm", lambda: start_vllm(b), lambda s: bench_vllm(b, s)),
        ("serial", lambda: start_serial(b), lambda s: bench_serial(b, s)),
    ]
    wanted = {"stack", *plan.baselines} | ({"stack1"} if plan.one_replica and args.replicas > 1 else set())
    chosen = [step for step in steps if step[0] in wanted and step[0] not in args.skip]
    timings = run_steps(b, chosen, args.start_timeout_s, together=not targets.on_gpu())

    from bench.write_report import write_report

    path = write_report(b, args.out, timings, quick=args.quick)
    print(f"[bench] report: {path} (total {b.elapsed()})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
