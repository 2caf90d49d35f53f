"""The replica's HTTP app: wires one engine to the lifecycle, admission, translation core and API routers."""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import Scope

from hunyuan_serve import auth
from hunyuan_serve.auth.keys import key_qa
from hunyuan_serve.cache.layers import TranslationCache
from hunyuan_serve.config import ServeConfig
from hunyuan_serve.edge.dialects import REFERENCE_SCHEMA
from hunyuan_serve.families.base import Family
from hunyuan_serve.families.build import FAMILY_FEATURES, probe_prompt
from hunyuan_serve.replica import ensemble
from hunyuan_serve.replica.admission import priority, queue_wait
from hunyuan_serve.replica.admission.gate import Gate
from hunyuan_serve.replica.admission.gated_engine import GatedEngine, bulk_gate
from hunyuan_serve.replica.admission.in_flight import Admission
from hunyuan_serve.replica.admission.intake import Intake
from hunyuan_serve.replica.apis import registry
from hunyuan_serve.replica.context import ReplicaContext
from hunyuan_serve.replica.documents.worker import DocumentWorker
from hunyuan_serve.replica.engine.interface import Engine, Generation, Sampling
from hunyuan_serve.replica.ensemble import Fusion
from hunyuan_serve.replica.errors import ApiError, renderer
from hunyuan_serve.replica.lifecycle import Lifecycle, load
from hunyuan_serve.replica.liveness import ProgressWatch
from hunyuan_serve.replica.memories.recall import Recall
from hunyuan_serve.replica.memories.translator import MemoryTranslator
from hunyuan_serve.replica.metrics import Metrics
from hunyuan_serve.replica.openapi import document as openapi_document
from hunyuan_serve.replica.review import REQUEST, Review
from hunyuan_serve.replica.sampling import replica_sampling
from hunyuan_serve.replica.schema import TranslateRequest
from hunyuan_serve.replica.usage import Usage
from hunyuan_serve.storage.from_config import documents_from_config, memory_from_config, store_from_config

WARMUP_MAX_TOKENS = 4


def build_replica(engine: Engine, cfg: ServeConfig, family: Family) -> ReplicaContext:
    """The parts of one replica, each built once; the in-flight count is the admission's alone."""
    rcfg = cfg.replica
    lifecycle = Lifecycle()
    specs = auth.key_specs_by_id(cfg.auth)
    weights: dict[str | None, int] = {kid: spec.weight for kid, spec in specs.items()}
    admission = Admission(
        lifecycle,
        rcfg.max_in_flight,
        rcfg.retry_after_s,
        interactive_reserve=rcfg.interactive_reserve,
        bulk_key_share_min=rcfg.bulk_key_share_min,
        weights=weights,
        waiting=priority.Waiting(rcfg.waiting_window_s),
        queue=queue_wait.Queue(
            rcfg.max_in_flight,
            rcfg.max_queued,
            rcfg.interactive_reserve,
            rcfg.max_queue_wait_s,
            rcfg.request_timeout_s,
        ),
        served=queue_wait.ServedRate(rcfg.queue_rate_window_s),
    )
    metrics = Metrics(engine, in_flight=lambda: admission.in_flight, max_in_flight=rcfg.max_in_flight)
    metrics.count_class(lambda: admission.by_class)
    # What the engine is handed: past its room (people first), and bulk past the width, waits here.
    width = bulk_gate(
        rcfg, cfg.engine.max_num_seqs, rcfg.interactive_reserve, weights, rcfg.engine_queue_margin
    )
    metrics.count_width(width.width, lambda: width.bulk, width.waiting)
    cache = TranslationCache.from_config(rcfg, metrics)
    store = store_from_config(cfg)
    usage = Usage(auth.key_limits(cfg.auth), store, metrics.registry)
    fusion = Fusion(rcfg, auth.peer_headers(cfg.auth))
    # The answer checks: the pool's policy and each key's; with a Chimera pool, fusion is a third try.
    fuse = functools.partial(_fuse, fusion) if rcfg.chimera_url else None
    review = Review(rcfg, metrics, key_qa(specs), fuse)
    recall = Recall(memory_from_config(cfg), rcfg, metrics.registry)
    return ReplicaContext(
        engine=engine,
        cfg=rcfg,
        family=family,
        sampling=replica_sampling(rcfg, family, engine.model_name),
        lifecycle=lifecycle,
        admission=admission,
        gate=Gate(admission, rcfg, metrics, usage, auth.key_priorities(specs)),
        translator=MemoryTranslator(
            GatedEngine(engine, width), family, cache, metrics, review, recall, rcfg.segment_tokens
        ),
        metrics=metrics,
        cache=cache,
        progress=ProgressWatch(),
        fusion=fusion,
        store=store,
        usage=usage,
        documents=documents_from_config(cfg),
        recall=recall,
        front_port=cfg.nginx.port,
    )


async def _fuse(
    fusion: Fusion, req: TranslateRequest, index: int, answers: Sequence[str], request_id: str
) -> str | None:
    """A flagged text's two answers fused by the Chimera pool, as an ensemble's are; None: not fused."""
    request = REQUEST.get()
    key = ensemble.caller_key(request) if request is not None else None
    done = await fusion.fuse(req, index, answers, request_id, key)
    return done.result if done.fused_by is not None else None


async def warm_up(replica: ReplicaContext) -> Generation:
    """One short translation with the sampling requests get, so the first client does not pay for it."""
    prompt = probe_prompt(replica.family, "Hello, world.")
    defaults = replica.sampling
    sampling = Sampling(
        defaults.temperature, defaults.top_p, defaults.top_k, defaults.repetition_penalty, WARMUP_MAX_TOKENS
    )
    return await replica.engine.generate(prompt, sampling, f"warmup-{uuid.uuid4().hex}")


def lifespan(
    replica: ReplicaContext, on_fatal: Callable[[str], None] | None, worker: DocumentWorker | None = None
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """Loading runs beside the server from its start (/health says how far); stopping ends both,
    and the document worker (it hands its job back first)."""

    @asynccontextmanager
    async def run(_app: FastAPI) -> AsyncIterator[None]:
        warm = functools.partial(warm_up, replica)
        loader = asyncio.create_task(
            load(replica.lifecycle, replica.engine, warm, replica.cfg.warmup_timeout_s, on_fatal)
        )
        replica.fusion.open()
        if worker is not None:
            worker.start()
        try:
            yield
        finally:
            if worker is not None:
                await asyncio.to_thread(worker.stop)
            replica.documents.close()
            loader.cancel()
            await asyncio.gather(loader, return_exceptions=True)
            replica.engine.shutdown()
            await replica.cache.aclose()
            await replica.fusion.aclose()
            await replica.store.aclose()
            await replica.recall.store.aclose()

    return run


def _allow(request: Request) -> str:
    """The methods of every route at the request's path (a path may have one route per method)."""
    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches(request.scope)
        if match is Match.PARTIAL and isinstance(route, APIRoute):
            methods |= route.methods
    order = ("GET", "POST", "DELETE", "HEAD")
    return ", ".join(sorted(methods, key=lambda m: order.index(m) if m in order else len(order)))


async def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own errors (unknown route, wrong method) in our error shape."""
    status = exc.status_code if isinstance(exc, StarletteHTTPException) else 500
    detail = exc.detail if isinstance(exc, StarletteHTTPException) else type(exc).__name__
    # A 405's Allow (the route's methods, RFC 9110 requires it) and any other header Starlette set.
    headers = dict(exc.headers or {}) if isinstance(exc, StarletteHTTPException) else {}
    allow = _allow(_request) if status == 405 else ""
    if allow:  # every route of the path: Starlette names only the first one's
        headers["Allow"] = allow
    code = {404: "not_found", 405: "method_not_allowed"}.get(status, "http_error")
    # In the shape of the API the path is under: each API's clients parse only their own.
    return renderer(_request.url.path)(ApiError(status, code, str(detail), headers))


def _screen(gate: Gate, admitted: Sequence[APIRoute], scope: Scope, ahead: int) -> Response | None:
    """The gate's screen (Gate.screen) for a request to one of the routes it admits; None for others."""
    if scope["method"] != "POST" or not any(r.matches(scope)[0] is Match.FULL for r in admitted):
        return None
    return gate.screen(scope, ahead)


def create_app(
    engine: Engine,
    cfg: ServeConfig,
    family: Family,
    on_fatal: Callable[[str], None] | None = None,
) -> FastAPI:
    """A FastAPI app serving one engine; loading starts with the app's lifespan and /health tells."""
    replica = build_replica(engine, cfg, family)
    features = tuple(FAMILY_FEATURES[replica.translator.family])
    worker = DocumentWorker(cfg, replica, features)
    # No CDN docs: /docs is reference.py's page, /openapi.json the document openapi.py assembles.
    app = FastAPI(
        title="hunyuan-serve replica",
        lifespan=lifespan(replica, on_fatal, worker),
        docs_url=None,
        redoc_url=None,
        openapi_url=REFERENCE_SCHEMA,
    )
    app.state.replica = replica
    app.state.keyed = cfg.auth.keys_file is not None
    app.add_exception_handler(StarletteHTTPException, _http_error)
    for served in registry.served():  # each API's modules, as its declaration names them
        for router in served.routers:
            app.include_router(router)
    openapi_document.install(app, replica)
    # Inside the key checks (a header's worth of work each), so it knows the caller's key and class; a
    # burst waits here before the rest of its work, and /health passes it.
    # A request the gate admits (an API's POST route) is screened before it waits there.
    admitted = [r for r in app.router.routes if isinstance(r, APIRoute) and "POST" in r.methods]
    screen = functools.partial(_screen, replica.gate, admitted)
    app.add_middleware(
        Intake, limit=cfg.replica.intake_limit, key_defaults=replica.gate.key_defaults, screen=screen
    )
    auth.install(app, cfg)  # API keys (auth.keys_file): every route but /health, in each dialect's shape
    return app
