"""Debian's Prometheus scrapes a real `up` (Nginx, one replica on the tiny checkpoint) through the
file_sd targets `up` writes, loads the shipped alert rules, and serves the replica's and Nginx's
metrics back through its HTTP API."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from hunyuan_serve.edge.targets import NGINX_FILE, REPLICAS_FILE, TARGETS_DIR
from hunyuan_serve.run.events import read_events
from hunyuan_serve.run.state import read_state
from tests.support.stacks import cli, free_ports, started, tiny_engine, wait_until

START_TIMEOUT_S = 420.0
DEPLOY = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
MAX_IN_FLIGHT = 7
ROTATE_AT = 16 * 1024

pytestmark = [
    pytest.mark.engine,
    pytest.mark.nginx,
    pytest.mark.skipif(
        shutil.which("prometheus") is None, reason="no prometheus (apt-get install prometheus)"
    ),
    pytest.mark.skipif(shutil.which("nginx") is None, reason="nginx not installed"),
    pytest.mark.timeout(2 * START_TIMEOUT_S),
]


@dataclass
class Observed:
    run_dir: Path
    nginx_url: str
    prometheus_url: str

    def query(self, promql: str) -> list[dict[str, Any]]:
        answer = httpx.get(f"{self.prometheus_url}/api/v1/query", params={"query": promql}, trust_env=False)
        assert answer.status_code == 200, answer.text
        result: list[dict[str, Any]] = answer.json()["data"]["result"]
        return result

    def wait_query(self, promql: str, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        """The query's result once it is not empty (Prometheus scrapes every second here)."""
        deadline = time.monotonic() + timeout_s
        while not (result := self.query(promql)):
            assert time.monotonic() < deadline, f"no result for {promql} within {timeout_s:.0f}s"
            time.sleep(0.5)
        return result


def _up_config(work: Path, model: Path) -> tuple[Path, int, int]:
    port, status_port, base = free_ports(3)
    settings = {
        "replicas": 1,
        "base_port": base,
        "run_dir": str(work / "run"),
        "engine": tiny_engine(model, max_num_seqs=8),
        "replica": {"max_tokens": 4, "max_in_flight": MAX_IN_FLIGHT},
        "supervisor": {"probe_interval_s": 0.5, "startup_timeout_s": 400.0},
        "nginx": {"port": port, "status_port": status_port, "worker_processes": 1},
        # Small enough that the requests of the log test rotate every log several times; all kept.
        "logs": {"rotate_at_bytes": ROTATE_AT, "rotate_keep": 1000, "rotate_check_interval_s": 0.25},
    }
    config = work / "up.yaml"
    config.write_text(yaml.safe_dump(settings))
    return config, port, status_port


def _prometheus_config(work: Path, run_dir: Path) -> Path:
    """The shipped prometheus.yml with RUN_DIR filled in, scraping every second, and the shipped rules."""
    shipped = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    shipped["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    shipped["rule_files"] = [str(DEPLOY / "alerts.yml")]
    for job in shipped["scrape_configs"]:
        for sd in job["file_sd_configs"]:
            sd["files"] = [f.replace("RUN_DIR", str(run_dir)) for f in sd["files"]]
            sd["refresh_interval"] = "1s"
    path = work / "prometheus.yml"
    path.write_text(yaml.safe_dump(shipped))
    return path


def _ready(run_dir: Path) -> bool:
    state = read_state(run_dir)
    return state is not None and state["nginx"]["ready"] == 1


@pytest.fixture(scope="module")
def observed(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Observed]:
    work = tmp_path_factory.mktemp("observed")
    config, port, _ = _up_config(work, tiny_model_dir)
    run_dir = work / "run"
    with started(cli("up", "--config", str(config)), log=work / "up.log") as up:
        wait_until(up, work / "up.log", lambda: _ready(run_dir), START_TIMEOUT_S, "the replica ready")
        prom_port = free_ports(1)[0]
        argv = [
            "prometheus",
            f"--config.file={_prometheus_config(work, run_dir)}",
            f"--storage.tsdb.path={work / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ]
        url = f"http://127.0.0.1:{prom_port}"

        def prometheus_ready() -> bool:
            try:
                return httpx.get(f"{url}/-/ready", trust_env=False).status_code == 200
            except httpx.TransportError:
                return False

        with started(argv, log=work / "prometheus.log", ready=prometheus_ready, timeout_s=60):
            yield Observed(run_dir, f"http://127.0.0.1:{port}", url)


def test_up_writes_targets_from_its_routing(observed: Observed) -> None:
    state = read_state(observed.run_dir)
    assert state is not None
    replica = state["replicas"][0]
    groups = json.loads((observed.run_dir / TARGETS_DIR / REPLICAS_FILE).read_text())
    assert groups == [
        {
            "targets": [replica["addr"]],
            "labels": {
                "replica": replica["name"],
                "device": replica["device"],
                "routed": "true",
                "pool": replica["pool"],  # "default" without a pools section
            },
        }
    ]
    assert len(json.loads((observed.run_dir / TARGETS_DIR / NGINX_FILE).read_text())) == 1


def test_replica_metrics_read_back_through_prometheus(observed: Observed) -> None:
    # Scraped twice before the requests, so that rate() over the window sees them arrive.
    observed.wait_query('up{job="hunyuan-replicas"} == 1')
    observed.wait_query('count_over_time(up{job="hunyuan-replicas"}[1m]) >= 2')
    body = {"text": "Hello", "source_lang": "en", "target_lang": "zh"}
    with httpx.Client(base_url=observed.nginx_url, trust_env=False, timeout=60) as client:
        codes = [client.post("/translate", json={**body, "text": f"Hello {i}"}).status_code for i in range(5)]
    assert codes == [200] * 5
    ok = 'hunyuan_requests_total{job="hunyuan-replicas", status="200"} >= 5'
    [served] = observed.wait_query(ok)
    assert served["metric"]["replica"] == "replica-0" and served["metric"]["routed"] == "true"
    assert served["metric"]["device"].startswith("cpu")
    [limit] = observed.wait_query('hunyuan_max_in_flight{job="hunyuan-replicas"}')
    assert float(limit["value"][1]) == MAX_IN_FLIGHT
    assert observed.wait_query('hunyuan_request_latency_seconds_count{job="hunyuan-replicas"} >= 5')
    latency = "histogram_quantile(0.95, sum by (le) (rate(hunyuan_request_latency_seconds_bucket[1m]))) > 0"
    assert observed.wait_query(latency)


def test_nginx_counters_read_back_through_prometheus(observed: Observed) -> None:
    [up] = observed.wait_query('up{job="hunyuan-nginx"} == 1')
    assert up["metric"]["component"] == "nginx"
    [active] = observed.wait_query('nginx_connections_active{job="hunyuan-nginx"}')
    assert float(active["value"][1]) >= 1  # Prometheus's own scrape is one


def test_shipped_alert_rules_load_and_evaluate(observed: Observed) -> None:
    deadline = time.monotonic() + 30
    while True:
        answer = httpx.get(f"{observed.prometheus_url}/api/v1/rules", trust_env=False).json()
        rules = [rule for group in answer["data"]["groups"] for rule in group["rules"]]
        if rules and all(rule.get("lastEvaluation", "").startswith("2") for rule in rules):
            break
        assert time.monotonic() < deadline, rules
        time.sleep(0.5)
    groups = yaml.safe_load((DEPLOY / "alerts.yml").read_text())["groups"]
    shipped = sorted(rule["alert"] for group in groups for rule in group["rules"])
    assert sorted(rule["name"] for rule in rules) == shipped, rules
    assert all(rule["health"] == "ok" for rule in rules), rules
    # One replica, serving: neither down alert is pending or firing.
    states = {rule["name"]: rule["state"] for rule in rules}
    assert states["HunyuanReplicaDown"] == "inactive" and states["HunyuanAllReplicasDown"] == "inactive"


def _logged_ids(log: Path) -> list[str]:
    """request_id of every JSON line in the log and its rotated copies."""
    ids = []
    for path in log.parent.glob(log.name + "*"):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("{") and '"request_id"' in line:
                ids.append(json.loads(line)["request_id"])
    return ids


def test_logs_rotate_under_requests_and_nginx_loses_no_line(observed: Observed) -> None:
    """Requests (cache hits after the first, ~1 KB of log lines each) rotate Nginx's access log and the
    replica's log several times; every request is in Nginx's log and its copies exactly once."""
    access = observed.run_dir / "nginx" / "logs" / "access.log"
    replica = observed.run_dir / "logs" / "replica-0.log"

    def rotations() -> list[str]:
        events = read_events(observed.run_dir / "events.jsonl")
        return [e["path"] for e in events if e["event"] == "log_rotated"]

    def rotated_enough(rotated: list[str]) -> bool:
        return rotated.count(str(access)) >= 3 and rotated.count(str(replica)) >= 3

    def settled(rotated: list[str]) -> bool:  # rotated enough, and no rotation still due to shift files
        due = [p for p in (access, replica) if not p.exists() or p.stat().st_size >= ROTATE_AT]
        return not due and rotated_enough(rotated)

    # Sent until both logs rotated three times while requests flowed (bounded): how many rotations a
    # fixed count makes depends on how fast the requests go against the 0.25 s checks (a quiet machine
    # sent 400 between two checks' worth of rotations).
    sent: list[str] = []
    deadline = time.monotonic() + 60
    with httpx.Client(base_url=observed.nginx_url, trust_env=False, timeout=30) as client:
        while not rotated_enough(rotations()):
            assert len(sent) < 4000 and time.monotonic() < deadline, (len(sent), rotations())
            for _ in range(50):
                sent.append(f"rotate-{len(sent):05d}")
                body = {"text": "Open file", "source_lang": "en", "target_lang": "zh"}
                answer = client.post("/translate", json=body, headers={"X-Request-ID": sent[-1]})
                assert answer.status_code == 200, answer.text
    # Nginx writes a request's line in its log phase, after the answer has gone out, so the last answer
    # can arrive before its line is written (seen once under two lanes' load: every line was there a
    # moment later). The requests went one after another on one connection, and Nginx logs each before
    # it reads the next: once the last one's line is there, so is every earlier one.
    deadline = time.monotonic() + 30  # checks come every 0.25 s; a loaded machine may delay them
    while not (settled(rotated := rotations()) and sent[-1] in _logged_ids(access)):
        last_logged = sent[-1] in _logged_ids(access)
        assert time.monotonic() < deadline, (rotated, f"{sent[-1]} in {access}*: {last_logged}")
        time.sleep(0.25)
    assert (access.parent / "access.log.1").stat().st_size >= ROTATE_AT
    mine = [rid for rid in _logged_ids(access) if rid.startswith("rotate-")]
    assert sorted(mine) == sent  # renamed, then reopened on USR1: nothing lost, nothing twice
    in_replica_logs = {rid for rid in _logged_ids(replica) if rid.startswith("rotate-")}
    assert len(in_replica_logs) >= len(sent) - rotated.count(str(replica))  # copytruncate's window
