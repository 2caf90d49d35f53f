"""A burst as a user's script sends it (one client, every string at once, no retries) against `up` with
two replicas, one stack for the module: past the engines' batch it waits in the replicas, whose /health
answers throughout, and is answered; past what the replicas queue it gets fast 503s with Retry-After,
in each API's shape; a rolling reload during bursts refuses none of them; and a kill -9 of one replica
during a burst and a file job (`translate`) refuses none of the burst and loses no string of the file
(Nginx retries what the dead replica held on the other)."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.test_edge import PATHS, message_of
from tests.support.stacks import cli
from tests.support.two_replicas import (
    RELOAD_TIMEOUT_S,
    START_TIMEOUT_S,
    TwoReplicas,
    health_of,
    two_replica_settings,
    two_replicas,
    until,
)

# Each replica batches 8 and lets 40 wait: Nginx sends each at most 48 (edge/capacity.py).
MAX_NUM_SEQS = 8
MAX_QUEUED = 40
WITHIN = 80  # well past the 16 the engines batch, within the 96 the replicas take
PAST = 400  # far past them: most are refused before any place frees up
# Bursts during the reload: what one replica takes alone, so that a replica leaving the routing (and
# Nginx sending on again what it had sent it) never leaves the burst without a place. ROUNDS: a bound,
# the reload ends long before (60 bursts did not last a reload of two replicas on two busy cores).
RELOAD_BURST = MAX_NUM_SEQS + MAX_QUEUED
ROUNDS = 400
# What the reload sets, so that the survivor of the kill can hold the whole kill burst and file job.
KILL_QUEUED = 400
KILL_BURST = 300
STRINGS = 300  # the file job's strings
WAIT_S = 300.0  # the survivor serves all of it alone: no wait bound, no deadline on the way

pytestmark = [
    pytest.mark.engine,
    pytest.mark.e2e,
    pytest.mark.nginx,
    pytest.mark.skipif(not Path("/usr/sbin/nginx").exists(), reason="nginx is not installed"),
    pytest.mark.timeout(2 * START_TIMEOUT_S + RELOAD_TIMEOUT_S + 600),
]

Answers = list[tuple[str, httpx.Response]]


def _body(dialect: str, text: str, model: str) -> dict[str, Any]:
    bodies: dict[str, dict[str, Any]] = {
        "native": {"text": text, "source_lang": "en", "target_lang": "zh"},
        "openai": {
            "model": model,
            "messages": [{"role": "user", "content": f"Translate into Chinese: {text}"}],
        },
        "libretranslate": {"q": text, "source": "en", "target": "zh"},
        "deepl": {"text": [text], "source_lang": "EN", "target_lang": "ZH"},
        "immersive": {"source_lang": "en", "target_lang": "zh-CN", "text_list": [text]},
    }
    return bodies[dialect]


async def _burst(url: str, sends: list[tuple[str, str]], model: str) -> Answers:
    """The seed's script: one client, every request at once, no retries."""
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(base_url=url, trust_env=False, timeout=WAIT_S, limits=limits) as http:
        answers = await asyncio.gather(
            *(http.post(PATHS[dialect], json=_body(dialect, text, model)) for dialect, text in sends)
        )
    return [(dialect, answer) for (dialect, _), answer in zip(sends, answers, strict=True)]


def _lines(label: str, count: int) -> list[tuple[str, str]]:
    return [("native", f"{label} line {i}") for i in range(count)]


def _statuses(answers: Answers) -> Counter[int]:
    return Counter(r.status_code for _, r in answers)


def _refused(answers: Answers) -> list[str]:
    return [f"{r.status_code} {r.text[:200]}" for _, r in answers if r.status_code != 200][:3]


@pytest.fixture(scope="module")
def stack(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoReplicas]:
    work = tmp_path_factory.mktemp("burst")
    # The engine is handed its batch and no more: the rest of a burst waits in the replica.
    replica = {"max_in_flight": MAX_NUM_SEQS, "max_queued": MAX_QUEUED, "engine_queue_margin": 0}
    settings = two_replica_settings(work, tiny_model_dir, MAX_NUM_SEQS, replica, {"read_timeout_s": WAIT_S})
    with two_replicas(work, settings) as up:
        yield up


async def _probed(stack: TwoReplicas, sends: list[tuple[str, str]]) -> tuple[Answers, list[dict[str, Any]]]:
    """The burst, and every replica's /health asked directly while it runs."""
    ports = [replica["port"] for replica in stack.replicas()]
    seen: list[dict[str, Any]] = []
    task = asyncio.ensure_future(_burst(stack.url, sends, stack.served_model()))
    async with httpx.AsyncClient(trust_env=False) as http:

        async def probe() -> bool:
            seen.extend([await health_of(http, port) for port in ports])
            return False

        await until(task, probe, START_TIMEOUT_S)
    return await task, seen


def test_a_burst_within_the_queues_is_answered_and_past_them_refused_fast(stack: TwoReplicas) -> None:
    within, probes = asyncio.run(_probed(stack, _lines("Page", WITHIN)))
    # /health answers from the replica's own state while its queue holds what the engine cannot batch.
    assert {p["http"] for p in probes} == {200}, [p for p in probes if p["http"] != 200][:3]
    assert max(int(p.get("queued", 0)) for p in probes) > 0, probes[:3]
    dialects = list(PATHS)
    sends = [(dialects[i % len(dialects)], f"Label {i} of the form") for i in range(PAST)]
    past = asyncio.run(_burst(stack.url, sends, stack.served_model()))
    assert _statuses(within) == {200: WITHIN}, _refused(within)
    statuses = _statuses(past)
    assert set(statuses) == {200, 503} and statuses[200] >= 2 * (MAX_NUM_SEQS + MAX_QUEUED), statuses
    for dialect, response in past:
        if response.status_code == 503:
            assert int(response.headers["retry-after"]) >= 1, response.headers
            code = "overloaded" if "overloaded" in response.text else "unavailable"
            assert message_of(dialect, response.json(), code), (dialect, response.text)
    print(f"\n{WITHIN} at once: all 200; {PAST} at once: {dict(statuses)}")


def test_a_rolling_reload_during_bursts_refuses_none_of_them(stack: TwoReplicas) -> None:
    stack.wait_ready()
    before = {r["name"]: r["pid"] for r in stack.replicas()}
    settings = copy.deepcopy(stack.settings)
    # What the kill needs of the survivor, applied by the reload: every replica is replaced.
    settings["replica"].update(max_queued=KILL_QUEUED, max_queue_wait_s=WAIT_S, request_timeout_s=WAIT_S)
    stack.write(settings)
    model = stack.served_model()

    async def bursts_until_reloaded() -> tuple[subprocess.CompletedProcess[str], Answers, int]:
        reload = asyncio.ensure_future(asyncio.to_thread(stack.reload))
        answers: Answers = []
        rounds = 0
        while not reload.done() and rounds < ROUNDS:
            answers += await _burst(stack.url, _lines(f"Round {rounds}", RELOAD_BURST), model)
            rounds += 1
        return await reload, answers, rounds

    began = time.monotonic()
    out, answers, rounds = asyncio.run(bursts_until_reloaded())
    took_s = time.monotonic() - began
    assert out.returncode == 0, out.stdout + out.stderr
    after = {r["name"]: r["pid"] for r in stack.replicas()}
    assert set(after) == set(before) and all(after[n] != before[n] for n in before), (before, after)
    assert rounds < ROUNDS and _statuses(answers) == {200: rounds * RELOAD_BURST}, _refused(answers)
    stack.settings = settings
    print(
        f"\nrolling reload ({took_s:.1f} s) during {rounds} bursts of {RELOAD_BURST}: all {len(answers)} 200"
    )


def _file_job(stack: TwoReplicas, work: Path) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """`translate` of a JSON file of STRINGS strings through the stack (bulk work, sized by the edge)."""
    source = {f"key.{i}": f"Label {i} of the settings page" for i in range(STRINGS)}
    (work / "en.json").write_text(json.dumps(source, indent=1), encoding="utf-8")
    cmd = cli("translate", "--url", stack.url, "--from", "en", "--to", "zh", str(work / "en.json"))
    cmd += ["-o", str(work / "zh.json"), "--cache", str(work / "cache.sqlite")]
    cmd += ["--report", str(work / "report.json"), "--no-progress"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True), source


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = Counter(key for key, _ in pairs)
    assert [k for k, n in keys.items() if n > 1] == [], "a key written twice into the file"
    return dict(pairs)


def _check_file(work: Path, source: dict[str, str]) -> dict[str, Any]:
    """Every key of the source once, in order; what failed failed the client's checks of an answer
    (random tokens), never a lost request."""
    done = json.loads((work / "report.json").read_text(encoding="utf-8"))
    written = json.loads((work / "zh.json").read_text(encoding="utf-8"), object_pairs_hook=_once)
    assert list(written) == list(source)
    assert done["total"] == STRINGS and done["aborted"] is None
    assert done["translated"] + done["cached"] + done["skipped"] + done["failed"] == STRINGS
    problems = ("missing", "unexpected", "positional", "empty", "control")
    assert all(f["problem"].startswith(problems) for f in done["failures"]), done["failures"][:3]
    assert done["translated"] > STRINGS // 2
    return dict(done)


def test_a_kill_9_during_a_burst_and_a_file_job_refuses_and_loses_nothing(
    stack: TwoReplicas, tmp_path: Path
) -> None:
    stack.wait_ready()
    victim = stack.replicas()[0]
    model = stack.served_model()
    job, source = _file_job(stack, tmp_path)

    async def burst_and_kill() -> tuple[dict[str, Any], Answers]:
        burst = asyncio.ensure_future(_burst(stack.url, _lines("Kill", KILL_BURST), model))
        held: dict[str, Any] = {}
        async with httpx.AsyncClient(trust_env=False) as http:

            async def holding() -> bool:  # a good part of the burst, and work waiting for engine room
                held.update(await health_of(http, victim["port"]))
                return int(held.get("in_flight", 0)) >= KILL_BURST // 10 and int(held.get("queued", 0)) > 0

            await until(burst, holding, 120)
        os.kill(victim["pid"], signal.SIGKILL)
        return held, await burst

    began = time.monotonic()
    held, answers = asyncio.run(burst_and_kill())
    answered_s = time.monotonic() - began
    _, err = job.communicate(timeout=WAIT_S * 2)
    assert job.returncode in (0, 1), f"rc {job.returncode}: {err}"
    assert int(held.get("queued", 0)) > 0, f"the victim never held queued work: {held}"
    assert _statuses(answers) == {200: KILL_BURST}, _refused(answers)
    done = _check_file(tmp_path, source)
    print(
        f"\nkill -9 of a replica holding {held.get('in_flight')} requests ({held.get('queued')} sequences "
        f"queued) of {KILL_BURST} sent at once and a file job: all {KILL_BURST} 200 in {answered_s:.1f} s; "
        f"file: {done['translated']} translated, {done['failed']} failed the checks"
    )
