"""Two pools in one real `up`: a Hunyuan-MT tiny and a Hunyuan-MT-Chimera tiny on CPU, one replica each.

The suite's `pools_stack` (shared with tests/api/test_route_by_model_e2e.py): both pools ready, `status
--json` names each pool's model, each replica's /health its pool's family; then a reload that changes only
the Chimera's pool while steady load runs against pool mt's replica directly: nothing fails, mt keeps its
process, the Chimera's is replaced. (HY-MT1.5's family placed by `auto`: at start, the keyed stack's;
at a reload, tests/supervise/test_reload_e2e.py.) Figures are printed (run with -s); heavy:
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
from hunyuan_serve.run.state import EVENTS_FILE
from tests.support.load import Load
from tests.support.pools_stack import START_TIMEOUT_S, PoolsStack
from tests.support.stacks import alive, cli

RELOAD_TIMEOUT_S = 600.0  # one cold engine start beside the old one

pytestmark = [
    pytest.mark.engine,
    pytest.mark.nginx,
    pytest.mark.e2e,
    pytest.mark.skipif(not Path("/usr/lib/nginx/modules/ngx_http_js_module.so").exists(), reason="no njs"),
    pytest.mark.timeout(START_TIMEOUT_S + RELOAD_TIMEOUT_S + 120),
]


def _health(addr: str) -> dict[str, Any]:
    body = httpx.get(f"http://{addr}/health", timeout=10, trust_env=False).json()
    assert isinstance(body, dict)
    return body


def test_two_pools_serve_and_a_reload_of_one_leaves_the_other_serving(pools_stack: PoolsStack) -> None:
    stack = pools_stack
    stack.wait_ready(START_TIMEOUT_S)  # an earlier user may have restarted a replica
    status = json.loads(
        subprocess.run(
            cli("status", "--run-dir", str(stack.run_dir), "--json"),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    )
    pools = {p["name"]: p for p in status["pools"]}
    models = {pool["name"]: pool["model"] for pool in stack.settings["pools"]}
    assert {n: (p["model"], p["family"], p["replicas"]) for n, p in pools.items()} == {
        "mt": (models["mt"], "hunyuan-mt", ["mt-0"]),
        "chimera": (models["chimera"], "chimera", ["chimera-0"]),
    }
    assert [(r["name"], r["pool"], r["device"]) for r in status["replicas"]] == [
        ("mt-0", "mt", "cpu:0"),
        ("chimera-0", "chimera", "cpu:1"),
    ]
    before = stack.replicas()
    a, b = before["mt-0"], before["chimera-0"]
    assert _health(a["addr"])["family"] == "hunyuan-mt" and _health(b["addr"])["family"] == "chimera"
    labels = json.loads((stack.run_dir / TARGETS_DIR / REPLICAS_FILE).read_text())
    assert [(t["labels"]["replica"], t["labels"]["pool"]) for t in labels] == [
        ("mt-0", "mt"),
        ("chimera-0", "chimera"),
    ]
    figures = {"reload of pool chimera": _reload_b(stack, a, b)}
    print("\nhunyuan-serve pools figures:", json.dumps(figures, indent=1))


def _reload_b(stack: PoolsStack, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Pool chimera's replica setting changed in the file, `reload` under load on pool mt's replica."""
    edited = json.loads(json.dumps(stack.settings))
    edited["pools"][1]["replica"] = {"max_in_flight": 64}
    stack.config.write_text(yaml.safe_dump(edited))
    mark = len(read_events(stack.run_dir / EVENTS_FILE))
    argv = cli("reload", "--run-dir", str(stack.run_dir), "--timeout", str(RELOAD_TIMEOUT_S))
    with Load(f"http://{a['addr']}", threads=2, pause_s=0.2) as load:
        load.wait_ok(10)
        t0 = time.time()
        out = subprocess.run(argv, capture_output=True, text=True, timeout=RELOAD_TIMEOUT_S + 60)
        t1 = time.time()
        load.wait_ok(5, since=t1)
    print(f"\nreload said:\n{out.stdout}{out.stderr}")
    assert out.returncode == 0, out.stdout + out.stderr
    stack.settings = edited
    assert load.failures == [], load.failures[:5]
    stack.wait_ready(60)
    after = stack.replicas()
    assert after["mt-0"]["pid"] == a["pid"] and after["mt-0"]["port"] == a["port"]
    assert after["chimera-0"]["pid"] != b["pid"] and not alive(b["pid"])
    said = f"chimera-0 pid {b['pid']} -> {after['chimera-0']['pid']}"
    assert said in out.stdout and "kept mt-0" in out.stdout
    assert _health(after["chimera-0"]["addr"])["max_in_flight"] == 64
    assert _health(a["addr"])["max_in_flight"] == 256
    events = read_events(stack.run_dir / EVENTS_FILE)
    exits = {e["pid"]: e["returncode"] for e in events[mark:] if e["event"] == "replica_exited"}
    assert exits == {b["pid"]: 0}  # pool mt's replica never stopped; the Chimera's old one drained, exited 0
    assert {e["pool"] for e in events if e["event"] == "admitted"} == {"mt", "chimera"}
    return {
        "pids before": {"mt-0": a["pid"], "chimera-0": b["pid"]},
        "pids after": {n: r["pid"] for n, r in after.items()},
        "reload wall time, s": round(t1 - t0, 1),
        "requests to pool mt during the reload": sum(t0 <= s.end <= t1 for s in load.answered()),
        "failed requests": len(load.failures),
    }
