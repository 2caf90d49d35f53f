"""Rolling reload end to end: a real `up` (two tiny replicas, real Nginx), steady load, `reload`.

The suite's `restart_stack` serves the module (shared with test_up_e2e.py). Bad configs are refused
with nothing touched; then the config file is edited and one `reload` replaces every replica under load,
carrying the model (a second tiny checkpoint of another generation, so its prompt family is placed
again), a replica setting and an Nginx setting; the stack's `settings` and `family` say so after. Figures
are printed when the stack stops (run with -s); heavy:
`flock /tmp/hs-heavy.lock timeout 900 .venv/bin/pytest -s -q tests/supervise/test_reload_e2e.py`.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from hunyuan_serve.run.events import read_events
from hunyuan_serve.run.state import EVENTS_FILE
from tests.support.load import Load
from tests.support.restart_stack import START_TIMEOUT_S, UpStack
from tests.support.stacks import alive, cli

RELOAD_TIMEOUT_S = 900.0  # two replicas replaced one at a time, each a cold engine start beside the old one

pytestmark = [
    pytest.mark.engine,
    pytest.mark.nginx,
    pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx is not installed"),
    pytest.mark.timeout(START_TIMEOUT_S + 2 * RELOAD_TIMEOUT_S),
]


def _reload(stack: UpStack) -> subprocess.CompletedProcess[str]:
    argv = cli("reload", "--run-dir", str(stack.run_dir), "--timeout", str(RELOAD_TIMEOUT_S))
    return subprocess.run(argv, capture_output=True, text=True, timeout=RELOAD_TIMEOUT_S + 60)


def _health(stack: UpStack) -> dict[str, Any]:
    body = httpx.get(f"{stack.url}/health", timeout=10, trust_env=False).json()
    assert isinstance(body, dict)
    return body


@pytest.fixture(scope="module")
def second_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another generation's tiny checkpoint (HY-MT1.5), named so that `auto` places its family."""
    from hunyuan_serve.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-hy-mt1.5-"), seed=1, kind="hy-mt1.5")


@pytest.fixture
def stack(restart_stack: UpStack) -> UpStack:
    """The shared `up` once both replicas are ready (an earlier test may have killed them)."""
    restart_stack.wait_ready(2 * START_TIMEOUT_S)
    return restart_stack


def _reload_under_load(stack: UpStack, label: str, settings: dict[str, Any]) -> tuple[Load, str]:
    """Write the settings, `reload` under load; checks 0 failures and every replica replaced."""
    before = stack.pids()
    stack.write(settings)
    # Lighter than the chaos test's load: each new engine loads on a core its predecessor is serving from.
    with Load(stack.url, threads=2, pause_s=0.2) as load:
        load.wait_ok(10)
        t0 = time.time()
        out = _reload(stack)
        t1 = time.time()
        if out.returncode == 0:
            # What the shared stack now runs, recorded before any check below can fail, so that the next
            # module on this stack compares against the config it really serves.
            stack.settings, stack.family = settings, _health(stack)["family"]
        load.wait_ok(10, since=t1)  # and it goes on serving after
    print(f"\n{label}: reload said:\n{out.stdout}{out.stderr}")
    assert out.returncode == 0, out.stdout + out.stderr
    assert load.failures == [], load.failures[:5]
    after = stack.pids()
    assert set(after) == set(before) and all(after[n] != before[n] for n in before)
    assert [pid for pid in before.values() if alive(pid)] == []
    for name in before:
        assert f"{name} pid {before[name]} -> {after[name]}" in out.stdout
    # Each old replica, drained and SIGTERMed, exited on its own with 0: not SIGKILLed (-9) at
    # supervisor.kill_timeout_s, which a replica whose engine lingers after Uvicorn is done would be.
    exits = {
        e["pid"]: e["returncode"]
        for e in read_events(stack.run_dir / EVENTS_FILE)
        if e["event"] == "replica_exited"
    }
    assert {pid: exits.get(pid) for pid in before.values()} == {pid: 0 for pid in before.values()}
    stack.figures[label] = {
        "pids before": before,
        "pids after": after,
        "reload wall time, s": round(t1 - t0, 1),
        "requests served during the reload": sum(t0 <= s.end <= t1 for s in load.answered()),
        "failed requests": len(load.failures),
        "old replicas' exit codes": {pid: exits[pid] for pid in before.values()},
        "answers per model": load.models,
    }
    return load, out.stdout


OPEN_KEYS = "OPEN_KEYS"  # replaced by a keys file of mode 0644, made by the test


@pytest.mark.parametrize(
    ("edit", "said", "code"),
    [
        ({"replica": {"max_in_flight": "many"}}, "replica.max_in_flight", 1),
        ({"nginx": {"port": 1}}, "nginx.port: needs a full restart", 1),
        ({"engine": {"model": "/nonexistent/model"}}, "/nonexistent/model", 1),
        # A secret file others may read: exit 2, as `up` refuses it (docs/security.md).
        ({"auth": {"keys_file": OPEN_KEYS}}, "has mode 0644: others may read it; run: chmod 600", 2),
    ],
)
def test_a_bad_config_is_refused_and_nothing_is_touched(
    stack: UpStack, tmp_path: Path, edit: dict[str, Any], said: str, code: int
) -> None:
    before = stack.replicas()
    settings = json.loads(json.dumps(stack.settings))
    keys = tmp_path / "keys.txt"
    keys.write_text("sk-open-0123456789\n")
    keys.chmod(0o644)
    for section, values in edit.items():
        values = {k: str(keys) if v == OPEN_KEYS else v for k, v in values.items()}
        settings[section] = {**settings.get(section, {}), **values}
    stack.write(settings)
    try:
        out = _reload(stack)
    finally:
        stack.write(stack.settings)
    print(f"\nrefused ({said}): {out.stderr.strip()}")
    assert out.returncode == code and "refused, nothing was changed" in out.stderr and said in out.stderr
    after = stack.replicas()
    assert [(r["pid"], r["port"], r["config"]) for r in after] == [
        (r["pid"], r["port"], r["config"]) for r in before
    ]
    assert stack.all_ready()


def test_reload_to_another_model_and_settings_under_load_replaces_every_replica(
    stack: UpStack, second_model: Path
) -> None:
    # One reload carries everything a reload applies: the model (another generation's checkpoint, so its
    # prompt family is placed again), a replica setting (each replica's /health says it) and an Nginx
    # one (its upstream lines), the latter once both replicas run the new config.
    old, old_family = _health(stack), stack.family
    settings = json.loads(json.dumps(stack.settings))
    settings["engine"]["model"] = str(second_model)
    settings["replica"]["max_in_flight"] = 64
    settings["nginx"]["max_fails"] = 2
    label = (
        "model (hunyuan-mt tiny -> hy-mt1.5 tiny), replica.max_in_flight 256 -> 64, nginx.max_fails 1 -> 2"
    )
    load, said = _reload_under_load(stack, label, settings)
    rid = int(said.split()[1])  # "reload 4 done in ...": the refusals before it had ids too
    for replica in stack.replicas():
        health = httpx.get(f"http://{replica['addr']}/health", timeout=10, trust_env=False).json()
        assert health["max_in_flight"] == 64, replica
        assert replica["config"] == rid and replica["state"] == "ready"
    assert (stack.run_dir / "nginx" / "nginx.conf").read_text().count(" max_fails=2 ") == 2
    new = _health(stack)
    assert old["family"] == old_family and new["family"] == stack.family == "hy-mt1.5"
    assert new["model"] != old["model"] and {old["model"], new["model"]} <= set(load.models)
    with httpx.Client(base_url=stack.url, timeout=60, trust_env=False) as client:
        answer = client.post(
            "/translate", json={"text": "Good night", "source_lang": "en", "target_lang": "zh"}
        )
    assert answer.status_code == 200 and answer.json()["model"] == new["model"]
