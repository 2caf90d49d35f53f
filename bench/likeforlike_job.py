"""The like-for-like job row: `translate` against the stack beside offline engines on the same cores."""

from __future__ import annotations

import contextlib
import json
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench import likeforlike as lfl
from bench import names, targets
from bench.likeforlike import Comparison, Pin, Round
from bench.likeforlike_sides import (
    PROMPT_TOKENS,
    TOKENS,
    check_replicas,
    cores,
    paused,
    replica_pids,
    sampling,
    scrape,
    start_stack,
    wait_stack,
    warm,
)
from bench.procs import (
    REPO,
    Server,
    cpu_by_role,
    cpu_since,
    running,
    tree_cpu_s,
)
from bench.session import Bench
from bench.targets import Hardware
from hunyuan_serve.replica.command import TEST_IGNORE_EOS_ENV


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
        replicas = replica_pids(run_dir)
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
        check_replicas(c, run_dir, replicas)
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
