"""One bench run's plan and record: how hard each scenario runs, and the k6 results it collected."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench import names
from bench.documents import DocumentRow
from bench.k6run import K6Result, run_k6, sampling_env
from bench.likeforlike import Comparison
from bench.procs import counter_delta, scrape_counter
from bench.report import Row
from bench.stream_ttft import StreamFigures
from hunyuan_serve.families import SamplingDefaults

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
    overload_factor: int = 10  # the overload's open loop: this many times the measured capacity
    overload_duration: str = "30s"
    # The overload's k6 VUs (all started before it, not while it runs): every replica full at its edge
    # cap, plus this many seconds of refusals at the offered rate; past that k6 drops iterations.
    overload_refusal_vu_s: float = 0.5
    hogs: int = 2  # busy loops on replica 1's core (CPU): it keeps a third of the core
    baselines: tuple[str, ...] = (names.STEP_SERIAL, names.STEP_VLLM)
    unequal: bool = True
    one_replica: bool = True  # also ramp a one-replica stack
    hosts: bool = True  # the gateway in front of one host, then two (bench/multihost.py)
    p95_ms: float = 5000.0
    fail_rate: float = 0.001  # a run with this share of failures or more crosses k6's threshold
    max_tokens: int = 32
    # OpenAI streaming (bench/stream_ttft.py): streamed chat completions per setup, and how many at once.
    stream_requests: int = 64
    stream_concurrency: int = 16
    # A long Markdown document through `translate` (bench/documents.py): its sentences, and how many of
    # the same kind go one at a time for the rate it is compared with.
    document_sentences: int = 1000  # about 29 pages
    document_serial: int = 120
    # k6's nice value: on CPU it shares the cores with the servers it measures, and a k6 waiting for a
    # core counts the wait in every latency (below 0 needs root).
    k6_nice: int = 0
    # `--k6-cores`: k6 and the stack's Nginx on these cores, the stack's `up` (so its replicas) on
    # stack_cores, the rest: the client measuring refusals then waits for no engine. (): no pinning.
    k6_cores: tuple[int, ...] = ()
    stack_cores: tuple[int, ...] = ()
    only: str = ""  # one scenario of the stack (names.OVERLOAD, after the ramp it is sized from); "": all
    # The like-for-like rows (bench/likeforlike.py), after everything else, each alone on the cores.
    likeforlike: tuple[str, ...] = (names.JOB, names.SINGLE, names.ASSEMBLED)
    lfl_strings: int = 2000  # distinct strings of the job row (--strings)
    lfl_rounds: int = 3  # rounds of each setup per row, alternating
    lfl_max_tokens: int = 16  # every string's generated tokens on every side (EOS ignored)
    translate_flags: tuple[str, ...] = ()  # more `translate` flags of the job row (--translate-flags)
    lfl_requests: int = 640  # single-string requests per round (the k6 rows)
    lfl_vus: int = 64  # at once, one replica against one vLLM server
    lfl_vus_assembled: int = 128  # at once, the stack against the hand-assembled servers
    lfl_replicas: int = 2  # engines of the job and assembled rows (at most one per core or GPU)

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
            overload_duration="15s",
            stream_requests=24,
            stream_concurrency=8,
            document_sentences=80,
            document_serial=24,
            baselines=(names.STEP_SERIAL,),
            unequal=False,
            one_replica=False,
            hosts=False,
            likeforlike=(),  # each row starts engines of its own: `--quick --only job` runs the small one
            lfl_strings=200,
            lfl_rounds=1,
        )


# `--only` values that are like-for-like rows, and the rows each one runs.
LIKEFORLIKE_ONLY = {
    names.LIKEFORLIKE: (names.JOB, names.SINGLE, names.ASSEMBLED),
    names.JOB: (names.JOB,),
    names.SINGLE: (names.SINGLE,),
    names.ASSEMBLED: (names.ASSEMBLED,),
}


def only(plan: Plan, scenario: str | None) -> Plan:
    """The plan of `--only SCENARIO`: the stack alone, its ramp (the capacity the scenario is sized
    from, and the row it is compared with), then that scenario; no baselines, no other stack. A
    like-for-like row (or all three): that alone, its own setups only."""
    if not scenario:
        return plan
    rows = LIKEFORLIKE_ONLY.get(scenario, ())
    return replace(
        plan, only=scenario, baselines=(), one_replica=False, unequal=False, hosts=False, likeforlike=rows
    )


def lfl_only(plan: Plan) -> bool:
    """Whether the run is like-for-like rows only (no k6 scenario of the stack)."""
    return plan.only in LIKEFORLIKE_ONLY


def overload_vus(plan: Plan, rate: int, replicas: int, edge_cap: int) -> int:
    """k6 VUs for the overload's open loop: every replica full at its edge cap (each accepted request
    holds a VU), plus overload_refusal_vu_s of refusals at the offered rate (Little's law)."""
    return replicas * edge_cap + math.ceil(rate * plan.overload_refusal_vu_s)


def split_cores(available: Sequence[int], k6_cores: Sequence[int]) -> tuple[int, ...]:
    """The cores left to the stack when k6 (and the stack's Nginx) take k6_cores of `available`."""
    unknown = sorted(set(k6_cores) - set(available))
    if unknown:
        raise ValueError(f"--k6-cores: core(s) {unknown} not among this process's cores {sorted(available)}")
    rest = tuple(sorted(set(available) - set(k6_cores)))
    if not rest:
        raise ValueError(f"--k6-cores: {sorted(k6_cores)} leaves no core for the stack's replicas")
    return rest


def base_env(plan: Plan, sampling: SamplingDefaults) -> dict[str, str]:
    """What every k6 script requires (lib.js has no defaults for them): sampling and thresholds."""
    return {
        "P95_MS": str(int(plan.p95_ms)),
        "FAIL_RATE": str(plan.fail_rate),
        **sampling_env(sampling, plan.max_tokens),
    }


@dataclass
class Bench:
    """What one run collected: k6 results by scenario and setup, notes, timings."""

    plan: Plan
    work: Path
    model: Path
    items: Path
    k6_bin: str
    sampling: SamplingDefaults  # the model family's recommended sampling, sent by every request
    results: dict[str, list[Row]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    chaos_kill_time: float | None = None
    # The overload run's context: capacity it was sized from, p95 there, memory before and after (MB).
    overload: dict[str, float] = field(default_factory=dict)
    streaming: dict[str, StreamFigures] = field(default_factory=dict)  # setup -> its streamed chat figures
    documents: DocumentRow | None = None  # the long Markdown document's run against the stack
    alike: list[Comparison] = field(default_factory=list)  # the like-for-like rows (bench/likeforlike.py)
    cursor: int = 0  # how many requests the stack has answered: where its next run starts
    started: float = field(default_factory=time.monotonic)

    def env(self, url: str, api: str = "translate", *, stack: bool = False, **extra: Any) -> dict[str, str]:
        """k6's environment. Every setup starts on the same strings in the same language, except that
        runs against the (caching) stack start past what it has answered, and past the last string
        go on in the next language: only its repeat pass may be answered from its cache."""
        env = {
            **base_env(self.plan, self.sampling),
            "OFFSET": str(self.cursor if stack else 0),
            "TARGET_LANGS": ",".join(names.STACK_TARGETS if stack else names.STACK_TARGETS[:1]),
            "BASE_URL": url,
            "API": api,
            "DATA": str(self.items),
            "MODEL": names.SERVED_NAME,
        }
        env.update({k.upper(): str(v) for k, v in extra.items()})
        return env

    def k6(
        self, script: str, name: str, env: dict[str, str], meter: Sequence[str] = (), *, samples: bool = True
    ) -> K6Result:
        """Run a k6 script; with `meter` (replica /metrics URLs) count generated tokens server-side."""
        before = [scrape_counter(url, TOKENS_COUNTER) for url in meter]
        nice, cores = self.plan.k6_nice, self.plan.k6_cores
        result = run_k6(
            script, name, self.work / "k6", env, k6=self.k6_bin, samples=samples, nice=nice, cores=cores
        )
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
