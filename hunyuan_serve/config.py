"""The one configuration model: every option, timeout and threshold, with defaults and validation."""

from __future__ import annotations

import argparse
import os
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)


class ConfigError(ValueError):
    """A configuration that cannot be used, with a message naming the bad key."""


class Section(BaseModel):
    """Base of every config section: frozen, unknown keys are errors."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class EngineConfig(Section):
    """How the vLLM engine is built (maps to vLLM's engine arguments)."""

    model: str | None = Field(
        None, description="Path or hub id of the model; empty means the embedded default for this machine."
    )
    # Chosen by `up` for each replica (cuda when it has GPUs), so a replica never asks torch, which
    # would initialise CUDA before vLLM forks its engine core (hunyuan_serve/gpu.py, CUDA_ENV).
    device: Literal["auto", "cuda", "cpu"] = Field(
        "auto", description="Where the engine runs; auto: cuda when nvidia-smi lists a GPU, else cpu."
    )
    revision: str | None = Field(None, description="Hub revision (branch, tag or commit) of a hub model.")
    download_dir: str | None = Field(
        None, description="Where `up` downloads a hub model (default: the Hugging Face cache, HF_HOME)."
    )
    tokenizer: str | None = Field(None, description="Tokenizer path or id, if not the model's.")
    served_model_name: str | None = Field(None, description="Name reported in responses and cache keys.")
    dtype: str = Field("auto", description="Weights/compute dtype: auto, float16, bfloat16, float32.")
    max_model_len: int | None = Field(None, gt=0, description="Context length (prompt + output tokens).")
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1, description="Fraction of GPU memory for vLLM.")
    quantization: str | None = Field(None, description="vLLM quantization method, e.g. fp8.")
    kv_cache_dtype: str = Field("auto", description="KV-cache dtype, e.g. auto or fp8.")
    tensor_parallel_size: int = Field(1, ge=1, description="GPUs per replica.")
    max_num_seqs: int = Field(256, ge=1, description="Most sequences the engine batches at once.")
    enforce_eager: bool | None = Field(
        None, description="Skip graph capture/compilation (faster start); default: on for CPU, off for GPU."
    )
    kv_cache_memory_bytes: int | None = Field(
        None, gt=0, description="KV-cache size in bytes (CPU builds; overrides the GiB setting)."
    )
    # Without a size, vLLM's CPU build reserves 92% of the host's memory and refuses to start
    # beside anything else, a second replica included.
    cpu_kvcache_space_gib: int = Field(
        2, ge=1, description="KV-cache GiB per replica on CPU (unless kv_cache_memory_bytes is set)."
    )
    seed: int = Field(0, description="Engine sampling seed.")
    prompt_family: Literal[
        "auto", "hunyuan-mt", "hy-mt1.5", "hy-mt2", "few-shot", "chimera", "hunyuan", "few_shot"
    ] = Field(
        "auto",
        description="Prompt family: auto (from the checkpoint's name and config), hunyuan-mt, "
        "hy-mt1.5, hy-mt2 (each generation's official templates), few-shot (base models); "
        "hunyuan and few_shot: old names of hunyuan-mt and few-shot.",
    )
    trust_remote_code: bool = Field(False, description="Allow model code from the checkpoint.")
    shutdown_timeout_s: float = Field(
        3.0,
        ge=0,
        description="On replica exit, time the engine's processes get to stop after SIGTERM before they "
        "are killed (vLLM's own default is 5 s, past which a drained replica outlived kill_timeout_s).",
    )
    # Issue 18: measures the serving layer alone (bench/layer.py); /health and the logs say it is on.
    stand_in: bool = Field(
        False,
        description="Answer with an engine stand-in instead of vLLM: the chat template and tokenizer run, "
        "no model does (echoes the text's last tokens at once). For measuring the serving layer only.",
    )
    stand_in_output_tokens: int = Field(
        16, ge=1, description="Tokens the stand-in reports as generated per answer (at most max_tokens)."
    )

    @field_validator("quantization")
    @classmethod
    def _no_experts_int8(cls, value: str | None) -> str | None:
        if value == "experts_int8":
            raise ValueError("experts_int8 breaks Hunyuan-MT's dense model output; use fp8 or none")
        return value


class ReplicaConfig(Section):
    """The HTTP server around one engine: admission, deadlines, cache, sampling defaults."""

    host: str = Field("127.0.0.1", description="Address a replica binds.")
    port: int = Field(8001, ge=1, le=65535, description="Port of a single replica (up assigns its own).")
    # As many as the engine batches by default (max_num_seqs): 64 shed load that one replica could
    # still batch, so a lone replica answered a 100-user ramp with 89% 503s.
    max_in_flight: int = Field(256, ge=1, description="Requests admitted at once; more get a fast 503.")
    retry_after_s: int = Field(1, ge=0, description="Retry-After seconds on an overload 503.")
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
    # The cache shared across hosts (hunyuan_serve/cache.py RedisCache). Its timeouts are short: Redis
    # trouble costs a miss, never a held request.
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
    # DeepL glossaries and per-key usage (hunyuan_serve/stores.py): durable, shared by the replicas of a
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
        description="Translate a Weblate-style chat (its system prompt names the languages; strings joined "
        "by ==WEBLATE_PART==) one string per prompt in the family's template, joined the same way.",
    )
    graceful_shutdown_s: float = Field(
        30.0, ge=0, description="On SIGTERM, time in-flight requests get to finish before the replica exits."
    )
    # Hunyuan-MT-Chimera fusion (issue 19): /translate with "ensemble" samples candidates here and has
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
    chimera_failure: Literal["degrade", "refuse"] = Field(
        "degrade",
        description="When the Chimera pool fails or refuses a fusion: degrade (answer the first candidate, "
        "fused_by null, header X-Hunyuan-Fusion saying why) or refuse (503 fusion_unavailable).",
    )

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


class SupervisorConfig(Section):
    """Probing, eviction, restart and shutdown rules of `up`."""

    probe_interval_s: float = Field(0.5, gt=0, description="Time between health probes of a replica.")
    probe_timeout_s: float = Field(2.0, gt=0, description="Deadline of one health probe.")
    # Deep probes run a generation, which keeps an idle CPU engine's workers spinning for a second
    # after; a hang under load shows sooner through the replica's stall rule (stall_timeout_s).
    deep_probe_every: int = Field(60, ge=0, description="Every Nth probe is deep (0: never).")
    unhealthy_threshold: int = Field(3, ge=1, description="Failed probes in a row that evict a replica.")
    startup_timeout_s: float = Field(900.0, gt=0, description="Deadline for a new replica to become ready.")
    restart_backoff_base_s: float = Field(1.0, ge=0, description="First restart delay.")
    restart_backoff_max_s: float = Field(60.0, ge=0, description="Largest restart delay.")
    restart_backoff_jitter: float = Field(0.2, ge=0, le=1, description="Random fraction added to delays.")
    crash_loop_budget: int = Field(5, ge=1, description="Failures within the window that mark it failed.")
    crash_loop_window_s: float = Field(600.0, gt=0, description="Window the crash-loop budget counts in.")
    drain_timeout_s: float = Field(30.0, ge=0, description="Time in-flight requests get on shutdown.")
    kill_timeout_s: float = Field(10.0, ge=0, description="Time between SIGTERM and SIGKILL.")
    abandon_after_s: float = Field(
        60.0, gt=0, description="Time a killed replica gets to exit before a new one starts beside it."
    )
    tick_s: float = Field(0.25, gt=0, description="Longest the supervisor loop waits between clock checks.")
    status_timeout_s: float = Field(1.0, gt=0, description="Deadline of each request `status` makes.")
    # A killed engine's GPU memory is released some seconds after its process exits; a replica
    # started before that fails vLLM's free-memory check and counts against the crash-loop budget.
    gpu_release_timeout_s: float = Field(
        120.0, ge=0, description="Longest a GPU replica's (re)start waits for its devices' memory to be free."
    )
    gpu_release_poll_s: float = Field(1.0, gt=0, description="Time between GPU memory checks while waiting.")
    # A GPU holds one engine: its replacement can only start once the old engine has let go of it.
    reload_order: Literal["auto", "surge", "drain_first"] = Field(
        "auto",
        description="How a reload replaces each replica: surge (the new one starts beside the old, which "
        "is drained once the new one is admitted) or drain_first (the old one is drained, then the new one "
        "starts on its devices); auto: drain_first for GPU replicas, surge on CPU.",
    )
    reload_wait_timeout_s: float = Field(
        3600.0, gt=0, description="Longest `hunyuan-serve reload` waits for the reload's outcome."
    )


_ORIGIN = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$|^https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$")


class NginxConfig(Section):
    """The public front: Nginx in its own prefix with a rendered config."""

    binary: str = Field("nginx", description="Nginx executable.")
    listen: str = Field("127.0.0.1", description="Address Nginx listens on.")
    port: int = Field(8080, ge=1, le=65535, description="Public port clients use.")
    worker_processes: int | Literal["auto"] = Field("auto", description="Nginx worker processes.")
    worker_connections: int = Field(4096, ge=16, description="Connections per Nginx worker.")
    keepalive: int = Field(32, ge=1, description="Idle keepalive connections to replicas per worker.")
    max_fails: int = Field(1, ge=0, description="Failures within fail_timeout that sideline a replica.")
    fail_timeout_s: int = Field(2, ge=1, description="Window and sideline time for max_fails.")
    connect_timeout_s: float = Field(1.0, gt=0, description="proxy_connect_timeout.")
    send_timeout_s: float = Field(60.0, gt=0, description="proxy_send_timeout.")
    read_timeout_s: float = Field(300.0, gt=0, description="proxy_read_timeout.")
    next_upstream_tries: int = Field(3, ge=1, description="Replicas one request may try.")
    next_upstream_timeout_s: float = Field(300.0, gt=0, description="Time a request may spend retrying.")
    client_max_body_size: str = Field("8m", description="Largest request body Nginx accepts.")
    rate_limit_rps: float | None = Field(None, gt=0, description="Per-client requests/s; past it a 429.")
    rate_limit_burst: int = Field(50, ge=0, description="Burst allowed above rate_limit_rps.")
    rate_limit_retry_after_s: int = Field(1, ge=0, description="Retry-After on a rate-limit 429.")
    retry_after_s: int = Field(2, ge=0, description="Retry-After when no replica can take a request.")
    balance: Literal["least_conn", "round_robin"] = Field(
        "least_conn", description="Upstream balancing: least_conn, or round_robin (for comparison)."
    )
    keepalive_timeout_s: float = Field(
        0.0,
        ge=0,
        description="Idle time of a client keepalive connection; 0 closes it after each response, so no "
        "request can race the closing of idle connections on an Nginx reload.",
    )
    expose_metrics: bool = Field(False, description="Proxy /metrics (one replica's, per request) publicly.")
    max_conns: int | None = Field(
        None,
        ge=0,
        description="Requests Nginx sends one replica at once (admission at the edge: past it on every "
        "replica Nginx itself answers the 503); None: what its engine batches (engine.max_num_seqs, on CPU "
        "at most cpu_max_conns), at most replica.max_in_flight; 0: no cap.",
    )
    # A CPU engine's throughput stops growing long before 256 sequences (make bench: two CPU replicas of
    # the tiny model serve about 75 req/s from ~35 in flight each on); what waits inside a replica past
    # that only waits longer, where the edge can no longer refuse it. 128 still takes the bench's
    # 100-user closed loop on one replica without refusing (bench/results/README.md has the trade-off).
    cpu_max_conns: int = Field(
        128, ge=1, description="max_conns of a CPU replica when max_conns is unset (see bench/results)."
    )
    # Nginx shares the cores with engines that spin while they wait: at the same priority its workers
    # wait for a core, and an edge refusal with them. A negative value needs root (or CAP_SYS_NICE):
    # without it Nginx logs setpriority's failure and runs at 0.
    worker_priority: int = Field(
        -5, ge=-20, le=19, description="Nice value of Nginx's worker processes (lower runs first)."
    )
    status_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="Local port (on 127.0.0.1) of Nginx's stub_status and its connection gauges in the "
        "Prometheus text format (/metrics); 0: off.",
    )
    reload_timeout_s: float = Field(10.0, gt=0, description="Deadline of `nginx -t` and of starting Nginx.")
    check_request_timeout_s: float = Field(
        0.2, gt=0, description="Deadline of one request checking that Nginx answers or serves a new config."
    )
    start_poll_s: float = Field(0.02, gt=0, description="Pause between checks that a starting Nginx answers.")
    reload_poll_s: float = Field(0.01, gt=0, description="Pause between checks that a reload has taken.")
    reload_retry_s: float = Field(
        1.0, gt=0, description="Wait before a failed reload is tried again (a newer routing goes at once)."
    )
    cors_origins: tuple[str, ...] = Field(
        (), description="Origins whose pages may call the API (comma list, '*' any); empty sends no CORS."
    )
    cors_max_age_s: int = Field(600, ge=0, description="How long a browser may keep a CORS preflight answer.")
    # Only with several pools: the LibreTranslate, DeepL and Immersive bodies name no model of ours.
    dialect_pool: str | None = Field(
        None,
        description="The pool the LibreTranslate, DeepL and Immersive APIs go to (default: default_pool).",
    )
    js_module: str = Field(
        "/usr/lib/nginx/modules/ngx_http_js_module.so",
        description="Nginx's njs module (Debian's libnginx-mod-http-js), loaded only with several pools, "
        "where it routes each request by its body's model.",
    )

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: Any) -> Any:
        if isinstance(value, str):  # from a flag: "https://a.example,https://b.example"
            value = tuple(part.strip() for part in value.split(",") if part.strip())
        # Each goes into the Nginx config as a quoted string: only a scheme://host[:port] or '*'.
        for origin in value if isinstance(value, (list, tuple)) else ():
            if origin != "*" and not _ORIGIN.match(str(origin)):
                raise ValueError(f"{origin!r} is not an origin like https://app.example or http://host:8000")
        return value


class AuthConfig(Section):
    """API keys at the edge: who may call, and how fast each key may go."""

    keys_file: str | None = Field(
        None, description="File of API keys, one a line (# comments); unset: no key needed (loopback only)."
    )
    key_rate_limit_rps: float | None = Field(
        None, gt=0, description="Requests/s per API key (per client address without one); past it a 429."
    )
    key_rate_limit_burst: int = Field(20, ge=0, description="Burst allowed above key_rate_limit_rps.")
    allow_open: bool = Field(
        False,
        description="Let `up` listen (nginx.listen, replica.host) on a non-loopback address with no "
        "keys_file or peer_secret_file (anyone may call).",
    )
    # Multi-host: the secret the gateway's Nginx sends to every replica (X-Hunyuan-Peer), which the
    # replicas, the supervisor's probes and the host's own Nginx check (hunyuan_serve/auth.py).
    peer_secret_file: str | None = Field(
        None,
        description="File holding the secret shared by the gateway and its hosts; set: every replica "
        "and this host's Nginx refuse requests without it (403). Unset: single host.",
    )

    @field_validator("keys_file", "peer_secret_file")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        # Replicas run elsewhere than `up`'s working directory; they get the same file.
        return str(Path(value).expanduser().absolute()) if value else None


class GatewayConfig(Section):
    """The multi-host front (`hunyuan-serve gateway`): how it finds hosts and probes their replicas."""

    discovery_interval_s: float = Field(1.0, gt=0, description="Time between polls of a host's replica list.")
    discovery_timeout_s: float = Field(1.0, gt=0, description="Deadline of one poll of a host.")
    host_down_after: int = Field(
        3, ge=1, description="Failed polls in a row after which a host is down and its replicas evicted."
    )
    probe_interval_s: float = Field(0.5, gt=0, description="Time between health probes of each replica.")
    probe_timeout_s: float = Field(1.0, gt=0, description="Deadline of one replica health probe.")
    unhealthy_threshold: int = Field(3, ge=1, description="Failed probes in a row that evict a replica.")
    readmit_backoff_s: float = Field(
        0.5, ge=0, description="Wait after an eviction before the replica is probed for readmission."
    )
    readmit_backoff_max_s: float = Field(
        10.0, ge=0, description="Longest such wait (it doubles per eviction since the replica was ready)."
    )
    drain_timeout_s: float = Field(10.0, ge=0, description="Time in-flight requests get on shutdown.")
    # Hosts serving different models behind one front would answer the same request differently (and
    # a client's cache is keyed by the model the front names): set it to route only hosts serving it.
    model: str | None = Field(
        None,
        description="Route only hosts whose listing names this served model (unset: any, and a mix of "
        "models is reported as an event models_differ and in /health).",
    )


class LogsConfig(Section):
    """How big the log files under the run directory (Nginx's, each replica's) may grow."""

    # One JSON line per request in Nginx's access log and again in the replica's: ~1 GB a day each at
    # 30 requests/s. The bound per log is rotate_at_bytes * (rotate_keep + 1).
    rotate_at_bytes: int = Field(
        64 * 1024 * 1024, ge=0, description="Size at which a log moves to .1 and starts empty (0: never)."
    )
    rotate_keep: int = Field(4, ge=1, description="Rotated copies kept per log (.1 newest ... .N oldest).")
    rotate_check_interval_s: float = Field(30.0, gt=0, description="Time between checks of the logs' sizes.")


POOL_NAME = re.compile(r"^[a-z][a-z0-9-]{0,30}$")
DEFAULT_POOL = "default"  # the name of the one pool that today's single-model settings describe


class PoolConfig(Section):
    """One model served by replicas of its own: the top-level sections with this pool's overrides."""

    name: str = Field(description="The pool's name: lowercase letters, digits and '-', a letter first.")
    model: str | None = Field(None, description="Path or hub id of the pool's model (its engine.model).")
    replicas: int | None = Field(
        None, ge=1, description="Replicas on a machine without GPUs (default: replicas)."
    )
    gpus: tuple[int | str, ...] | None = Field(None, description="The pool's CUDA devices (default: gpus).")
    engine: dict[str, Any] = Field(default_factory=dict, description="engine keys over the top-level ones.")
    replica: dict[str, Any] = Field(default_factory=dict, description="replica keys over the top-level ones.")
    chimera_pool: str | None = Field(None, description="The pool that fuses this pool's ensemble candidates.")

    @field_validator("name")
    @classmethod
    def _dns_name(cls, value: str) -> str:
        # It names an Nginx upstream, a Kubernetes Deployment and a Prometheus label value.
        if not POOL_NAME.match(value):
            raise ValueError(f"{value!r}: lowercase letters, digits and '-', a letter first, at most 31")
        return value

    @field_validator("gpus", mode="before")
    @classmethod
    def _parse_gpus(cls, value: Any) -> Any:
        return _gpus_value(value)


class ServeConfig(Section):
    """Everything `up` needs: devices, replicas and every section above."""

    gpus: tuple[int | str, ...] | None = Field(
        None, description="CUDA devices (indexes or GPU-/MIG- UUIDs); empty means all visible ones."
    )
    replicas: int = Field(1, ge=1, description="Replicas on a machine without GPUs.")
    base_port: int = Field(8101, ge=1, le=65535, description="Loopback port of the first replica.")
    run_dir: str = Field("", description="Where configs, logs and state go (default: per-user run dir).")
    log_level: Literal["debug", "info", "warning", "error"] = Field("info", description="Log level.")
    engine: EngineConfig = Field(default_factory=EngineConfig)
    replica: ReplicaConfig = Field(default_factory=ReplicaConfig)
    supervisor: SupervisorConfig = Field(default_factory=SupervisorConfig)
    nginx: NginxConfig = Field(default_factory=NginxConfig)
    auth: AuthConfig = Field(default_factory=AuthConfig)
    logs: LogsConfig = Field(default_factory=LogsConfig)
    pools: tuple[PoolConfig, ...] = Field(
        (), description="Several models, each with its own replicas (empty: one pool of the settings above)."
    )
    default_pool: str | None = Field(
        None, description="The pool a request naming no model goes to (default: the first)."
    )

    @field_validator("run_dir")
    @classmethod
    def _absolute_run_dir(cls, value: str) -> str:
        # Nginx reads its prefix relative to itself (rel/nginx/rel/nginx.conf), and replicas and reloads
        # read the run dir from elsewhere: one absolute path from the start.
        return str(Path(value).expanduser().absolute()) if value else value

    @field_validator("gpus", mode="before")
    @classmethod
    def _parse_gpus(cls, value: Any) -> Any:
        return _gpus_value(value)

    @model_validator(mode="after")
    def _gpus_fit_tensor_parallel(self) -> ServeConfig:
        if self.gpus is not None:
            if self.gpus and self.engine.device == "cpu":  # one would silently win over the other
                raise ConfigError(f"gpus {list(self.gpus)} with engine.device: cpu: drop one of the two")
            split_devices(self.gpus, self.engine.tensor_parallel_size)
        return self

    @model_validator(mode="after")
    def _pools_resolve(self, info: ValidationInfo) -> ServeConfig:
        # Every pool's effective config validates, names and devices are unique. A pool's own config
        # (validated inside this check, context "pool") is checked as a pool, by its parent.
        if not (info.context or {}).get("pool"):
            resolve_pools(self)
        return self


def _gpus_value(value: Any) -> Any:
    if isinstance(value, str):
        return parse_gpus(value)
    if isinstance(value, int):
        return (value,)
    if isinstance(value, (list, tuple)):  # a YAML list: "0" and 0 are the same device
        return parse_gpus(",".join(str(v) for v in value)) or ()
    return value


@dataclass(frozen=True)
class Pool:
    """One pool as `up` runs it: its name and the whole config its replicas are planned from."""

    name: str
    cfg: ServeConfig  # the top-level config with the pool's overrides, `pools` emptied
    chimera_pool: str | None = None


def _pool_config(cfg: ServeConfig, pool: PoolConfig) -> ServeConfig:
    # Which pool is which is the whole config's to say; a pool's own config is one pool, named default.
    data = cfg.model_dump(exclude={"pools": True, "default_pool": True, "nginx": {"dialect_pool"}})
    engine = {**data["engine"], **pool.engine, **({"model": pool.model} if pool.model else {})}
    data.update(engine=engine, replica={**data["replica"], **pool.replica})
    if pool.replicas is not None:
        data["replicas"] = pool.replicas
    if pool.gpus is not None:
        data["gpus"] = pool.gpus
    try:
        return ServeConfig.model_validate(data, context={"pool": pool.name})
    except ValidationError as err:
        problems = "; ".join(f"pools.{pool.name}.{part}" for part in validation_problems(err).split("; "))
        raise ValueError(problems) from None
    except ConfigError as err:
        raise ValueError(f"pools.{pool.name}: {err}") from None


def _check_pool_names(cfg: ServeConfig) -> None:
    names = [p.name for p in cfg.pools]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"pools: the name {name!r} is repeated")
    if cfg.default_pool is not None and cfg.default_pool not in (names or [DEFAULT_POOL]):
        raise ValueError(
            f"default_pool: {cfg.default_pool!r} is not a pool (pools: {names or [DEFAULT_POOL]})"
        )
    if cfg.nginx.dialect_pool is not None and cfg.nginx.dialect_pool not in (names or [DEFAULT_POOL]):
        raise ValueError(
            f"nginx.dialect_pool: {cfg.nginx.dialect_pool!r} is not a pool (pools: {names or [DEFAULT_POOL]})"
        )
    for p in cfg.pools:
        if p.chimera_pool is not None and (p.chimera_pool not in names or p.chimera_pool == p.name):
            raise ValueError(f"pools.{p.name}.chimera_pool: {p.chimera_pool!r} is not another pool")


def _check_pool_ensembles(pools: Sequence[Pool]) -> None:
    for pool in pools:
        fuses = pool.chimera_pool or pool.cfg.replica.chimera_url
        if pool.cfg.replica.ensemble_candidates and not fuses:
            where = f"pools.{pool.name}." if pool.name != DEFAULT_POOL else ""
            raise ValueError(
                f"{where}replica.ensemble_candidates: no Chimera pool to fuse the candidates "
                f"(set {where + 'chimera_pool' if where else 'replica.chimera_url'})"
            )


def _check_pool_devices(pools: Sequence[Pool]) -> None:
    owner: dict[str, str] = {}
    for pool in pools:
        for gpu in pool.cfg.gpus or ():
            if str(gpu) in owner:
                raise ValueError(f"pools.{pool.name}.gpus: GPU {gpu} is already pool {owner[str(gpu)]}'s")
            owner[str(gpu)] = pool.name


def resolve_pools(cfg: ServeConfig) -> tuple[Pool, ...]:
    """The pools in config order; without a `pools` section the one pool of the top-level settings."""
    if not cfg.pools:
        _check_pool_names(cfg)
        _check_pool_ensembles([Pool(DEFAULT_POOL, cfg)])
        return (Pool(DEFAULT_POOL, cfg),)
    _check_pool_names(cfg)
    pools = tuple(Pool(p.name, _pool_config(cfg, p), p.chimera_pool) for p in cfg.pools)
    _check_pool_devices(pools)
    _check_pool_ensembles(pools)
    return pools


def default_pool(cfg: ServeConfig) -> str:
    """The pool of a request that names no model."""
    return cfg.default_pool or (cfg.pools[0].name if cfg.pools else DEFAULT_POOL)


def split_devices(ids: Sequence[int | str], tp: int) -> list[tuple[int | str, ...]]:
    """Devices in groups of tensor_parallel_size; the one check that they divide (config and plan)."""
    if len(ids) % tp:
        raise ConfigError(f"gpus: {len(ids)} devices do not split into groups of {tp} (tensor_parallel_size)")
    return [tuple(ids[i : i + tp]) for i in range(0, len(ids), tp)]


def _device_id(part: str) -> int | str:
    part = part.strip()
    if part.isdigit():
        return int(part)
    if part.startswith(("GPU-", "MIG-")) and len(part) > 4:
        return part
    raise ValueError(f"gpus must be device numbers or GPU-/MIG- UUIDs, got {part!r}")


def parse_gpus(text: str) -> tuple[int | str, ...] | None:
    """Parse '0,1,2' into (0, 1, 2) and UUIDs (GPU-..., MIG-...) as given; 'all' or '' means every
    visible device (None)."""
    text = text.strip()
    if text in ("", "all"):
        return None
    try:
        ids = tuple(_device_id(part) for part in text.split(",") if part.strip())
    except ValueError as err:
        raise ValueError(f"{err} (in {text!r})") from None
    if len(set(ids)) != len(ids):
        raise ValueError(f"gpus must be distinct, got {text!r}")
    return ids


def default_run_dir(environ: Mapping[str, str]) -> Path:
    """The run directory `up` and `status` agree on when none is given."""
    if "HUNYUAN_SERVE_RUN_DIR" in environ:
        return Path(environ["HUNYUAN_SERVE_RUN_DIR"])
    if "XDG_RUNTIME_DIR" in environ:
        return Path(environ["XDG_RUNTIME_DIR"]) / "hunyuan-serve"
    return Path("/tmp") / f"hunyuan-serve-{os.getuid()}"


def error_key(loc: Sequence[int | str]) -> str:
    """A pydantic error location as the file's key, e.g. replica.cache_path or hosts[1].url."""
    key = ""
    for part in loc:
        key += f"[{part}]" if isinstance(part, int) else (f".{part}" if key else str(part))
    return key


def validation_problems(err: ValidationError) -> str:
    """Every problem on one line, each after its key; a check across keys names its keys itself."""
    problems = []
    for item in err.errors():
        # A YAML list is validated as a tuple: say what the file should hold.
        message = "should be a list" if item["type"] == "tuple_type" else item["msg"]
        message = message.removeprefix("Value error, ")
        key = error_key(item["loc"])
        problems.append(f"{key}: {message}" if key else message)
    return "; ".join(problems)


def yaml_problem(err: yaml.YAMLError) -> str:
    """PyYAML's report (several lines, with a caret drawing) as one line: what, and where."""
    mark = getattr(err, "problem_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    return f"{getattr(err, 'problem', None) or err}{where}"


def _format_error(err: ValidationError) -> str:
    return "invalid config: " + validation_problems(err)


def _deep_merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def build_config(file_data: Mapping[str, Any] | None, overrides: Mapping[str, Any]) -> ServeConfig:
    """Merge a parsed YAML mapping with CLI overrides (dotted keys) and validate."""
    nested: dict[str, Any] = {}
    for dotted, value in overrides.items():
        node = nested
        *parents, leaf = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    data = _deep_merge(dict(file_data or {}), nested)
    try:
        return ServeConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(err)) from None


def read_yaml(path: str | Path, what: str) -> Any:
    """A YAML file parsed; its errors on one line, naming what it is (config, inventory) and the file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read {what} {path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{what} {path} is not UTF-8 text") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"{what} {path} is not valid YAML: {yaml_problem(err)}") from None


def load_config_file(path: str | Path | None) -> dict[str, Any]:
    """Read a YAML config file into a mapping; errors name the file."""
    if path is None:
        return {}
    data = read_yaml(path, "config")
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config {path} must be a mapping at the top level")
    return data


def config_to_yaml(cfg: ServeConfig) -> str:
    """The effective config as YAML that load_config_file reads back to the same model."""
    return yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


# -- CLI flags generated from the model, so each option is declared once -----------------------

_SECTIONS: dict[str, type[Section]] = {
    "engine": EngineConfig,
    "replica": ReplicaConfig,
    "supervisor": SupervisorConfig,
    "nginx": NginxConfig,
    "auth": AuthConfig,
    "logs": LogsConfig,
}

# Flags whose short name would be ambiguous across sections get the section as prefix.
_AMBIGUOUS = {"port", "host", "retry_after_s", "listen", "binary"}


def _flag_name(section: str | None, field: str) -> str:
    if section is None:
        return field
    if field in _AMBIGUOUS:
        return f"{section}_{field}"
    return field


def _bool_arg(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


POOL_FLAG = "NAME=MODEL[:replicas=N][:gpus=0,1]"
_POOL_OPTIONS = ("replicas", "gpus")


def pool_from_flag(text: str) -> dict[str, Any]:
    """One `--pool NAME=MODEL[:replicas=N][:gpus=0,1]` as an entry of `pools`; a ConfigError names the
    flag and the part that is wrong."""

    def bad(part: str, why: str) -> ConfigError:
        return ConfigError(f"--pool {text!r}: {part}: {why} (expected {POOL_FLAG})")

    name, sep, rest = text.partition("=")
    if not sep:
        raise bad(repr(text), "no '=' between the pool's name and its model")
    if not POOL_NAME.match(name):
        raise bad(f"name {name!r}", "lowercase letters, digits and '-', a letter first, at most 31")
    model, *options = rest.split(":")
    if not model.strip():
        raise bad("model", "empty")
    pool: dict[str, Any] = {"name": name, "model": model.strip()}
    for option in options:
        key, has_value, value = option.partition("=")
        if key not in _POOL_OPTIONS or not has_value:
            raise bad(repr(option), "not replicas=N or gpus=0,1")
        if key in pool:
            raise bad(repr(option), f"{key} given twice")
        if key == "replicas":
            if not value.isdigit() or int(value) < 1:
                raise bad(repr(option), "replicas is a whole number >= 1")
            pool["replicas"] = int(value)
            continue
        try:
            gpus = parse_gpus(value)
        except ValueError as err:
            raise bad(repr(option), str(err)) from None
        if gpus is None:
            raise bad(repr(option), "name the pool's devices, e.g. gpus=0,1")
        pool["gpus"] = list(gpus)
    return pool


def add_config_flags(parser: argparse.ArgumentParser, sections: Sequence[str]) -> None:
    """Add one --flag per field of the named sections ('top' is ServeConfig's own fields)."""
    parser.add_argument("--config", metavar="FILE", help="YAML config file; flags override it.")
    for section in sections:
        model: type[Section] = ServeConfig if section == "top" else _SECTIONS[section]
        group = parser.add_argument_group(f"{section} options")
        for name, field in model.model_fields.items():
            if name in _SECTIONS:
                continue
            if section == "top" and name == "pools":  # a list of sections: one repeatable flag per pool
                group.add_argument(
                    "--pool",
                    dest="pools",
                    action="append",
                    default=argparse.SUPPRESS,
                    metavar=POOL_FLAG,
                    help="A pool: its model, on CPU its replicas, on GPUs its devices; repeat per pool "
                    "(replaces the file's pools; the other flags are every pool's settings).",
                )
                continue
            flag = "--" + _flag_name(None if section == "top" else section, name).replace("_", "-")
            dest = name if section == "top" else f"{section}.{name}"
            annotation = str(field.annotation)
            kwargs: dict[str, Any] = {"dest": dest, "default": argparse.SUPPRESS, "help": field.description}
            if annotation in ("<class 'bool'>", "bool | None"):
                kwargs.update(nargs="?", const=True, type=_bool_arg, metavar="BOOL")
            else:
                kwargs["metavar"] = name.upper()
            group.add_argument(flag, **kwargs)


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The config keys the user set on the command line (pydantic coerces the strings)."""
    skip = {"config", "command", "func"}
    overrides = {key: value for key, value in vars(args).items() if key not in skip and _is_config_key(key)}
    if "pools" in overrides:  # --pool texts, parsed here so that a bad one is a ConfigError (exit 2)
        overrides["pools"] = [p if isinstance(p, dict) else pool_from_flag(p) for p in overrides["pools"]]
    return overrides


def _is_config_key(key: str) -> bool:
    if "." in key:
        section, name = key.split(".", 1)
        return section in _SECTIONS and name in _SECTIONS[section].model_fields
    return key in ServeConfig.model_fields


def config_from_args(args: argparse.Namespace) -> ServeConfig:
    """Load --config and apply the flags given, as every command that takes config does."""
    return build_config(load_config_file(getattr(args, "config", None)), overrides_from_args(args))
