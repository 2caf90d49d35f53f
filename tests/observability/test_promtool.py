"""The shipped Prometheus config, alert rules and Grafana dashboard pass Prometheus's own promtool."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool not installed (apt-get install prometheus)"
)


def _promtool(*args: str, cwd: Path = DEPLOY / "prometheus") -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_config_and_rules_check() -> None:
    config = _promtool("check", "config", "prometheus.yml")
    assert config.returncode == 0, config.stdout + config.stderr
    rules = _promtool("check", "rules", "alerts.yml")
    assert rules.returncode == 0, rules.stdout + rules.stderr
    assert "SUCCESS: 6 rules found" in rules.stdout


def test_each_alert_fires_on_its_series() -> None:
    result = _promtool("test", "rules", "alerts_test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def test_alerts_cover_what_the_issue_asks() -> None:
    rules = yaml.safe_load((DEPLOY / "prometheus/alerts.yml").read_text())["groups"]
    names = {rule["alert"] for group in rules for rule in group["rules"]}
    assert names == {
        "HunyuanReplicaDown",
        "HunyuanAllReplicasDown",
        "HunyuanErrorRate",
        "HunyuanLatencyP95",
        "HunyuanAdmissionSaturated",
        "HunyuanSharedCacheDown",
    }


def dashboard_exprs() -> list[str]:
    dashboard = json.loads((DEPLOY / "grafana/hunyuan-serve.json").read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_every_dashboard_query_is_valid_promql(tmp_path: Path) -> None:
    # promtool parses a rule file's expressions: one recording rule per dashboard query.
    exprs = dashboard_exprs()
    assert len(exprs) >= 10
    rules = [{"record": f"dashboard:query{i}", "expr": expr} for i, expr in enumerate(exprs)]
    (tmp_path / "dash.yml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = _promtool("check", "rules", "dash.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_broken_rule_is_refused(tmp_path: Path) -> None:
    # The checks above can fail: promtool rejects a rule whose expression does not parse.
    bad = {"groups": [{"name": "x", "rules": [{"alert": "X", "expr": "sum(rate(up[5m])"}]}]}
    (tmp_path / "bad.yml").write_text(yaml.safe_dump(bad))
    assert _promtool("check", "rules", "bad.yml", cwd=tmp_path).returncode != 0
