"""What the like-for-like rows share: the sides' start, their pause, the sampling and the load note."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import names, targets
from bench.likeforlike import Comparison, Pin
from bench.procs import (
    Server,
    free_port,
    http_json,
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


def replica_pids(run_dir: Path) -> list[int]:
    return [int(r.get("pid") or 0) for r in targets.stack_status(run_dir).get("replicas", [])]


def check_replicas(c: Comparison, run_dir: Path, before: list[int]) -> None:
    after = replica_pids(run_dir)
    same = "the same processes throughout" if after == before else f"restarted: {before} -> {after}"
    c.notes.append(f"The stack's replicas after the pauses: {same}.")
