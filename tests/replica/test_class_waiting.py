"""Waiting per class: an engine request waits until vLLM schedules it, counted by the class
it went in with, and /metrics publishes it beside in-flight and latency per class."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hunyuan_serve.config import EngineConfig
from hunyuan_serve.replica.admission import priority
from hunyuan_serve.replica.engine.interface import EngineStats
from hunyuan_serve.replica.engine.vllm_engine import VllmEngine
from hunyuan_serve.replica.metrics import Metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "hunyuan-serve.json"


class _Output:
    def __init__(self, finished: bool) -> None:
        self.finished = finished


class _Scheduler:
    """vLLM's generate() as the engine sees it: nothing until the test lets each output go."""

    def __init__(self) -> None:
        self.gates: dict[str, asyncio.Queue[bool]] = {}
        self.aborted: list[str] = []

    async def generate(
        self, _prompt: Any, _params: Any, request_id: str, priority: int
    ) -> AsyncIterator[_Output]:
        gate = self.gates.setdefault(request_id, asyncio.Queue())
        while True:
            finished = await gate.get()
            yield _Output(finished)
            if finished:
                return

    async def abort(self, request_id: str) -> None:
        self.aborted.append(request_id)


def _engine(scheduler: _Scheduler) -> VllmEngine:
    engine = VllmEngine(EngineConfig(), "/models/tiny", _engine=scheduler)
    engine._token_ids = lambda prompt: [1]  # type: ignore[method-assign]
    engine._params = lambda prompt, sampling, n=1, final_only=False: None  # type: ignore[method-assign]
    return engine


async def _drain(outputs: AsyncIterator[Any]) -> None:
    async for _ in outputs:
        pass


async def test_a_request_is_counted_by_its_priority_until_it_ends_or_is_aborted() -> None:
    # _live is what the waiting count (_unscheduled_by_priority) reads vLLM's request states against.
    scheduler = _Scheduler()
    engine = _engine(scheduler)
    bulk = asyncio.ensure_future(_drain(engine._outputs(None, None, "b1", priority=1)))  # type: ignore[arg-type]
    person = asyncio.ensure_future(_drain(engine._outputs(None, None, "i1", priority=0)))  # type: ignore[arg-type]
    await asyncio.sleep(0)
    assert engine._live == {"b1": 1, "i1": 0}
    await scheduler.gates["i1"].put(False)  # the person's first token: still in the engine
    await asyncio.sleep(0)
    assert engine._live == {"b1": 1, "i1": 0}
    await scheduler.gates["i1"].put(True)
    await person
    assert engine._live == {"b1": 1} and scheduler.aborted == []
    bulk.cancel()  # the client left while it waited: it is no longer counted, and is aborted
    with pytest.raises(asyncio.CancelledError):
        await bulk
    assert engine._live == {} and scheduler.aborted == ["b1"]


class _Stub:
    model_name = "m"

    def __init__(self) -> None:
        self.stats = EngineStats()

    def unfinished(self) -> int:
        return 0


def test_metrics_publish_waiting_per_class() -> None:
    engine = _Stub()
    metrics = Metrics(engine, in_flight=lambda: 0)  # type: ignore[arg-type]
    engine.stats.unscheduled = lambda: {priority.ENGINE_PRIORITY["bulk"]: 3}
    lines = metrics.render().decode().splitlines()
    assert 'hunyuan_class_waiting{class="bulk"} 3.0' in lines
    assert 'hunyuan_class_waiting{class="interactive"} 0.0' in lines


def test_every_metric_the_dashboard_reads_is_one_a_replica_publishes() -> None:
    metrics = Metrics(_Stub(), in_flight=lambda: 0)  # type: ignore[arg-type]
    metrics.count_class(lambda: dict.fromkeys(priority.CLASSES, 0))
    metrics.count_width(lambda: 0, lambda: 0, lambda: 0)  # as build_replica does, for the bulk width
    metrics.count_qa()  # as replica/review.py's Review does, for the answer checks
    published = set(re.findall(r"^# TYPE (\w+) (\w+)", metrics.render().decode(), re.M))
    names = {n + s for n, kind in published for s in ("", "_total", "_bucket", "_count", "_sum")}
    queried = set(re.findall(r"\b(hunyuan_\w+)", DASHBOARD.read_text()))
    # The usage counters are the Usage's (replica/usage.py), registered on the same registry.
    missing = {name for name in queried - names if not name.startswith("hunyuan_usage")}
    assert missing == set()
    per_class = {"hunyuan_class_in_flight", "hunyuan_class_waiting", "hunyuan_class_latency_seconds_bucket"}
    assert per_class | {"hunyuan_class_rejections_total"} <= queried


class _State:
    """vLLM's frontend RequestState as far as the count reads it: its external id and its stats."""

    def __init__(self, external_req_id: str, scheduled_ts: float) -> None:
        self.external_req_id = external_req_id
        self.stats = type("Stats", (), {"scheduled_ts": scheduled_ts})()


def test_answers_read_whole_wait_until_vllm_schedules_them() -> None:
    # Final-only answers have no first output to tell: vLLM's request states say which are scheduled.
    states = {
        "i1-x": _State("i1", 0.0),  # interactive, queued
        "b1-x": _State("b1", 12.5),  # bulk, scheduled
        "0_b2-x": _State("b2", 0.0),  # bulk with n = 2: both children queued, counted once
        "1_b2-x": _State("b2", 0.0),
        "other": _State("not-ours", 0.0),  # not a request of this engine's callers
    }
    engine = VllmEngine(EngineConfig(), "/models/tiny")
    engine._engine = type("Async", (), {"output_processor": type("P", (), {"request_states": states})()})()
    engine._live.update({"i1": 0, "b1": 1, "b2": 1, "i2": 0})
    engine.stats.unscheduled = engine._unscheduled_by_priority
    assert engine.stats.waiting_of(0) == 1 and engine.stats.waiting_of(1) == 1
    del states["i1-x"]
    assert engine.stats.waiting_of(0) == 0
