"""The replica's parts that routes share, built once by create_app and found through the request's app."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from hunyuan_serve.cache.layers import TranslationCache
from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.families import SamplingDefaults
from hunyuan_serve.families.base import Family
from hunyuan_serve.replica.admission.gate import Gate
from hunyuan_serve.replica.admission.in_flight import Admission
from hunyuan_serve.replica.engine.interface import Engine
from hunyuan_serve.replica.ensemble import Fusion
from hunyuan_serve.replica.lifecycle import Lifecycle
from hunyuan_serve.replica.liveness import ProgressWatch
from hunyuan_serve.replica.memories.recall import Recall
from hunyuan_serve.replica.metrics import Metrics
from hunyuan_serve.replica.service import Translator
from hunyuan_serve.replica.usage import Usage
from hunyuan_serve.storage.jobs import Documents
from hunyuan_serve.storage.per_key import Store


@dataclass(frozen=True)
class ReplicaContext:
    """One engine and everything around it: lifecycle, admission, the translation core, metrics."""

    engine: Engine
    cfg: ReplicaConfig
    family: Family
    sampling: SamplingDefaults  # the defaults every request and the warm-up get (replica_sampling)
    lifecycle: Lifecycle
    admission: Admission
    gate: Gate
    translator: Translator
    metrics: Metrics
    cache: TranslationCache
    progress: ProgressWatch
    fusion: Fusion  # the client to the Chimera pool that fuses ensemble candidates
    store: Store  # glossaries and per-key usage (SQLite on one host, Redis on many)
    usage: Usage
    documents: Documents  # document jobs (DeepL /v2/document, LibreTranslate /translate_file)
    recall: Recall  # the translation memories' store and lookups (replica/memories/translator.py)
    front_port: int = 8000  # this host's Nginx port (nginx.port): where a proxied caller came in


async def current(request: Request) -> ReplicaContext:
    """The replica serving this request (a FastAPI dependency of every route).

    A coroutine, so FastAPI runs it on the loop: a plain function is sent to its thread pool, a thread
    hand-off per request that was the replica's largest cost outside the routes
    (threading's Condition wait and notify, in a profile of one string at a time).
    """
    replica = request.app.state.replica
    if not isinstance(replica, ReplicaContext):
        raise TypeError("app.state.replica is not a ReplicaContext: the app was not built by create_app")
    return replica
