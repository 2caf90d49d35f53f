"""Like-for-like rows: the stack against bare vLLM on the same cores, each a ratio from one run (pure)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bench import names
from bench.targets import Hardware
from hunyuan_serve.cores import core_ranges


@dataclass(frozen=True)
class Pin:
    """Where one engine or server runs: CPU cores (taskset plus vLLM's OpenMP binding, as `up` pins
    its replicas: supervise/plan.py and replica.engine.device_env.apply_cpu_env), or one GPU."""

    cores: tuple[int, ...] = ()
    gpu: str = ""

    def env(self) -> dict[str, str]:
        if self.gpu:
            return {"CUDA_VISIBLE_DEVICES": self.gpu}
        return {"VLLM_CPU_OMP_THREADS_BIND": core_ranges(self.cores)} if self.cores else {}

    def argv(self, argv: Sequence[str]) -> list[str]:
        if self.gpu or not self.cores:
            return list(argv)
        return ["taskset", "--cpu-list", core_ranges(self.cores), *argv]

    @property
    def label(self) -> str:
        if self.gpu:
            return f"GPU {self.gpu}"
        return f"core {core_ranges(self.cores)}" if self.cores else "unpinned"


def engine_pins(hw: Hardware, count: int, cores: Sequence[int]) -> list[Pin]:
    """One pin per engine, as `up --replicas count` (or `--gpus`) places its replicas: the same
    split of the cores (supervise.plan.cpu_groups), or the first `count` GPUs."""
    if hw.on_gpu:
        if len(hw.gpus) < count:
            raise ValueError(f"{count} engines need {count} GPUs; {len(hw.gpus)} visible")
        return [Pin(gpu=gpu) for gpu in hw.gpus[:count]]
    from hunyuan_serve.run.plan import cpu_groups

    return [Pin(cores=tuple(group[0])) for group in cpu_groups(count, 1, cores)]


def single_layout(hw: Hardware, cores: Sequence[int]) -> tuple[Pin, tuple[int, ...]]:
    """One server's pin and the load generator's cores: on CPU the first core for the server and the
    rest for the client (two cores at least); on a GPU the first device, the client unpinned."""
    if hw.on_gpu:
        return Pin(gpu=hw.gpus[0]), ()
    ordered = sorted(cores)
    if len(ordered) < 2:
        raise ValueError("one server against another on one core needs a second core for the client")
    return Pin(cores=(ordered[0],)), tuple(ordered[1:])


def alternating(rounds: int, first: str, second: str) -> list[tuple[int, str]]:
    """(round, setup) in the order they run: first, second, first, second, ...; noise that drifts
    over the run then falls on both setups alike."""
    return [(index, setup) for index in range(rounds) for setup in (first, second)]


def split(items: Sequence[Any], parts: int) -> list[list[Any]]:
    """items in `parts` contiguous slices whose sizes differ by one at most (the engines' shares)."""
    size, extra = divmod(len(items), parts)
    out, at = [], 0
    for index in range(parts):
        step = size + (1 if index < extra else 0)
        out.append(list(items[at : at + step]))
        at += step
    return out


def plain_strings(texts: Sequence[str], count: int) -> list[str]:
    """The first `count` distinct strings that `translate` sends as they are (the client's own segment
    plan: no blanks around them, not symbols or placeholders alone), so the engines can be given
    exactly the prompts the stack builds."""
    from hunyuan_serve.localization.segments import Action, plan_segment

    chosen: list[str] = []
    seen: set[str] = set()
    for text in texts:
        plan = plan_segment(text)
        if text in seen or plan.action is not Action.SEND or plan.request != text:
            continue
        seen.add(text)
        chosen.append(text)
        if len(chosen) == count:
            break
    return chosen


def i18next_document(strings: Sequence[str]) -> str:
    """An i18next JSON file with one key per string (no plural suffixes: every key is its own)."""
    width = len(str(len(strings)))
    return json.dumps(
        {f"s{i:0{width}d}": text for i, text in enumerate(strings)}, ensure_ascii=False, indent=1
    )


def ratio(value: float, base: float) -> float:
    return value / base if base > 0 else 0.0


@dataclass(frozen=True)
class Round:
    """One measured run of one setup: strings (or requests) done, seconds from first request to last
    answer, tokens generated and prompted, failures, and the CPU the waiting setup used meanwhile."""

    index: int
    setup: str
    count: int
    seconds: float
    tokens: float
    prompt_tokens: float = 0.0
    failed: int = 0
    idle_cpu_s: float = 0.0
    extra: str = ""  # anything else to say of this run (the client's own wall time, say)

    @property
    def rate(self) -> float:
        return self.count / self.seconds if self.seconds > 0 else 0.0

    @property
    def tokens_each(self) -> float:
        return self.tokens / self.count if self.count else 0.0

    @property
    def prompt_each(self) -> float:
        return self.prompt_tokens / self.count if self.count else 0.0


@dataclass
class Comparison:
    """One like-for-like row: `setup` against `baseline` in rounds, and how both were placed."""

    name: str
    title: str
    setup: str
    baseline: str
    unit: str  # "strings/s" or "req/s"
    pins: list[str] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    target: float = 1.0

    def of(self, setup: str) -> list[Round]:
        return [r for r in self.rounds if r.setup == setup]

    def ratios(self) -> list[float]:
        """setup / baseline of each round that both completed."""
        base = {r.index: r for r in self.of(self.baseline)}
        return [ratio(r.rate, base[r.index].rate) for r in self.of(self.setup) if r.index in base]

    def median_ratio(self) -> float:
        values = self.ratios()
        return statistics.median(values) if values else 0.0


def headline(c: Comparison) -> str:
    values = c.ratios()
    if not values:
        return f"- {c.title}: no complete round."
    each = ", ".join(f"{v:.2f}x" for v in values)
    mine = statistics.median([r.rate for r in c.of(c.setup)])
    base = statistics.median([r.rate for r in c.of(c.baseline)])
    return (
        f"- {c.title}: **{c.median_ratio():.2f}x** {c.unit} (median of {len(values)} round(s): {each}; "
        f"{mine:.1f} vs {base:.1f} {c.unit}, medians; target >= {c.target:g}x)."
    )


def section(c: Comparison) -> list[str]:
    """The row's table (every round of both setups), its ratios, pins and notes, in Markdown."""
    head = f"| round | setup | {c.unit.split('/')[0]} | seconds | {c.unit} | gen tokens each | "
    head += "prompt tokens each | failed | waiting setup's CPU-s | notes |"
    lines = [f"### {c.title}", "", head, "|" + "---|" * 10]
    for r in c.rounds:
        lines.append(
            f"| {r.index + 1} | {r.setup} | {r.count} | {r.seconds:.2f} | {r.rate:.1f} | "
            f"{r.tokens_each:.1f} | {r.prompt_each:.1f} | {r.failed} | {r.idle_cpu_s:.1f} | {r.extra} |"
        )
    each = ", ".join(f"{v:.2f}x" for v in c.ratios()) or "-"
    lines += [
        "",
        f"Ratio {c.setup} / {c.baseline} per round: {each}; median **{c.median_ratio():.2f}x**.",
        "",
    ]
    lines += [f"- Placed: {pin}" for pin in c.pins]
    lines += [f"- {note}" for note in c.notes]
    return [*lines, ""]


def report(rows: Sequence[Comparison], context: Sequence[str]) -> list[str]:
    """The like-for-like section of a report: headlines, then each row's rounds."""
    if not rows:
        return []
    md = ["## Like for like: the stack against bare vLLM on the same cores", "", *context, ""]
    md += [headline(c) for c in rows] + [""]
    for c in rows:
        md += section(c)
    return md


ROWS = (names.JOB, names.SINGLE, names.ASSEMBLED)


def assembled_nginx_conf(prefix: str, port: int, upstreams: Sequence[int]) -> str:
    """nginx.conf as a user would write it by hand in front of N `vllm serve`: least_conn, keepalive
    to the upstreams, default access log, nothing else (no edge cap, no retries, no JSON errors)."""
    servers = "\n".join(f"        server 127.0.0.1:{p};" for p in upstreams)
    return f"""worker_processes auto;
pid {prefix}/nginx.pid;
error_log {prefix}/logs/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log {prefix}/logs/access.log;
    client_body_temp_path {prefix}/temp/body;
    proxy_temp_path {prefix}/temp/proxy;
    fastcgi_temp_path {prefix}/temp/fastcgi;
    uwsgi_temp_path {prefix}/temp/uwsgi;
    scgi_temp_path {prefix}/temp/scgi;
    upstream vllm {{
        least_conn;
{servers}
        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://vllm;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_read_timeout 300s;
        }}
    }}
}}
"""
