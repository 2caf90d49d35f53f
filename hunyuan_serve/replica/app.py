"""The replica's HTTP app: /translate, /languages, /health, /metrics around one injected engine."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from hunyuan_serve.cache import TranslationCache
from hunyuan_serve.config import ServeConfig
from hunyuan_serve.languages import LANGUAGES, find_language
from hunyuan_serve.prompts import Family, build_prompt
from hunyuan_serve.replica.engine import Engine, Sampling
from hunyuan_serve.replica.liveness import ProgressWatch
from hunyuan_serve.replica.metrics import Metrics
from hunyuan_serve.replica.schema import ApiError, parse_translate
from hunyuan_serve.replica.service import Outcome, Translator

ACCESS_LOG = "hunyuan_serve.replica.access"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
T = TypeVar("T")


class ClientDisconnected(Exception):
    """The client closed the connection before the answer was ready."""


@dataclass
class ReplicaState:
    """Lifecycle facts /health reports: loading -> warming -> ready, or failed/dead with a reason."""

    status: str = "loading"
    reason: str = "model loading"
    in_flight: int = 0
    probes: int = 0


def _error(err: ApiError) -> JSONResponse:
    return JSONResponse(err.body(), status_code=err.status, headers=err.headers)


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "body_too_large", f"body is {declared} bytes; the limit is {limit}")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise ApiError(413, "body_too_large", f"body is over the limit of {limit} bytes")
            chunks.append(chunk)
    except ClientDisconnect:
        raise ClientDisconnected() from None
    return b"".join(chunks)


async def _wait_disconnect(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def guarded(request: Request, work: Awaitable[T], timeout_s: float) -> T:
    """Run `work` until done, the client leaves (ClientDisconnected) or the deadline passes (504)."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_wait_disconnect(request))
    try:
        done, _ = await asyncio.wait({task, watch}, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if task in done:
        return task.result()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    if watch in done:
        raise ClientDisconnected()
    raise ApiError(504, "deadline_exceeded", f"no answer within request_timeout_s={timeout_s:g} seconds")


def _request_id(request: Request) -> str:
    given = request.headers.get("x-request-id", "")
    return given if _REQUEST_ID.match(given) else uuid.uuid4().hex


def create_app(
    engine: Engine,
    cfg: ServeConfig,
    family: Family,
    on_fatal: Callable[[str], None] | None = None,
) -> FastAPI:
    """A FastAPI app serving one engine; loading starts with the app's lifespan and /health tells."""
    rcfg = cfg.replica
    state = ReplicaState()
    progress = ProgressWatch()
    metrics = Metrics(engine)
    cache = TranslationCache(rcfg.cache_entries, rcfg.cache_path, rcfg.cache_busy_timeout_s)
    translator = Translator(engine, family, cache, metrics)
    access = logging.getLogger(ACCESS_LOG)
    retry_after = {"Retry-After": str(rcfg.retry_after_s)}

    async def warm_up() -> None:
        prompt = build_prompt(family, find_language("en"), find_language("zh"), "Hello, world.")
        sampling = Sampling(rcfg.temperature, rcfg.top_p, rcfg.top_k, rcfg.repetition_penalty, 4)
        await engine.generate(prompt, sampling, f"warmup-{uuid.uuid4().hex}")

    async def load() -> None:
        try:
            await engine.start()
            state.status, state.reason = "warming", "first translation running"
            await asyncio.wait_for(warm_up(), rcfg.warmup_timeout_s)
            state.status, state.reason = "ready", ""
        except Exception as err:  # any load failure makes this replica unusable; say why, then stop
            state.status, state.reason = "failed", f"{type(err).__name__}: {err}"[:500]
            logging.getLogger(__name__).exception("replica failed to load")
            if on_fatal is not None:
                on_fatal(state.reason)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        loader = asyncio.create_task(load())
        try:
            yield
        finally:
            loader.cancel()
            await asyncio.gather(loader, return_exceptions=True)
            engine.shutdown()
            cache.close()

    app = FastAPI(title="hunyuan-serve replica", lifespan=lifespan)
    app.state.replica = state
    app.state.metrics = metrics
    app.state.translator = translator

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return _error(ApiError(exc.status_code, code, str(exc.detail)))

    def response_body(
        req_out: Outcome, batch: bool, src: str, tgt: str, rid: str, ms: float
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"source_lang": src, "target_lang": tgt}
        if batch:
            body.update(results=req_out.results, cached=req_out.cached)
        else:
            body.update(result=req_out.results[0], cached=req_out.cached[0])
        body.update(latency_ms=round(ms, 1), request_id=rid, model=engine.model_name)
        return body

    @app.post("/translate")
    async def translate(request: Request) -> Response:
        started = time.monotonic()
        rid = _request_id(request)
        log: dict[str, Any] = {"request_id": rid, "cached": False}
        status = 500
        admitted = False
        try:
            if state.status != "ready":
                raise ApiError(503, "not_ready", f"replica is {state.status}: {state.reason}", retry_after)
            if state.in_flight >= rcfg.max_in_flight:
                metrics.rejections.labels(reason="overload").inc()
                raise ApiError(
                    503, "overloaded", f"{state.in_flight} requests in flight (max_in_flight)", retry_after
                )
            admitted = True
            state.in_flight += 1
            metrics.in_flight.inc()
            raw = await _read_body(request, rcfg.max_body_bytes)
            req = parse_translate(raw, rcfg, engine.max_model_len)
            log.update(source_lang=req.source.code, target_lang=req.target.code, texts=len(req.texts))
            outcome = await guarded(request, translator.translate(req, rid), rcfg.request_timeout_s)
            log.update(
                input_tokens=outcome.prompt_tokens,
                output_tokens=outcome.output_tokens,
                queue_ms=round(outcome.queue_s * 1000, 1),
                engine_ms=round(outcome.engine_s * 1000, 1),
                cached=all(outcome.cached),
            )
            elapsed = (time.monotonic() - started) * 1000
            status = 200
            body = response_body(outcome, req.batch, req.source.code, req.target.code, rid, elapsed)
            return JSONResponse(body, headers={"X-Request-ID": rid})
        except ApiError as err:
            status = err.status
            log["error"] = err.code
            if status == 504:
                metrics.rejections.labels(reason="deadline").inc()
            return _error(err)
        except ClientDisconnected:
            status = 499  # nginx's code for "client closed request"; nobody reads this response
            return Response(status_code=499)
        except Exception as err:  # the engine failed, not the input: tell the balancer to go elsewhere
            logging.getLogger(__name__).exception("engine error on %s", rid)
            status = 503
            log["error"] = "engine_error"
            return _error(ApiError(503, "engine_error", f"engine failed: {type(err).__name__}", retry_after))
        finally:
            if admitted:
                state.in_flight -= 1
                metrics.in_flight.dec()
            latency = time.monotonic() - started
            metrics.requests.labels(status=str(status)).inc()
            metrics.latency.observe(latency)
            log.update(status=status, latency_ms=round(latency * 1000, 1))
            access.info(json.dumps(log, ensure_ascii=False))

    @app.get("/languages")
    async def languages() -> dict[str, Any]:
        return {
            "languages": [
                {
                    "code": lang.code,
                    "name": lang.name,
                    "native_name": lang.native_name,
                    "chinese_name": lang.chinese_name,
                }
                for lang in LANGUAGES
            ]
        }

    async def deep_probe() -> str | None:
        prompt = build_prompt(family, find_language("en"), find_language("zh"), "ok")
        sampling = Sampling(0.0, 1.0, -1, 1.0, 1)
        state.probes += 1
        try:
            await asyncio.wait_for(
                engine.generate(prompt, sampling, f"probe-{state.probes}-{uuid.uuid4().hex[:8]}"),
                rcfg.health_deep_timeout_s,
            )
        except TimeoutError:
            return f"one-token generation took over health_deep_timeout_s={rcfg.health_deep_timeout_s:g}s"
        except Exception as err:  # a failing engine is exactly what the probe is for
            return f"probe generation failed: {type(err).__name__}: {err}"[:300]
        return None

    @app.get("/health")
    async def health(deep: str = "") -> JSONResponse:
        if state.status == "ready" and not engine.is_alive():
            state.status, state.reason = "dead", "engine loop stopped"
        if state.status != "ready":
            down = {"status": state.status, "reason": state.reason}
            return JSONResponse(down, status_code=503, headers=retry_after)
        unfinished = engine.unfinished()
        stalled = progress.stalled_s(engine.stats.steps, unfinished, time.monotonic())
        if rcfg.stall_timeout_s > 0 and stalled >= rcfg.stall_timeout_s:
            reason = (
                f"engine took no step for {stalled:.0f}s with {unfinished} request(s) unfinished "
                f"(stall_timeout_s={rcfg.stall_timeout_s:g})"
            )
            return JSONResponse({"status": "hung", "reason": reason}, status_code=503, headers=retry_after)
        if deep.lower() in ("1", "true", "yes"):
            problem = await deep_probe()
            if problem is not None:
                return JSONResponse(
                    {"status": "hung", "reason": problem}, status_code=503, headers=retry_after
                )
        body: dict[str, Any] = {
            "status": "ready",
            "model": engine.model_name,
            "in_flight": state.in_flight,
            "max_in_flight": rcfg.max_in_flight,
            "deep": bool(deep),
        }
        return JSONResponse(body)

    @app.get("/metrics")
    async def metrics_text() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE_LATEST)

    return app
