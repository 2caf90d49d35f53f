"""Steady client load through a stack's public port: threads sending translations until stopped."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import httpx


@dataclass
class Load:
    """Clients sending translations through the public port until stopped; every outcome is kept."""

    url: str
    threads: int = 3
    pause_s: float = 0.05  # leaves the two shared cores room to restart a replica while under load
    ok: list[float] = field(default_factory=list)  # completion times
    failures: list[str] = field(default_factory=list)
    models: dict[str, int] = field(default_factory=dict)  # answers per model the response named
    _stop: threading.Event = field(default_factory=threading.Event)
    _workers: list[threading.Thread] = field(default_factory=list)

    def _run(self, n: int) -> None:
        with httpx.Client(base_url=self.url, timeout=120.0, trust_env=False) as client:
            i = 0
            while not self._stop.is_set():
                i += 1
                body = {"text": f"Hello number {n}-{i}", "source_lang": "en", "target_lang": "zh"}
                try:
                    response = client.post("/translate", json=body)
                except httpx.HTTPError as err:
                    self.failures.append(repr(err))
                    continue
                if response.status_code == 200 and "result" in response.json():
                    self.ok.append(time.time())
                    model = str(response.json().get("model"))
                    self.models[model] = self.models.get(model, 0) + 1
                else:
                    self.failures.append(f"{response.status_code} {response.text[:200]}")
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

    def wait_ok(self, count: int, since: float = 0.0, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while sum(t > since for t in self.ok) < count:
            assert time.monotonic() < deadline, f"fewer than {count} successes; failures: {self.failures[:5]}"
            time.sleep(0.05)
