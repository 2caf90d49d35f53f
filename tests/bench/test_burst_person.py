"""The burst's person in a process of their own, against a scripted completions server: idle strings
first, then strings between go and stop, refusals counted apart."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bench import burst_person
from bench.fairness_stack import KEYS
from tests.support.scripted_http import send_json, serving


class Completions(ThreadingHTTPServer):
    """Answers /v1/completions after 20 ms: every 5th a 503, the rest a 200; records what it was sent."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.bodies: list[dict[str, object]] = []
        self.keys: set[str] = set()


class _Handler(BaseHTTPRequestHandler):
    server: Completions

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.bodies.append(body)
            self.server.keys.add(self.headers.get("Authorization", ""))
            n = len(self.server.bodies)
        time.sleep(0.02)
        send_json(self, 503 if n % 5 == 0 else 200, {"choices": [{"text": "译文"}]})

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Completions]:
    with serving(Completions()) as served:
        yield served


def test_the_person_times_idle_strings_then_those_between_go_and_stop(server: Completions) -> None:
    url = f"http://127.0.0.1:{server.server_address[1]}"
    with burst_person.beside(url, "tiny", 7, idle_n=4) as person:
        idle = person.idle()
        sent_idle = len(server.bodies)
        time.sleep(0.3)  # told nothing yet: the person waits for the burst
        assert len(server.bodies) == sent_idle
        person.go()
        deadline = time.monotonic() + 30  # strings during the burst, a refusal among them
        while len(server.bodies) < sent_idle + 6 and time.monotonic() < deadline:
            time.sleep(0.02)
        person.stop()
        seen = person.seen()
    assert len(idle) == 4 and all(t >= 0.02 for t in idle)
    assert seen.idle == idle
    assert seen.during and all(t >= 0.02 for t in seen.during)
    assert seen.refused.get("503", 0) >= 1  # a refusal is counted, not timed
    assert sent_idle == 4
    assert len(server.bodies) == sent_idle + len(seen.during) + seen.refused["503"]
    assert {b["max_tokens"] for b in server.bodies} == {7}
    assert {b["model"] for b in server.bodies} == {"tiny"}
    assert server.keys == {f"Bearer {KEYS['page']}"}
