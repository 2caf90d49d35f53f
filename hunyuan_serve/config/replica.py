"""The replica section: admission, deadlines, sampling defaults, caches and stores of one replica."""

from __future__ import annotations

import urllib.parse
from typing import Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from hunyuan_serve.config.memory import MemorySettings
from hunyuan_serve.config.qa import QaSettings
from hunyuan_serve.config.redis_tls import RedisTlsFields
from hunyuan_serve.config.replica_tls import ReplicaTlsFields
from hunyuan_serve.config.width import BulkWidthSettings

# Set by `up` in each replica's environment to its own pid: the parent that replica watches
# (replica.parent_check_s). A replica without it (systemd, Kubernetes, a shell) watches nothing.
PARENT_PID_ENV = "HUNYUAN_SERVE_PARENT_PID"


def bulk_slots(slots: int, reserve: float) -> int:
    """Of `slots` places, those bulk work may hold: all but the `reserve` share, at least one."""
    return max(1, slots - int(slots * reserve))


class ReplicaConfig(BulkWidthSettings, RedisTlsFields, QaSettings, ReplicaTlsFields, MemorySettings):
    """The HTTP server around one engine: admission, deadlines, cache, sampling defaults."""

    host: str = Field("127.0.0.1", description="Address a replica binds.")
    port: int = Field(8001, ge=1, le=65535, description="Port of a single replica (up assigns its own).")
    # As many as the engine batches by default (max_num_seqs): 64 shed load that one replica could
    # still batch, so a lone replica answered a 100-user ramp with 89% 503s.
    max_in_flight: int = Field(256, ge=1, description="Requests admitted at once; more get a fast 503.")
    retry_after_s: int = Field(1, ge=0, description="Retry-After seconds on an overload 503.")
    # A burst waits instead of being refused (vLLM's own server queues it too): past max_in_flight a
    # request waits in the replica while the wait it would face fits (replica/admission/queue_wait.py); its
    # engine calls wait in the replica's own queue for engine room (replica/admission/engine_room.py),
    # never in vLLM's. 2048: a 2,000-string burst on two CPU replicas of a tiny model is answered whole
    # (`python -m bench burst`), /health answered throughout (replica/admission/intake.py), and so it
    # is when one of the two gets kill -9 mid-burst: Nginx sends what it held on to the other, which
    # must take the whole burst (1024 left 584 of 2,000 refused, the bench's kill step).
    max_queued: int = Field(
        2048,
        ge=0,
        description="Requests that may wait in the replica past max_in_flight (a few kilobytes each); past "
        "it a fast 503. 0: no queue, every request past max_in_flight gets the 503.",
    )
    engine_queue_margin: int = Field(
        32,
        ge=0,
        description="Sequences handed the engine beyond what it batches (engine.max_num_seqs), so its next "
        "step never waits for the replica to hand it more; the rest wait in the replica, people first.",
    )
    max_queue_wait_s: float = Field(
        60.0,
        gt=0,
        description="Longest wait a request is admitted to, estimated from the rate the replica served at "
        "while every place was taken (and never past request_timeout_s); a longer one gets a fast 503.",
    )
    queue_rate_window_s: float = Field(
        30.0, gt=0, description="How far back the served rate that estimates a request's wait looks."
    )
    # A burst is taken in a few requests at a time (replica/admission/intake.py): a thousand requests read,
    # parsed and admitted in one turn of the event loop hold a health probe behind them for seconds.
    intake_limit: int = Field(
        32,
        ge=0,
        description="Requests taken in at once (read, checked, admitted, up to their engine call); the rest "
        "wait their turn in arrival order, while /health and /metrics are answered at once. 0: no limit.",
    )
    # A person in the page must not wait behind a bulk job: bulk may hold at most
    # max_in_flight minus this share, interactive work may use every slot.
    interactive_reserve: float = Field(
        0.25, ge=0, lt=1, description="Share of max_in_flight kept for interactive work."
    )
    bulk_key_share_min: int = Field(
        1, ge=1, description="Bulk slots a key may always hold, whatever its weighted share among busy keys."
    )
    # A refused client (its queue full) retries after Retry-After. Without remembering it,
    # a freed place goes to whoever asks first, mostly the job that just finished one.
    waiting_window_s: float = Field(
        5.0,
        ge=0,
        description="How long a refused request counts as waiting for a place: while interactive work "
        "waits, bulk takes no freed place; a bulk key that waits counts in the per-key shares. 0: off.",
    )
    request_timeout_s: float = Field(120.0, gt=0, description="Per-request deadline; past it a 504.")
    max_batch_texts: int = Field(128, ge=1, description="Most texts in one batch request.")
    max_body_bytes: int = Field(4 * 1024 * 1024, ge=1024, description="Largest request body accepted.")
    # Each glossary term sent costs prompt tokens, and the official templates show a handful of terms,
    # not a dictionary: these bound the body and the matching work (one regex per term) while leaving
    # room for a product glossary. The context's real limit is the token budget (a 413); its character
    # cap only keeps megabytes out of prompt building.
    max_glossary_terms: int = Field(256, ge=1, description="Most glossary terms in one request.")
    max_glossary_term_chars: int = Field(
        200, ge=1, description="Longest glossary term or translation, in characters."
    )
    max_context_chars: int = Field(20_000, ge=1, description="Longest context text, in characters.")
    max_style_chars: int = Field(500, ge=1, description="Longest style text, in characters.")
    # Source auto-detection (hunyuan_serve.detect), when a request has no source or says "auto".
    detect_short_text_chars: int = Field(
        40, ge=0, description="Texts this short take their batch's majority language (as LibreTranslate)."
    )
    detect_sure_confidence: float = Field(
        0.8, ge=0, le=1, description="A short text detected at least this sure keeps its own language."
    )
    detect_max_chars: int = Field(
        2000, ge=1, description="Characters of each text the language detector reads (the rest is skipped)."
    )
    cache_entries: int = Field(10_000, ge=0, description="In-process LRU cache size (0 disables).")
    cache_path: str | None = Field(None, description="SQLite cache file shared by replicas on a host.")
    cache_busy_timeout_s: float = Field(
        5.0, gt=0, description="Longest wait for another replica's lock on the cache file; then a miss."
    )
    # The cache shared across hosts (hunyuan_serve/cache/redis_layer.py RedisCache). Its timeouts are
    # short: Redis trouble costs a miss, never a held request.
    cache_redis_url: str | None = Field(
        None,
        description="Redis cache shared by every host, e.g. redis://10.0.0.9:6379/0 (instead of cache_path).",
    )
    cache_redis_prefix: str = Field("hunyuan-serve:", description="Prefix of every key in Redis.")
    cache_redis_ttl_s: int = Field(
        30 * 86400, ge=0, description="Seconds a Redis entry lives (0: until Redis evicts it)."
    )
    cache_redis_connect_timeout_s: float = Field(
        0.25, gt=0, description="Deadline of a connection to Redis; then a miss."
    )
    cache_redis_timeout_s: float = Field(
        0.25, gt=0, description="Deadline of one Redis get or set; then a miss."
    )
    cache_redis_retry_s: float = Field(
        1.0,
        gt=0,
        description="After a Redis error, how long the cache does without Redis before trying again.",
    )
    # DeepL glossaries and per-key usage (hunyuan_serve/storage/): durable, shared by the replicas of a
    # host through one SQLite file, or by every host through Redis when cache_redis_url is set.
    store_path: str | None = Field(
        None,
        description="SQLite file of the glossaries and per-key usage the replicas of a host share "
        "(default: store.sqlite in the run dir; with cache_redis_url they live in Redis instead).",
    )
    # DeepL allows 10 MiB a glossary; each translate request matches every term against its texts (one
    # regex a term), so a smaller bound keeps that matching cheap. Both are checked before anything is stored.
    max_glossary_entries: int = Field(5000, ge=1, description="Most entries in one stored glossary.")
    max_glossary_bytes: int = Field(
        1024 * 1024, ge=1024, description="Largest glossary entries text (TSV or CSV), in UTF-8 bytes."
    )
    # Documents as jobs (DeepL /v2/document, LibreTranslate /translate_file; replica/documents/):
    # the upload is kept in the store file (store_path) until downloaded or expired. Nginx's
    # client_max_body_size must be above document_max_bytes, or the edge refuses first (also a 413).
    document_max_bytes: int = Field(
        4 * 1024 * 1024, ge=1024, description="Largest document accepted for translation (a 413 past it)."
    )
    document_lease_s: float = Field(
        20.0,
        gt=0,
        description="A replica's hold on the job it works on; renewed per batch, expired: retaken.",
    )
    document_poll_s: float = Field(1.0, gt=0, description="How often an idle replica looks for a queued job.")
    document_max_attempts: int = Field(
        5, ge=1, description="Times a job is taken up (a replica dying each time) before it is an error."
    )
    document_ttl_s: float = Field(
        24 * 3600.0, gt=0, description="Seconds a document job and its result are kept when not downloaded."
    )
    # Under nginx.read_timeout_s (300 s by default), or Nginx answers 504 first.
    document_wait_s: float = Field(
        240.0, gt=0, description="LibreTranslate /translate_file: how long the answer waits for its job."
    )
    document_workers: int = Field(
        1, ge=0, le=8, description="Jobs each replica translates at once (0: this replica takes none)."
    )
    document_batch_size: int = Field(
        16, ge=1, description="Segments of a document the translation core gets at once (one batch)."
    )
    document_concurrency: int = Field(4, ge=1, description="Batches of one document job in the core at once.")
    document_public_url: str | None = Field(
        None,
        description="Base URL of LibreTranslate's translatedFileUrl (default: the Host the call came to, "
        "with nginx.port when it came through Nginx).",
    )
    document_cache_path: str | None = Field(
        None,
        description="SQLite file of the segments document jobs translated, so a resumed job sends only "
        "the rest (default: document-cache.sqlite in the run dir).",
    )
    health_deep_timeout_s: float = Field(10.0, gt=0, description="Deadline of the deep health probe.")
    stall_timeout_s: float = Field(
        60.0,
        ge=0,
        description="/health says hung after the engine holds work this long without a step (0: off).",
    )
    warmup_timeout_s: float = Field(600.0, gt=0, description="Deadline of the warm-up translation.")
    # None: the model family's recommendation (hunyuan_serve.families), so one table holds those values.
    temperature: float | None = Field(
        None, ge=0, le=2, description="Default sampling temperature (default: the model family's)."
    )
    top_p: float | None = Field(
        None, gt=0, le=1, description="Default nucleus sampling (default: the model family's)."
    )
    top_k: int | None = Field(
        None, ge=-1, description="Default top-k, -1 disables (default: the model family's)."
    )
    repetition_penalty: float | None = Field(
        None, gt=0, le=2, description="Default repetition penalty (default: the model family's)."
    )
    max_tokens: int = Field(512, ge=1, description="Default most generated tokens.")
    # None: the family's (hunyuan_serve.families.SEGMENT_TOKENS), one table for every family's target.
    segment_tokens: int | None = Field(
        None,
        ge=0,
        description="A text of more tokens than this is cut at paragraph, line, then sentence boundaries, "
        "its segments translated as one batch and joined with the source's separators, in every API "
        "(0: never cut; default: the model family's).",
    )
    # OpenAI-compatible routes (/v1/*). Hunyuan-MT models have no system prompt (their READMEs): a client's
    # system messages are folded into the user turn, dropped, or refused.
    system_prompt_mode: Literal["prepend", "drop", "reject"] = Field(
        "prepend",
        description="/v1/chat/completions system messages: prepend (their text and a blank line before the "
        "first user message), drop, or reject (400).",
    )
    max_chat_messages: int = Field(64, ge=1, description="Most messages in one /v1/chat/completions request.")
    weblate_split: bool = Field(
        True,
        description="Translate Weblate's chats one string per prompt in the family's template: its "
        "structured task (a JSON object of strings; the JSON array answered is built by the server) and "
        "its older shape (strings joined by ==WEBLATE_PART==, joined the same way).",
    )
    graceful_shutdown_s: float = Field(
        30.0, ge=0, description="On SIGTERM, time in-flight requests get to finish before the replica exits."
    )
    # A replica `up` started watches `up` (gunicorn's workers do the same with their master), so a
    # SIGKILL-ed `up` leaves no replica behind; one run by systemd or Kubernetes watches nothing.
    parent_check_s: float = Field(
        1.0,
        ge=0,
        description="How often a replica started by `up` checks that `up` still runs; once it does not, "
        "the replica drains and exits as on SIGTERM (0: never).",
    )
    # Hunyuan-MT-Chimera fusion: /translate with "ensemble" samples candidates here and has
    # the Chimera pool fuse them (POST /fuse). The pool's own config (up's pools) fills chimera_url.
    chimera_url: str | None = Field(
        None,
        description="Base URL of the Chimera pool that fuses ensemble candidates (POST /fuse), e.g. "
        "http://127.0.0.1:8090; unset: ensemble requests are refused (400).",
    )
    # Well under request_timeout_s, so a stuck Chimera still leaves time to answer the candidate.
    chimera_timeout_s: float = Field(
        30.0, gt=0, description="Deadline of one fusion call to the Chimera pool; past it, a failure."
    )
    chimera_connect_timeout_s: float = Field(
        2.0, gt=0, description="Deadline of a connection to the Chimera pool; past it, a failure."
    )
    chimera_keepalive: int = Field(
        32, ge=1, description="Idle keep-alive connections the replica keeps open to the Chimera pool."
    )
    # The other dialects (DeepL, LibreTranslate, Immersive) have no field to ask for an ensemble: a pool
    # set to fuse answers every translation so, and /translate without "ensemble" too.
    ensemble_candidates: int = Field(
        0,
        ge=0,
        le=8,
        description="Candidates fused for every translation that asks for no ensemble itself, in every "
        "dialect (2-8; needs a Chimera pool); 0: only requests with an ensemble are fused.",
    )
    chimera_max_concurrency: int = Field(
        16,
        ge=1,
        description="Fusion calls one replica has in flight at once; a batch's texts wait for a turn.",
    )
    chimera_failure: Literal["degrade", "refuse"] = Field(
        "degrade",
        description="When the Chimera pool fails or refuses a fusion: degrade (answer the first candidate, "
        "fused_by null, header X-Hunyuan-Fusion saying why) or refuse (503 fusion_unavailable).",
    )

    def bulk_slots(self, slots: int) -> int:
        """Of `slots` places, those bulk work may hold: all but the interactive reserve, at least one.

        The one formula of the replica's admission (replica/admission/priority.py, over max_in_flight) and of
        the edge's bulk cap (edge/capacity.py, over a pool's max_conns)."""
        return bulk_slots(slots, self.interactive_reserve)

    @field_validator("cache_redis_url")
    @classmethod
    def _redis_url(cls, value: str | None) -> str | None:
        problem = redis_url_problem(value) if value else None
        if problem:
            raise ValueError(problem)
        return value or None

    @field_validator("chimera_url")
    @classmethod
    def _chimera_url(cls, value: str | None) -> str | None:
        if value and urllib.parse.urlsplit(value).scheme not in ("http", "https"):
            raise ValueError("chimera_url is an http:// or https:// URL, e.g. http://127.0.0.1:8090")
        return value or None

    @field_validator("ensemble_candidates")
    @classmethod
    def _a_real_ensemble(cls, value: int) -> int:
        if value == 1:
            raise ValueError("1 candidate is no ensemble: 0 (off) or 2 to 8")
        return value

    @model_validator(mode="after")
    def _fusion_within_the_deadline(self) -> ReplicaConfig:
        # Else the request's own deadline (a 504) ends an ensemble before a stuck Chimera can degrade it.
        if self.chimera_url and self.chimera_timeout_s >= self.request_timeout_s:
            raise ValueError(
                f"chimera_timeout_s ({self.chimera_timeout_s:g}) must be under request_timeout_s "
                f"({self.request_timeout_s:g}): a stuck Chimera must leave time to answer the candidate"
            )
        return self

    @model_validator(mode="after")
    def _one_shared_cache(self) -> ReplicaConfig:
        # One shared layer: two would each miss what the other holds and double every write.
        if self.cache_path and self.cache_redis_url:
            raise ValueError("set one shared cache: cache_path (one host) or cache_redis_url (all hosts)")
        if self.store_path and self.cache_redis_url:
            raise ValueError("set one shared store: store_path (one host) or cache_redis_url (all hosts)")
        return self


def redis_url_problem(url: str) -> str | None:
    """What redis-py would only say at the first get (every request a miss): scheme, host, port, db."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "unix"):
        return "a Redis URL starts with redis://, rediss:// or unix:// (e.g. redis://10.0.0.9:6379/0)"
    if parts.scheme == "unix":
        return None if parts.path else "a unix:// Redis URL names its socket, e.g. unix:///run/redis.sock"
    try:  # the netloc may hold a password: never quoted back
        port = parts.port
    except ValueError:
        port = 0
    if not parts.hostname:
        return "a Redis URL names its host, e.g. redis://10.0.0.9:6379/0"
    if port == 0:
        return "the Redis URL's port is not a number from 1 to 65535"
    database = parts.path.strip("/")
    if database and not database.isdigit():
        return f"the Redis URL's database {database!r} is not a number (e.g. /0)"
    return None
