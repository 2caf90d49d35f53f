"""The edge sections: Nginx in front, API keys and peers, and the gateway over several hosts."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from hunyuan_serve.config.bad_keys import BadKeyFields
from hunyuan_serve.config.base import Section

# What an Nginx quoted string cannot hold as is (a variable, the quote, the end of the directive).
_UNQUOTABLE = re.compile(r"[\s\"'$;{}\\]")
_ORIGIN = re.compile(r"^https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?$|^https?://\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$")


class NginxConfig(Section):
    """The public front: Nginx in its own prefix with a rendered config."""

    binary: str = Field("nginx", description="Nginx executable.")
    listen: str = Field("127.0.0.1", description="Address Nginx listens on.")
    port: int = Field(8080, ge=1, le=65535, description="Public port clients use.")
    worker_processes: int | Literal["auto"] = Field("auto", description="Nginx worker processes.")
    worker_connections: int = Field(
        4096,
        ge=16,
        description="Connections per Nginx worker beyond two for each request its replicas hold "
        "(max_conns a replica, or with no cap what its admission takes): the client's and the replica's.",
    )
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
    # While no replica is ready (`up` starting, a lone replica restarting) a request waits instead of
    # getting the 503 at once: Weblate switches a backend that answers 503 off for 30 minutes.
    hold_s: float = Field(
        30.0,
        ge=0,
        description="How long a request that finds no replica of its pool ready waits for one before the "
        "503 (`up`, with njs at js_module); a pool whose replicas are all full still refuses at once. "
        "0: never held, the 503 at once.",
    )
    hold_poll_s: float = Field(
        0.25, gt=0, description="How often a held request looks for a ready replica (hold_s)."
    )
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
        "replica Nginx itself answers the 503); None: what the replica runs and queues "
        "(replica.max_in_flight + replica.max_queued), or with max_queued 0 what its engine batches "
        "(engine.max_num_seqs, on CPU at most cpu_max_conns), at most max_in_flight; 0: no cap.",
    )
    # At the edge too bulk is refused first, so a file job cannot take the places people wait for.
    # Nginx tells bulk by the X-Priority header only (the body's priority field, a batch's text count
    # and a key's default are the replica's to read).
    bulk_cap: bool = Field(
        True,
        description="Cap X-Priority: bulk requests per pool at its ready replicas' max_conns less "
        "replica.interactive_reserve (past it Nginx answers 503 overloaded, interactive work still "
        "gets in); False: the edge does not tell the classes apart. No cap where max_conns is 0.",
    )
    # A CPU engine's throughput stops growing long before 256 sequences (make bench: two CPU replicas of
    # the tiny model serve about 75 req/s from ~35 in flight each on); what waits inside a replica past
    # that only waits longer, where the edge can no longer refuse it. 128 still takes the bench's
    # 100-user closed loop on one replica without refusing (`python -m bench overload` measures the edge).
    cpu_max_conns: int = Field(
        128,
        ge=1,
        description="Sequences a CPU engine is counted to batch (X-Hunyuan-Bulk-Texts; max_conns of a CPU "
        "replica when max_conns is unset and replica.max_queued is 0).",
    )
    # Nginx shares the cores with engines that spin while they wait: at the same priority its workers
    # wait for a core, and an edge refusal with them. A negative value needs root (or CAP_SYS_NICE):
    # without it Nginx logs setpriority's failure and runs at 0. Where the kernel shares CPU time out by
    # session first (autogroup, on by default in kernels built with it), Nginx's session of its own (it
    # daemonizes) limits this to its workers against its master (docs/operations.md, "What a burst gets").
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
        description="Nginx's njs module (Debian's libnginx-mod-http-js), loaded with several pools, where "
        "it routes each request by its body's model, and for hold_s (without it no request is held).",
    )
    # TLS at the edge (docs/tls.md): both files set, Nginx serves HTTPS on tls_port; doctor and `up`
    # check the pair first (edge/tls.py), and `reload` has Nginx read the files again (renewals).
    tls_cert: str | None = Field(
        None, description="PEM certificate (leaf first, then its chain) served on tls_port; needs tls_key."
    )
    tls_key: str | None = Field(
        None, description="PEM private key of tls_cert, unencrypted; `up` refuses one others may read."
    )
    tls_port: int = Field(
        8443, ge=1, le=65535, description="Port of the TLS listener (HTTP/2; TLS 1.2 and 1.3) with tls_cert."
    )
    plain_http: Literal["serve", "redirect", "off"] = Field(
        "redirect",
        description="With TLS on, what the plain port does for callers off this host: serve them, redirect "
        "them (308 to https, path and query kept) or off (a wildcard listen binds loopback only, others "
        "are closed on). This host's own processes (loopback, nginx.listen) keep it either way.",
    )
    hsts_max_age_s: int = Field(
        0, ge=0, description="Strict-Transport-Security max-age sent over TLS; 0: no HSTS header."
    )
    tls_host: str | None = Field(
        None,
        description="The name clients reach the TLS port by, which tls_cert's names must cover (doctor, "
        "`up`); unset: nginx.listen when it is one specific address, else no name is checked.",
    )

    @field_validator("tls_cert", "tls_key")
    @classmethod
    def _tls_file(cls, value: str | None) -> str | None:
        # Nginx reads it from its own prefix, and the path goes into its config as a quoted string.
        if value and _UNQUOTABLE.search(value):
            raise ValueError(f"{value!r}: a path with a quote, '$', ';', braces or whitespace")
        return str(Path(value).expanduser().absolute()) if value else None

    @model_validator(mode="after")
    def _tls_pair(self) -> NginxConfig:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("nginx.tls_cert and nginx.tls_key are set together (TLS needs both)")
        if self.tls_cert and self.tls_port in (self.port, self.status_port):
            raise ValueError(f"nginx.tls_port {self.tls_port} is also nginx.port or nginx.status_port")
        return self

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


class AuthConfig(BadKeyFields):
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
    # replicas, the supervisor's probes and the host's own Nginx check (hunyuan_serve/auth/).
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
    reload_wait_timeout_s: float = Field(
        60.0, gt=0, description="Longest `gateway reload` waits for the reload's outcome."
    )
    # Hosts serving different models behind one front would answer the same request differently (and
    # a client's cache is keyed by the model the front names): set it to route only hosts serving it.
    model: str | None = Field(
        None,
        description="Route only hosts whose listing names this served model (unset: any, and a mix of "
        "models is reported as an event models_differ and in /health).",
    )
