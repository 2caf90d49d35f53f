"""The like-for-like rows run: each starts its two sides on the same cores, then alternates rounds."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import likeforlike as lfl
from bench import names, targets
from bench.k6run import run_k6
from bench.likeforlike import Comparison, Pin, Round
from bench.procs import (
    REPO,
    Server,
    cpu_by_role,
    cpu_since,
    free_port,
    http_json,
    running,
    tree_cpu_s,
    tree_procs,
)
from bench.session import Bench
from bench.targets import Hardware
from hunyuan_serve.replica.command import TEST_IGNORE_EOS_ENV

# The stack's replicas ignore EOS through their test knob (a /translate request cannot ask for it):
# random weights end most answers at once, and every string must cost the same on both sides.
IGNORE_EOS = {TEST_IGNORE_EOS_ENV: "1"}
TOKENS, PROMPT_TOKENS = "hunyuan_generation_tokens", "hunyuan_prompt_tokens"
GPU_SKIPPED = (
    "Like-for-like rows: skipped on GPUs for now. Each row keeps both setups started and pauses the idle "
    "one, and on a GPU both would claim the same device memory (gpu_memory_utilization 0.9 each); they "
    "need one setup at a time there, or each at half the memory."
)
# What the warm-up requests translate: no string of the workload, so no measured request meets it cached.
WARM_TEXT = "Warm-up request of the like-for-like bench"


def cores() -> list[int]:
    return sorted(os.sched_getaffinity(0))


def sampling(b: Bench) -> dict[str, Any]:
    """The family's recommended sampling and the rows' fixed max_tokens, as every side is sent it."""
    return {**b.sampling.as_dict(), "max_tokens": b.plan.lfl_max_tokens}


def openai_sampling(b: Bench) -> dict[str, Any]:
    """What vLLM's /v1/completions gets besides: EOS ignored (its own extra field), and the rendered
    prompt tokenized without special tokens, as the replica tokenizes it (engine.VllmEngine._encode)."""
    return {**sampling(b), "ignore_eos": True, "add_special_tokens": False}


@contextlib.contextmanager
def paused(pids: Sequence[int]) -> Iterator[None]:
    """SIGSTOP the process trees of `pids` (parents first, so none sees its children stop), SIGCONT
    them after (children first): a waiting server takes no CPU from the one measured."""
    procs = [proc for pid in pids for proc in tree_procs(pid)]
    for proc in procs:
        with contextlib.suppress(Exception):
            proc.send_signal(signal.SIGSTOP)
    _until_stopped(procs)
    try:
        yield
    finally:
        for proc in reversed(procs):
            with contextlib.suppress(Exception):
                proc.send_signal(signal.SIGCONT)


def _until_stopped(procs: Sequence[Any], timeout_s: float = 5.0) -> None:
    """A signal is delivered when the kernel next schedules the process: wait (bounded) until each one
    reads stopped, so the measured side never starts while the other still runs."""
    import psutil

    deadline = time.monotonic() + timeout_s
    for proc in procs:
        while time.monotonic() < deadline:
            try:
                if proc.status() in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE):
                    break
            except psutil.Error:
                break  # gone
            time.sleep(0.01)


def scrape(urls: Sequence[str], counter: str) -> float:
    from bench.procs import scrape_counter

    return sum(scrape_counter(url, counter) or 0.0 for url in urls)


def start_stack(
    b: Bench, name: str, flags: Sequence[str], cpus: Sequence[int] = ()
) -> tuple[Server, str, Path]:
    run_dir = b.work / name
    shutil.rmtree(run_dir, ignore_errors=True)  # a second attempt starts from nothing
    server, url = targets.start_stack(
        b.model, run_dir, flags, base_port=free_port(), cpus=cpus, env=IGNORE_EOS
    )
    return server, url, run_dir


def wait_stack(server: Server, url: str, run_dir: Path, timeout_s: float) -> None:
    server.wait_http(f"{url}/health", timeout_s, lambda _: targets.ready_replicas(run_dir) > 0)


def start_vllm(b: Bench, hw: Hardware, pin: Pin, name: str) -> tuple[Server, str]:
    """`vllm serve` pinned like a replica, on the engine settings and CPU environment of the stack."""
    port = free_port()
    argv = pin.argv(targets.vllm_argv(b.model, hw, port))
    env = targets.baseline_env(hw, pin.env(), pin.cores)
    return Server(name, argv, b.work / f"{name}.log", env), f"http://127.0.0.1:{port}"


@dataclass(frozen=True)
class Side:
    """One setup of a row: where it answers, which API, its replicas' /metrics, its process trees,
    and how to tell it is ready again after a pause."""

    url: str
    api: str
    meter: list[str]
    pids: list[int]
    ready: Callable[[], None]


def load_note() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f}"


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


def job_texts(b: Bench) -> list[str]:
    data = json.loads((REPO / "bench" / "data" / "sd-webui-zh_CN.json").read_text(encoding="utf-8"))
    strings = lfl.plain_strings(list(data), b.plan.lfl_strings)
    if len(strings) < b.plan.lfl_strings:
        b.notes.append(f"Job row: {len(strings)} plain strings in the data, not {b.plan.lfl_strings}.")
    return strings


def prompt_ids(model: Path, texts: Sequence[str], target: str) -> list[list[int]]:
    """Each text's prompt as token ids, built and tokenized as a replica does (families.build_prompt,
    then replica.encoding.encode_prompt: the path the replica's PromptEncoder is byte-identical to)."""
    from transformers import AutoTokenizer

    from hunyuan_serve.families.build import build_prompt
    from hunyuan_serve.languages import find_language
    from hunyuan_serve.replica.encoding import encode_prompt

    tokenizer = AutoTokenizer.from_pretrained(str(model))
    family = targets.model_family(str(model))
    source, into = find_language("en"), find_language(target)
    return [encode_prompt(tokenizer, build_prompt(family, source, into, text)) for text in texts]


def start_offline(b: Bench, hw: Hardware, pins: Sequence[Pin], cue: Path, rounds: int) -> list[Server]:
    servers = []
    for index, pin in enumerate(pins):
        argv = [sys.executable, "-m", "bench.baselines.offline", "--model", str(b.model), "--dir", str(cue)]
        argv += ["--index", str(index), "--rounds", str(rounds), "--sampling", json.dumps(sampling(b))]
        argv += ["--device", hw.engine_device]
        env = targets.baseline_env(hw, pin.env(), pin.cores)
        servers.append(Server(f"offline-{index}", pin.argv(argv), b.work / f"offline-{index}.log", env))
    return servers


def wait_files(paths: Sequence[Path], servers: Sequence[Server], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not all(path.exists() for path in paths):
        for server in servers:
            if server.proc.poll() is not None:
                raise RuntimeError(
                    f"{server.name} exited with {server.proc.returncode}; see {server.log_path}"
                )
        if time.monotonic() > deadline:
            raise TimeoutError(f"not ready within {timeout_s:.0f} s: {[str(p) for p in paths]}")
        time.sleep(0.01)


def offline_round(cue: Path, servers: Sequence[Server], number: int, idle: Sequence[int]) -> Round:
    """One round of every offline engine at once, cued together; the span from the first start to
    the last end."""
    cpu0 = sum(tree_cpu_s(pid) for pid in idle)
    engine_pids = [server.proc.pid for server in servers]
    engines0 = cpu_by_role(engine_pids)
    (cue / f"go-{number}").touch()
    results = [cue / f"result-{i}-{number}.json" for i in range(len(servers))]
    wait_files(results, servers, 600)
    got = [json.loads(path.read_text()) for path in results]
    seconds = max(g["end"] for g in got) - min(g["start"] for g in got)
    count, tokens = sum(g["count"] for g in got), sum(g["tokens"] for g in got)
    spans = " / ".join(f"{g['end'] - g['start']:.2f}" for g in got)
    engines = cpu_since(engine_pids, engines0)
    return Round(
        number,
        names.OFFLINE,
        count,
        seconds,
        tokens,
        sum(g["prompt_tokens"] for g in got),
        idle_cpu_s=sum(tree_cpu_s(pid) for pid in idle) - cpu0,
        extra=f"each engine's own s: {spans}; {_offline_cpu_note(engines, count)}",
    )


# A part that used less CPU than this in a round is left out of its note.
CPU_NOTED_S = 0.005


def _cpu_each(cpu_s: float, count: int) -> str:
    return f"{cpu_s:.2f} ({cpu_s / max(count, 1) * 1e6:.0f} us)"


def _offline_cpu_note(roles: Mapping[str, float], strings: int) -> str:
    cores_s = roles["engine cores"]
    note = f"CPU-s (CPU-us a string) of the engines' processes {_cpu_each(sum(roles.values()), strings)}"
    if cores_s < CPU_NOTED_S:  # VLLM_ENABLE_V1_MULTIPROCESSING off: the core steps in the engine's process
        return f"{note}, front and engine core in one process each"
    return f"{note}, of which their engine cores {_cpu_each(cores_s, strings)}"


def role_cpu_note(roles: Mapping[str, float], count: int, unit: str) -> str:
    """Where a round's CPU went, each part in CPU-s and CPU-us per `unit` (parts that used none left out)."""
    each = " / ".join(
        f"{role} {_cpu_each(cpu_s, count)}" for role, cpu_s in roles.items() if cpu_s > CPU_NOTED_S
    )
    return f"CPU-s (CPU-us {unit}): {each}"


def cpu_note(roles: Mapping[str, float], client_cpu_s: float, strings: int) -> str:
    """The job round's: each part of the stack and the translate client."""
    return role_cpu_note({**roles, "translate client": client_cpu_s}, strings, "a string")


def translate_round(
    b: Bench,
    url: str,
    meter: Sequence[str],
    doc: Path,
    lang: str,
    number: int,
    idle: Sequence[int],
    stack_pid: int,
) -> Round:
    """`hunyuan-serve translate` on the i18next file, its default client settings, the rows' max_tokens."""
    times, out = b.work / f"job-times-{number}.json", b.work / f"job-{lang}.json"
    argv = [sys.executable, "-m", "bench.baselines.timed_translate", str(times), "translate", str(doc)]
    argv += ["--to", lang, "--from", "en", "--url", url, "--max-tokens", str(b.plan.lfl_max_tokens)]
    argv += ["--cache", str(b.work / f"client-cache-{number}.sqlite"), "--no-progress", "-o", str(out)]
    argv += ["--report", str(b.work / f"job-report-{number}.json"), *b.plan.translate_flags]
    cpu0, roles0 = sum(tree_cpu_s(pid) for pid in idle), cpu_by_role([stack_pid])
    tokens0, prompt0 = scrape(meter, TOKENS), scrape(meter, PROMPT_TOKENS)
    proc = subprocess.run(argv, cwd=str(REPO), capture_output=True, text=True, timeout=900, check=False)
    idle_cpu = sum(tree_cpu_s(pid) for pid in idle) - cpu0
    roles = cpu_since([stack_pid], roles0)
    if proc.returncode not in (0, 1) or not times.is_file():
        raise RuntimeError(f"translate exited {proc.returncode}: {proc.stderr[-800:]}")
    t = json.loads(times.read_text())
    summary = json.loads((b.work / f"job-report-{number}.json").read_text())
    # Every string sent was answered; the client refuses some of the random weights' answers (control
    # characters), which it counts as failed: they cost the engine the same.
    answered = int(summary.get("translated", 0)) + int(summary.get("failed", 0))
    return Round(
        number,
        names.TRANSLATE_JOB,
        answered,
        t["last"] - t["first"],
        scrape(meter, TOKENS) - tokens0,
        scrape(meter, PROMPT_TOKENS) - prompt0,
        failed=int(summary.get("failed", 0)),
        idle_cpu_s=idle_cpu,
        extra=f"{t['requests']} HTTP requests; CLI process {t['cli_s']:.2f} s; "
        f"{cpu_note(roles, float(t.get('cpu_s', 0.0)), answered)}; {_problems(summary)}",
    )


def _flags_note(flags: Sequence[str]) -> list[str]:
    return [f"`translate` ran with `{shlex.join(flags)}`."] if flags else []


FAILED_NOTE = (
    "failed (job row) = answers `translate` refused: the random weights' control characters or lost "
    "placeholders; the service answered them, they cost the engine the same, and they count as done."
)


def _problems(summary: dict[str, Any]) -> str:
    """What the client said of the segments it failed, the commonest first."""
    from collections import Counter

    found = Counter(str(f.get("problem", "?")).split(" U+")[0] for f in summary.get("failures", []))
    return ", ".join(f"{n} {problem}" for problem, n in found.most_common(3)) or "none failed"


def bench_job(b: Bench, hw: Hardware, timeout_s: float) -> Comparison:
    """N strings through `translate` against `up --replicas 2` vs the same prompts through one offline
    engine per core at once; round k in target language k on both sides, so no round meets a cache."""
    rounds, count = b.plan.lfl_rounds, len(cores()) if not hw.on_gpu else len(hw.gpus)
    count = min(count, b.plan.lfl_replicas)
    texts, pins = job_texts(b), lfl.engine_pins(hw, count, cores())
    doc = b.work / "job-strings.json"
    doc.write_text(lfl.i18next_document(texts), encoding="utf-8")
    cue = b.work / "offline-cue"
    shutil.rmtree(cue, ignore_errors=True)  # no cue or result of an earlier attempt
    cue.mkdir(parents=True)
    for number in range(rounds):
        ids = prompt_ids(b.model, texts, names.STACK_TARGETS[number % len(names.STACK_TARGETS)])
        for index, part in enumerate(lfl.split(ids, count)):
            (cue / f"prompts-{index}-{number}.json").write_text(json.dumps(part))
    c = _job_comparison(b, hw, count, pins, len(texts))
    engines = start_offline(b, hw, pins, cue, rounds)
    stack, url, run_dir = start_stack(b, "job-stack", targets.stack_device_flags(hw, count))
    with contextlib.ExitStack() as stop:
        for server in (*engines, stack):
            stop.enter_context(running(server))
        wait_files([cue / f"ready-{i}" for i in range(count)], engines, timeout_s)
        wait_stack(stack, url, run_dir, timeout_s)
        meter = targets.replica_metrics(run_dir)
        warm(url, "translate")
        replicas = _replica_pids(run_dir)
        for number, setup in lfl.alternating(rounds, names.OFFLINE, names.TRANSLATE_JOB):
            lang = names.STACK_TARGETS[number % len(names.STACK_TARGETS)]
            if setup == names.OFFLINE:
                with paused([stack.proc.pid]):
                    c.rounds.append(offline_round(cue, engines, number, [stack.proc.pid]))
                continue
            idle = [e.proc.pid for e in engines]
            with paused(idle):
                wait_stack(stack, url, run_dir, 60)
                c.rounds.append(translate_round(b, url, meter, doc, lang, number, idle, stack.proc.pid))
        _check_replicas(c, run_dir, replicas)
    return c


def _job_comparison(b: Bench, hw: Hardware, count: int, pins: Sequence[Pin], strings: int) -> Comparison:
    flags = " ".join(targets.stack_device_flags(hw, count))
    return Comparison(
        names.JOB,
        f"Job vs engine limit: {strings} strings, `translate` against `up {flags}` "
        f"vs {count} offline engines",
        names.TRANSLATE_JOB,
        names.OFFLINE,
        "strings/s",
        pins=[
            f"stack: `up {flags}` places its replicas itself: {', '.join(p.label for p in pins)} "
            "(taskset + VLLM_CPU_OMP_THREADS_BIND); Nginx, the supervisor and the `translate` client "
            "unpinned",
            f"offline engines: {', '.join(f'engine {i} on {p.label}' for i, p in enumerate(pins))}, the same "
            "pinning, each given its contiguous share of the prompts, cued to start together",
        ],
        notes=[
            f"Every string costs {b.plan.lfl_max_tokens} generated tokens on both sides: EOS ignored "
            f"(offline: SamplingParams(ignore_eos=True); stack: its replicas' test knob "
            f"{TEST_IGNORE_EOS_ENV}=1, since /translate takes no ignore_eos) and max_tokens "
            f"{b.plan.lfl_max_tokens} (`translate --max-tokens`); 'gen tokens each' checks it. Sampling: "
            f"the family's ({', '.join(f'{k} {v}' for k, v in b.sampling.as_dict().items())}).",
            "Offline engines: `vllm.LLM(**engine_kwargs(ENGINE))` (the replicas' own engine arguments), "
            "`generate` on token ids built as a replica builds them (build_prompt, chat template, no "
            "special tokens): tokenization, HTTP, JSON, cache and all else is the serving layer's cost.",
            "Stack: `hunyuan-serve translate FILE --to LANG --max-tokens N` on an i18next JSON file of the "
            "strings, client settings at their defaults (batches of 16, as many in flight as the stack's "
            "X-Hunyuan-Bulk-Texts asks), a fresh client cache; "
            "timed from its first HTTP request to its last answer (httpx's send wrapped; interpreter "
            "start-up left out, as for the engines). Round k translates into the k-th of "
            f"{', '.join(names.STACK_TARGETS[:3])}, ... on both sides: no round meets the server cache.",
            FAILED_NOTE,
            *_flags_note(b.plan.translate_flags),
        ],
        target=0.9,
    )


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


def warm(url: str, api: str, count: int = 8) -> None:
    """A few requests of texts of their own (distinct: the stack would answer a repeat from its
    cache), so that no measured round includes lazy first-request work; the engines get as many."""
    for number in range(count):
        text = f"{WARM_TEXT} {number}"
        if api == "openai":
            http_json(
                f"{url}/v1/completions", {"model": names.SERVED_NAME, "prompt": text, "max_tokens": 8}, 120
            )
        else:
            http_json(f"{url}/translate", {"text": text, "source_lang": "en", "target_lang": "zh"}, 120)


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
        replicas = _replica_pids(run_dir)
        sides = {
            c.setup: stack_side(stack, url, run_dir),
            c.baseline: Side(vurl, "openai", [], [vllm.proc.pid], lambda: None),
        }
        alternate(b, c, sides, client, b.plan.lfl_vus)
        _check_replicas(c, run_dir, replicas)
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


def _replica_pids(run_dir: Path) -> list[int]:
    return [int(r.get("pid") or 0) for r in targets.stack_status(run_dir).get("replicas", [])]


def _check_replicas(c: Comparison, run_dir: Path, before: list[int]) -> None:
    after = _replica_pids(run_dir)
    same = "the same processes throughout" if after == before else f"restarted: {before} -> {after}"
    c.notes.append(f"The stack's replicas after the pauses: {same}.")


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
        replicas = _replica_pids(run_dir)
        sides = {
            c.setup: stack_side(stack, url, run_dir),
            c.baseline: Side(vurl, "openai", [], [s.proc.pid for s in servers], lambda: None),
        }
        alternate(b, c, sides, (), b.plan.lfl_vus_assembled)
        _check_replicas(c, run_dir, replicas)
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
