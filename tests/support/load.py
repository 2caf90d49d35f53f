"""Steady client load through a stack's public port: threads sending translations until stopped."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class Sent:
    """One request: its X-Request-ID (to find it in Nginx's access log), when, and how it ended."""

    request_id: str
    start: float
    end: float = 0.0  # 0 while in flight
    outcome: str = ""  # "200", another status with its body, or the transport error
    model: str = ""  # the model the answer named
    fused_by: str | None = None  # with an ensemble: who fused the answer (None: degraded, or no ensemble)


@dataclass
class Load:
    """Clients sending translations through the public port until stopped; every request is kept."""

    url: str
    threads: int = 3
    pause_s: float = 0.05  # leaves the two shared cores room to restart a replica while under load
    extra: dict[str, Any] = field(default_factory=dict)  # more fields of every body (an ensemble, a model)
    sent: list[Sent] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)

    def _one(self, client: httpx.Client, text: str) -> None:
        record = Sent(uuid.uuid4().hex, time.time())
        self.sent.append(record)
        body = {"text": text, "source_lang": "en", "target_lang": "zh", **self.extra}
        try:
            response = client.post("/translate", json=body, headers={"X-Request-ID": record.request_id})
            answer = response.json() if response.status_code == 200 else {}
            if "result" in answer:
                record.outcome, record.model = "200", str(answer.get("model"))
                record.fused_by = answer.get("fused_by")
            else:
                record.outcome = f"{response.status_code} {response.text[:200]}"
        except (httpx.HTTPError, ValueError) as err:
            record.outcome = repr(err)
        record.end = time.time()

    def _run(self, n: int) -> None:
        with httpx.Client(base_url=self.url, timeout=120.0, trust_env=False) as client:
            i = 0
            while not self._stop.is_set():
                i += 1
                self._one(client, f"Hello from client {n}, request {i}")
                self._stop.wait(self.pause_s)

    def __enter__(self) -> Load:
        self._workers = [
            threading.Thread(target=self._run, args=(n,), daemon=True) for n in range(self.threads)
        ]
        for worker in self._workers:
            worker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for worker in self._workers:
            worker.join(timeout=150)

    def answered(self, since: float = 0.0) -> list[Sent]:
        """Requests answered 200 that ended after `since`."""
        return [s for s in list(self.sent) if s.outcome == "200" and s.end > since]

    def failed(self) -> list[Sent]:
        return [s for s in list(self.sent) if s.end and s.outcome != "200"]

    @property
    def failures(self) -> list[str]:
        return [s.outcome for s in self.failed()]

    @property
    def models(self) -> dict[str, int]:
        """Answers per model the responses named."""
        counts: dict[str, int] = {}
        for s in self.answered():
            counts[s.model] = counts.get(s.model, 0) + 1
        return counts

    def wait_ok(self, count: int, since: float = 0.0, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while len(self.answered(since)) < count:
            assert time.monotonic() < deadline, f"fewer than {count} answered; failed: {self.failures[:5]}"
            time.sleep(0.05)
