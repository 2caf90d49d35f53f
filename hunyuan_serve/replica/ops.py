"""The routes the supervisor and Prometheus read: GET /health (shallow or deep) and GET /metrics."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST

from hunyuan_serve.auth.deep_health import wants_deep
from hunyuan_serve.families.build import probe_prompt
from hunyuan_serve.replica.context import ReplicaContext, current
from hunyuan_serve.replica.engine.interface import Sampling
from hunyuan_serve.replica.lifecycle import Reading, ReportedHealth, read_health
from hunyuan_serve.replica.openapi.operations import JSON, Op, Operations
from hunyuan_serve.replica.standin import STAND_IN, StandInEngine

router = APIRouter()
ReplicaDep = Annotated[ReplicaContext, Depends(current)]
# One greedy token: the cheapest generation that proves the engine still schedules and decodes.
PROBE_SAMPLING = Sampling(temperature=0.0, top_p=1.0, top_k=-1, repetition_penalty=1.0, max_tokens=1)
PEOPLE_FIRST_INACTIVE = (
    "people-first inactive: vLLM's scheduler never acknowledged the bulk width, so bulk work runs "
    "beside people unpaused (replica/engine/people_scheduler.py)"
)


def reading(replica: ReplicaContext, now: float) -> Reading:
    """The replica's health now, from its phase and its engine's facts; the lifecycle is only read."""
    engine, lifecycle = replica.engine, replica.lifecycle
    # Work waiting in the replica's own queue counts: a queue that holds work while the engine takes
    # no step is as hung as an engine that does.
    unfinished = engine.unfinished() + queued(replica)
    # The stall watch only remembers the step count it last saw: the stall clock needs two sightings.
    stalled = replica.progress.stalled_s(engine.stats.clock(), unfinished, now)
    stall_timeout_s = replica.cfg.stall_timeout_s
    return read_health(
        lifecycle.phase, lifecycle.reason, engine.is_alive(), stalled, unfinished, stall_timeout_s
    )


def queued(replica: ReplicaContext) -> int:
    """Sequences waiting in the replica for engine room (admission/engine_room.py), people's and bulk."""
    gate = replica.translator.engine.gate
    return gate.people_waiting() + gate.waiting()


async def deep_probe(replica: ReplicaContext) -> Reading:
    """Ready if the engine generates one token within health_deep_timeout_s; hung, saying why, if not.

    An engine busy with work is judged by the stall clock alone (`reading`): its steps prove it alive,
    and a probe's token would wait behind them (a long prefill on a CPU holds one step for seconds), so
    the probe would call a busy engine hung. A probe that waited while the engine stepped found it busy.
    """
    engine = replica.engine
    if engine.unfinished():
        return Reading(ReportedHealth.READY)
    prompt = probe_prompt(replica.family, "ok")
    timeout_s = replica.cfg.health_deep_timeout_s
    steps = engine.stats.steps
    try:
        await asyncio.wait_for(
            engine.generate(prompt, PROBE_SAMPLING, f"probe-{uuid.uuid4().hex[:12]}"), timeout_s
        )
    except TimeoutError:
        if engine.stats.steps != steps:
            return Reading(ReportedHealth.READY)
        return Reading(
            ReportedHealth.HUNG, f"one-token generation took over health_deep_timeout_s={timeout_s:g}s"
        )
    except Exception as err:  # a failing engine is exactly what the probe is for
        return Reading(ReportedHealth.HUNG, f"probe generation failed: {type(err).__name__}: {err}"[:300])
    return Reading(ReportedHealth.READY)


@router.get("/health")
async def health(replica: ReplicaDep, deep: str = "") -> JSONResponse:
    """Open shallow; deep (the engine generates a token) only for whom auth's DeepHealthGuard lets by."""
    now = reading(replica, time.monotonic())
    deep_asked = wants_deep(deep)
    if now.ok and deep_asked:
        now = await deep_probe(replica)
    # Only a stand-in names its engine (a real replica's body is unchanged): no one mistakes its figures.
    named = {"engine": STAND_IN} if isinstance(replica.engine, StandInEngine) else {}
    if not now.ok:
        body = {"status": now.health.value, "reason": now.reason, **named}
        return JSONResponse(body, status_code=503, headers=replica.admission.retry_after)
    ready: dict[str, Any] = {
        **named,
        "status": now.health.value,
        "model": replica.engine.model_name,
        "model_path": replica.engine.model,
        "family": replica.family,
        "in_flight": replica.admission.in_flight,
        "max_in_flight": replica.admission.max_in_flight,
        "queued": queued(replica),
        "deep": deep_asked,
    }
    # A deep probe generated a token: a step the pausing scheduler had to acknowledge.
    people_first = replica.engine.stats.people_first(stepped=deep_asked)
    if people_first is not None:
        ready["people_first"] = people_first
    if people_first == "inactive":
        ready["reason"] = PEOPLE_FIRST_INACTIVE
    return JSONResponse(ready)


# Not in the front's document: Prometheus' text, behind nginx.expose_metrics.
@router.get("/metrics", include_in_schema=False)
async def metrics(replica: ReplicaDep) -> Response:
    return Response(replica.metrics.render(), media_type=CONTENT_TYPE_LATEST)


# What the app mounts and what the OpenAPI document says of each operation (edge/dialects.py names us).
ROUTERS = (router,)
OPERATIONS: Operations = {
    # Nginx answers /health itself (no key, no limit); a replica's own has the same statuses.
    ("get", "/health"): Op(gated=False, edge=False, success={200: (JSON,), 503: (JSON,)}),
}
