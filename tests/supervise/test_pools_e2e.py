"""Two pools in one real `up`: a Hunyuan-MT tiny and an HY-MT1.5 tiny on CPU, one replica each.

One stack start: both pools ready, `status --json` names each pool's model, each replica's /health its
pool's family; then a reload that changes only pool B while steady load runs against pool A's replica
directly: nothing fails, A keeps its process, B's is replaced. Figures are printed (run with -s); heavy:
`flock /tmp/hs-heavy.lock timeout 900 .venv/bin/pytest -s -q tests/supervise/test_pools_e2e.py`.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from hunyuan_serve.edge.targets import REPLICAS_FILE, TARGETS_DIR
from hunyuan_serve.run.events import read_events
from hunyuan_serve.run.state import EVENTS_FILE, read_state
from tests.support.load import Load
from tests.support.stacks import alive, cli, free_ports, started, tiny_engine, wait_until

START_TIMEOUT_S = 420.0  # two vLLM CPU engines loading on two shared cores
RELOAD_TIMEOUT_S = 600.0  # one cold engine start beside the old one

pytestmark = [
    pytest.mark.engine,
    pytest.mark.nginx,
    pytest.mark.e2e,
    pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx is not installed"),
    pytest.mark.timeout(START_TIMEOUT_S + RELOAD_TIMEOUT_S + 120),
]


def _settings(work: Path, mt: Path, mt15: Path) -> tuple[dict[str, Any], int]:
    port, base, *_ = free_ports(5)  # Nginx, then both port sets of the two replicas
    engine = {k: v for k, v in tiny_engine(mt).items() if k != "model"}  # every pool's engine settings
    return {
        "base_port": base,
        "run_dir": str(work / "run"),
        "engine": engine,
        "replica": {"max_tokens": 8},
        "pools": [
            {"name": "mt", "model": str(mt), "replicas": 1},
            {"name": "mt15", "model": str(mt15), "replicas": 1},
        ],
        "supervisor": {
            "probe_interval_s": 0.25,
            "startup_timeout_s": 400.0,
            "drain_timeout_s": 10.0,
            "kill_timeout_s": 10.0,
        },
        "nginx": {"port": port, "worker_processes": 1, "read_timeout_s": 120.0},
    }, port


def _health(addr: str) -> dict[str, Any]:
    body = httpx.get(f"http://{addr}/health", timeout=10, trust_env=False).json()
    assert isinstance(body, dict)
    return body


def _ready(run_dir: Path) -> bool:
    state = read_state(run_dir)
    if state is None:
        return False
    replicas = state["replicas"]
    return all(r["state"] == "ready" for r in replicas) and state["nginx"]["ready"] == len(replicas)


def _replicas(run_dir: Path) -> dict[str, dict[str, Any]]:
    state = read_state(run_dir)
    assert state is not None
    return {r["name"]: r for r in state["replicas"]}


def test_two_pools_serve_and_a_reload_of_one_leaves_the_other_serving(
    tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from hunyuan_serve.tiny_model import build_tiny_model

    work = tmp_path_factory.mktemp("pools")
    mt15 = build_tiny_model(tmp_path_factory.mktemp("tiny-hy-mt1.5-"), seed=1, kind="hy-mt1.5")
    settings, _port = _settings(work, tiny_model_dir, mt15)
    config, log, run_dir = work / "up.yaml", work / "up.log", work / "run"
    config.write_text(yaml.safe_dump(settings))
    figures: dict[str, Any] = {}
    with started(cli("up", "--config", str(config)), log=log) as proc:
        t0 = time.time()
        wait_until(proc, log, lambda: _ready(run_dir), START_TIMEOUT_S, "both pools ready")
        figures["start to both pools ready, s"] = round(time.time() - t0, 1)
        status = json.loads(
            subprocess.run(
                cli("status", "--run-dir", str(run_dir), "--json"),
                capture_output=True,
                text=True,
                timeout=60,
                check=True,
            ).stdout
        )
        pools = {p["name"]: p for p in status["pools"]}
        assert {n: (p["model"], p["family"], p["replicas"]) for n, p in pools.items()} == {
            "mt": (str(tiny_model_dir), "hunyuan-mt", ["mt-0"]),
            "mt15": (str(mt15), "hy-mt1.5", ["mt15-0"]),
        }
        assert [(r["name"], r["pool"], r["device"]) for r in status["replicas"]] == [
            ("mt-0", "mt", "cpu:0"),
            ("mt15-0", "mt15", "cpu:1"),
        ]
        before = _replicas(run_dir)
        a, b = before["mt-0"], before["mt15-0"]
        assert _health(a["addr"])["family"] == "hunyuan-mt" and _health(b["addr"])["family"] == "hy-mt1.5"
        labels = json.loads((run_dir / TARGETS_DIR / REPLICAS_FILE).read_text())
        assert [(t["labels"]["replica"], t["labels"]["pool"]) for t in labels] == [
            ("mt-0", "mt"),
            ("mt15-0", "mt15"),
        ]
        figures["reload of pool mt15"] = _reload_b(proc, log, config, settings, run_dir, a, b)
    print("\nhunyuan-serve pools figures:", json.dumps(figures, indent=1))


def _reload_b(
    proc: subprocess.Popen[bytes],
    log: Path,
    config: Path,
    settings: dict[str, Any],
    run_dir: Path,
    a: dict[str, Any],
    b: dict[str, Any],
) -> dict[str, Any]:
    """Pool mt15's replica setting changed in the file, `reload` under load on pool mt's replica."""
    edited = json.loads(json.dumps(settings))
    edited["pools"][1]["replica"] = {"max_in_flight": 64}
    config.write_text(yaml.safe_dump(edited))
    argv = cli("reload", "--run-dir", str(run_dir), "--timeout", str(RELOAD_TIMEOUT_S))
    with Load(f"http://{a['addr']}", threads=2, pause_s=0.2) as load:
        load.wait_ok(10)
        t0 = time.time()
        out = subprocess.run(argv, capture_output=True, text=True, timeout=RELOAD_TIMEOUT_S + 60)
        t1 = time.time()
        load.wait_ok(5, since=t1)
    print(f"\nreload said:\n{out.stdout}{out.stderr}")
    assert out.returncode == 0, out.stdout + out.stderr
    assert load.failures == [], load.failures[:5]
    wait_until(proc, log, lambda: _ready(run_dir), 60, "both pools ready after the reload")
    after = _replicas(run_dir)
    assert after["mt-0"]["pid"] == a["pid"] and after["mt-0"]["port"] == a["port"]
    assert after["mt15-0"]["pid"] != b["pid"] and not alive(b["pid"])
    assert f"mt15-0 pid {b['pid']} -> {after['mt15-0']['pid']}" in out.stdout and "kept mt-0" in out.stdout
    assert _health(after["mt15-0"]["addr"])["max_in_flight"] == 64
    assert _health(a["addr"])["max_in_flight"] == 256
    events = read_events(run_dir / EVENTS_FILE)
    exits = {e["pid"]: e["returncode"] for e in events if e["event"] == "replica_exited"}
    assert exits == {b["pid"]: 0}  # pool mt's replica never stopped; mt15's old one drained and exited 0
    assert {e["pool"] for e in events if e["event"] == "admitted"} == {"mt", "mt15"}
    return {
        "pids before": {"mt-0": a["pid"], "mt15-0": b["pid"]},
        "pids after": {n: r["pid"] for n, r in after.items()},
        "reload wall time, s": round(t1 - t0, 1),
        "requests to pool mt during the reload": sum(t0 <= s.end <= t1 for s in load.answered()),
        "failed requests": len(load.failures),
    }
