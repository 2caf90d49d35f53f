"""The replica's HTTP app: wires one engine to the lifecycle, admission, translation core and API routers."""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from hunyuan_serve import auth
from hunyuan_serve.auth.keys import key_qa
from hunyuan_serve.cache.layers import TranslationCache
from hunyuan_serve.config import ServeConfig
from hunyuan_serve.edge.dialects import REFERENCE_SCHEMA, dialect_of
from hunyuan_serve.families.base import Family
from hunyuan_serve.families.build import FAMILY_FEATURES, probe_prompt
from hunyuan_serve.replica import ensemble, openapi, ops, priority, queue_wait, reference
from hunyuan_serve.replica.apis import deepl, immersive, libretranslate, memories, native, openai, tmserver
from hunyuan_serve.replica.context import ReplicaContext
from hunyuan_serve.replica.documents_worker import DocumentWorker
from hunyuan_serve.replica.engine_types import Engine, Generation, Sampling
from hunyuan_serve.replica.ensemble import Fusion
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.gated_engine import GatedEngine, bulk_gate
from hunyuan_serve.replica.http import Admission, Gate
from hunyuan_serve.replica.lifecycle import Lifecycle, load
from hunyuan_serve.replica.liveness import ProgressWatch
from hunyuan_serve.replica.memory_translator import MemoryTranslator
from hunyuan_serve.replica.metrics import Metrics
from hunyuan_serve.replica.recall import Recall
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
    # What runs inside the engine, apart from what HTTP admits: bulk over the width waits here.
    width = bulk_gate(rcfg, cfg.engine.max_num_seqs, rcfg.interactive_reserve, weights)
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
    if _request.url.path.startswith("/v1/"):  # OpenAI clients parse only their own shape
        return openai.render_error(ApiError(status, code, str(detail), headers))
    dialect = dialect_of(_request.url.path)
    if dialect.name in ("libretranslate", "deepl"):  # so are DeepL's and LibreTranslate's
        return JSONResponse(dialect.error(code, str(detail), status), status_code=status, headers=headers)
    return native.render_error(ApiError(status, code, str(detail), headers))


def create_app(
    engine: Engine,
    cfg: ServeConfig,
    family: Family,
    on_fatal: Callable[[str], None] | None = None,
) -> FastAPI:
    """A FastAPI app serving one engine; loading starts with the app's lifespan and /health tells."""
    replica = build_replica(engine, cfg, family)
    lifecycle = replica.lifecycle
    features = tuple(FAMILY_FEATURES[replica.translator.family])
    worker = DocumentWorker(cfg, replica.documents, lambda: lifecycle.ready, features)
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
    app.include_router(ops.router)
    app.include_router(native.router)
    app.include_router(libretranslate.router)
    app.include_router(deepl.router)
    app.include_router(deepl.v3)
    app.include_router(immersive.router)
    app.include_router(openai.router)
    app.include_router(memories.router)
    app.include_router(tmserver.router)
    app.include_router(reference.router)
    openapi.install(app, replica)
    auth.install(app, cfg)  # API keys (auth.keys_file): every route but /health, in each dialect's shape
    return app
