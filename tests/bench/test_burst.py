"""The burst question's figures: statuses counted, the nearest-rank percentiles, the report's rows."""

from __future__ import annotations

import argparse
import asyncio
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from bench import burst_person
from bench.burst import report
from bench.burst_kill import Killed, describe
from bench.burst_person import PeopleFirst, PersonRound, person_lines
from bench.burst_send import script, summarize
from tests.support.scripted_http import send_json, serving


def test_statuses_split_into_answered_refused_and_failed() -> None:
    outcomes = [("200", 1.0), ("200", 3.0), ("503", 0.01), ("429", 0.02), ("ReadTimeout", 600.0)]
    burst = summarize("stack", "script", outcomes, 4.5)
    assert (burst.k, burst.answered, burst.refused, burst.failed) == (5, 2, 2, 1)
    assert (burst.p50_s, burst.max_s, burst.wall_s) == (1.0, 3.0, 4.5)  # answered ones' latencies only
    assert burst.statuses == {"200": 2, "503": 1, "429": 1, "ReadTimeout": 1}


def test_the_report_compares_wall_times_per_k() -> None:
    bursts = [
        summarize("stack", "script", [("200", 1.0)] * 3, 13.0),
        summarize("vllm", "script", [("200", 1.0)] * 3, 10.0),
        summarize("stack", "openai", [("200", 1.0)] * 3, 12.0),
    ]
    text = report(bursts, argparse.Namespace(k=[3, 7], max_tokens=16))
    assert "- K = 3: stack wall time / vLLM's, the script: 1.30x" in text
    assert "- K = 7: stack wall time / vLLM's, the script: n/a" in text
    assert "| stack | openai | 3 | 3 | 0 | 0 | 1.00 | 1.00 | 1.00 | 12.0 |" in text


def test_the_report_gives_a_persons_p50_during_the_burst_against_idle_over_rounds() -> None:
    burst = summarize("stack", "script, bulk key", [("200", 1.0), ("503", 0.01)], 9.0)
    rounds = [
        PersonRound(0, idle_p50_s=0.4, during_p50_s=0.5, during_count=12, burst=burst),
        PersonRound(15, 0.4, 0.2, during_count=10, burst=burst),
        PersonRound(0, 0.2, 0.5, during_count=10, burst=burst, during_refused={"503": 1}),
        PersonRound(0, idle_p50_s=0.5, during_p50_s=0.5, during_count=11, burst=burst),
    ]
    text = report([], argparse.Namespace(k=[2], max_tokens=16), PeopleFirst(k=2, rounds=rounds))
    # Per nice value, the median of its rounds' ratios (at 0: 1.25x, 2.5x, 1.0x), not one round's.
    assert "during a burst of 2 at once from a bulk key, against idle, p50, the median of the rounds" in text
    assert "- the bulk script at nice 0 (the stack's own priority): 1.25x" in text
    assert "- the bulk script at nice 15 (its thread's nice value): 0.50x" in text
    assert "- round 1, bulk at nice 0: p50 0.40 s idle, 0.50 s (1.25x) over 12 strings" in text
    assert "{'200': 1, '503': 1} in 9.0 s); the person's answers other than 200: {'503': 1}" in text


@pytest.mark.parametrize(("flag", "grouped"), [("1\n", True), ("0\n", False), (None, False)])
def test_the_report_says_a_nice_value_orders_the_script_in_its_own_session_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flag: str | None, grouped: bool
) -> None:
    path = tmp_path / "sched_autogroup_enabled"
    if flag is not None:
        path.write_text(flag)
    monkeypatch.setattr(burst_person, "AUTOGROUP", str(path))
    burst = summarize("stack", "script, bulk key", [("200", 1.0)], 9.0)
    niced = PeopleFirst(2, [PersonRound(0, 0.4, 0.5, 12, burst), PersonRound(15, 0.4, 0.5, 12, burst)])
    note = "the script's nice value orders it against the bench's own person only, not against the stack"
    assert (note in "\n".join(person_lines(niced))) is grouped
    # With the script at the stack's priority alone there is no nice value to explain.
    alone = PeopleFirst(2, [PersonRound(0, 0.4, 0.5, 12, burst)])
    assert note not in "\n".join(person_lines(alone))


def test_the_report_says_what_the_kill_step_killed_and_its_burst_row() -> None:
    killed = Killed(pid=42, in_flight=600, queued=344, at_s=3.25)
    burst = summarize("stack", "script, kill -9", [("200", 2.0)] * 4, 20.0)
    text = report([burst], argparse.Namespace(k=[4], max_tokens=16), None, describe(killed, 4))
    assert "kill -9 of replica pid 42 3.2 s into the burst of 4, holding 600 requests admitted" in text
    assert "| stack | script, kill -9 | 4 | 4 | 0 | 0 |" in text
    assert "nothing killed" in describe(None, 4)


class _Held(ThreadingHTTPServer):
    """Answers completions requests only once `release` is set (a 503 if it is not within 10 s)."""

    request_queue_size = 64  # the script's 20 connections at once: the default backlog is 5

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _HeldHandler)
        self.release = threading.Event()


class _HeldHandler(BaseHTTPRequestHandler):
    server: _Held

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        released = self.server.release.wait(10)
        send_json(self, 200 if released else 503, {"choices": [{"text": "x"}]})

    def log_message(self, *_: object) -> None:
        pass


def test_the_script_says_once_when_it_has_written_every_request() -> None:
    k, calls = 20, list[int]()
    with serving(_Held()) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}"

        def sent() -> None:
            calls.append(1)
            server.release.set()

        async def run() -> list[tuple[str, float]]:
            return await script(url, lambda i: {"i": i}, k, "key", sent=sent)

        outcomes = asyncio.run(run())
    # Every answer waited for `sent`: it came while all k waited, not after the script's answers.
    assert [status for status, _ in outcomes] == ["200"] * k
    assert calls == [1]
