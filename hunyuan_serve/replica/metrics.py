"""Prometheus metrics of one replica app, on its own registry (no global state, several apps per process)."""

from __future__ import annotations

import functools
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from hunyuan_serve.replica.admission.priority import CLASSES, ENGINE_PRIORITY
from hunyuan_serve.replica.engine.interface import Engine

LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class Metrics:
    """Requests by status, latency, in-flight, rejections, cache, tokens, and the engine's batch size."""

    def __init__(self, engine: Engine, in_flight: Callable[[], int], max_in_flight: int = 0) -> None:
        """`in_flight` reads the admission's count, which stays the one place that counts."""
        self.registry = r = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "hunyuan_requests", "Translate requests answered, by HTTP status.", ["status"], registry=r
        )
        self.latency = Histogram(
            "hunyuan_request_latency_seconds",
            "Translate request latency, arrival to response.",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.engine_latency = Histogram(
            "hunyuan_engine_latency_seconds", "Engine time per text.", buckets=LATENCY_BUCKETS, registry=r
        )
        admitted = Gauge("hunyuan_requests_in_flight", "Translate requests admitted now.", registry=r)
        admitted.set_function(in_flight)
        # Beside in-flight, for the admission-saturation alert: in_flight / max_in_flight.
        limit = Gauge("hunyuan_max_in_flight", "Requests this replica admits at once.", registry=r)
        limit.set(max_in_flight)
        self.rejections = Counter(
            "hunyuan_rejections", "Requests refused before the engine, by reason.", ["reason"], registry=r
        )
        self.cache_hits = Counter(
            "hunyuan_cache_hits", "Texts answered from the cache.", ["layer"], registry=r
        )
        self.cache_misses = Counter("hunyuan_cache_misses", "Texts not in the cache.", registry=r)
        self.cache_errors = Counter(
            "hunyuan_cache_errors",
            "Shared-cache calls not served (failed, or skipped while down): a miss or a lost write.",
            ["layer", "op"],
            registry=r,
        )
        self.cache_up = Gauge(
            "hunyuan_cache_layer_up",
            "1 while the shared cache layer answers, 0 after it failed.",
            ["layer"],
            registry=r,
        )
        self.coalesced = Counter(
            "hunyuan_coalesced", "Texts that joined an identical engine call in flight.", registry=r
        )
        self.aborts = Counter(
            "hunyuan_engine_aborts", "Engine requests aborted (disconnect, deadline).", registry=r
        )
        self.prompt_tokens = Counter("hunyuan_prompt_tokens", "Prompt tokens sent to the engine.", registry=r)
        self.generation_tokens = Counter(
            "hunyuan_generation_tokens", "Tokens the engine generated.", registry=r
        )
        running = Gauge("hunyuan_engine_running", "Sequences the engine's scheduler runs now.", registry=r)
        running.set_function(lambda: engine.stats.running)
        most = Gauge(
            "hunyuan_engine_max_running", "Most sequences the scheduler ran in one step.", registry=r
        )
        most.set_function(lambda: engine.stats.max_running)
        _engine_gauges(r, engine)
        self.class_latency, self.class_rejections = _per_class(r, engine)

    def count_class(self, by_class: Callable[[], dict[str, int]]) -> None:
        """Publish the admission's in-flight count per class (interactive, bulk) as a gauge with a label."""
        gauge = Gauge(
            "hunyuan_class_in_flight", "Requests admitted now, by class.", ["class"], registry=self.registry
        )
        for cls in CLASSES:
            gauge.labels(cls).set_function(functools.partial(_count_of, by_class, cls))

    def count_width(
        self, width: Callable[[], int], running: Callable[[], int], waiting: Callable[[], int]
    ) -> None:
        """Publish the bulk width (replica/admission/engine_room.py): the bulk sequences a step that carries a
        person's may carry now, the bulk sequences in the engine, and those waiting in the replica's
        own queue for a place."""
        r = self.registry
        for name, what, read in (
            ("hunyuan_bulk_width", "Bulk sequences a step beside a person may carry now.", width),
            ("hunyuan_bulk_running", "Bulk sequences in the engine now, paused or not.", running),
            ("hunyuan_bulk_queued", "Bulk sequences queued in the replica for the engine.", waiting),
        ):
            Gauge(name, what, registry=r).set_function(read)

    def count_qa(self) -> Counter:
        """The answer checks' counter (replica/review.py), by check (qa/flags.py CHECKS) and pool (the
        replica's replica.qa_pool_label, its pool's name)."""
        return Counter(
            "hunyuan_qa_flags",
            "Answers sent that failed an answer check, by check and pool.",
            ["check", "pool"],
            registry=self.registry,
        )

    def cache_error(self, layer: str, op: str) -> None:
        self.cache_errors.labels(layer=layer, op=op).inc()

    def cache_layer_up(self, layer: str, up: bool) -> None:
        self.cache_up.labels(layer=layer).set(1 if up else 0)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _engine_gauges(r: CollectorRegistry, engine: Engine) -> None:
    unfinished = Gauge(
        "hunyuan_engine_unfinished", "Requests submitted to the engine and not finished.", registry=r
    )
    unfinished.set_function(lambda: engine.unfinished())
    # The pausing scheduler's acknowledgements (replica/engine/width_file.py): each step it scheduled having
    # read the bulk width. Still at 0 while the engine steps: people-first is off.
    acks = Gauge(
        "hunyuan_people_first_acks",
        "Engine steps the pausing scheduler scheduled having read the bulk width (its acknowledgements).",
        registry=r,
    )
    acks.set_function(lambda: 0 if engine.stats.acknowledged is None else engine.stats.acknowledged().steps)
    inactive = Gauge(
        "hunyuan_people_first_inactive",
        "1 while the engine steps and its scheduler never acknowledged the bulk width (bulk unpaused).",
        registry=r,
    )
    inactive.set_function(lambda: int(engine.stats.people_first_inactive()))


def _count_of(by_class: Callable[[], dict[str, int]], cls: str) -> int:
    return by_class()[cls]


def _waiting_of(engine: Engine, cls: str) -> int:
    return engine.stats.waiting_of(ENGINE_PRIORITY[cls])


def _class_waiting(r: CollectorRegistry, engine: Engine) -> None:
    # In flight is admitted; waiting is the part of it the engine has not started (queued for a batch
    # slot or in its prefill): what priority scheduling should keep near 0 for interactive work.
    gauge = Gauge(
        "hunyuan_class_waiting",
        "Engine requests not yet past their first output (queued or prefilling), by class.",
        ["class"],
        registry=r,
    )
    for cls in CLASSES:
        gauge.labels(cls).set_function(functools.partial(_waiting_of, engine, cls))


def _per_class(r: CollectorRegistry, engine: Engine) -> tuple[Histogram, Counter]:
    # Beside the totals (which dashboards and alerts read): does a person wait behind a bulk job?
    latency = Histogram(
        "hunyuan_class_latency_seconds",
        "Request latency, arrival to response, by class (interactive, bulk).",
        ["class"],
        buckets=LATENCY_BUCKETS,
        registry=r,
    )
    rejections = Counter(
        "hunyuan_class_rejections",
        "Requests refused, by class and reason.",
        ["class", "reason"],
        registry=r,
    )
    _class_waiting(r, engine)
    return latency, rejections
