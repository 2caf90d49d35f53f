"""Each API declared once (routes, error shape, statuses, keys, modules): what the replica and Nginx read."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

# A host's refusal of a caller without the peer secret, by the replica (auth.PeerCheck) and Nginx alike.
PEER_REFUSED = "only the gateway of this deployment may call this host (X-Hunyuan-Peer missing or wrong)"
# The request headers the APIs read that a page may set itself: the key (Bearer or DeepL-Auth-Key
# scheme), the body's type, the request id, the request's class (replica.admission.priority.HEADER).
# Nginx's CORS preflight allows exactly these (Content-Length and Host are the browser's own, never
# preflighted).
REQUEST_HEADERS = ("Authorization", "Content-Type", "X-Request-ID", "X-Priority")
# The API reference: the OpenAPI document, its page and the page's files. The replicas serve them, Nginx
# routes them there, and no key is asked for them (the page fetches the document without one).
REFERENCE_SCHEMA = "/openapi.json"
REFERENCE_PAGE = "/docs"
REFERENCE_ASSETS = "/docs/assets/"


# -- dialects: each API's declaration, read by the replica, the key check, OpenAPI and Nginx ---------


def _native(code: str, message: str, _status: int) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}}


# OpenAI's error `type` by status, and the codes whose type OpenAI gives otherwise (a wrong key is an
# invalid_request_error with code invalid_api_key in its API reference).
_OPENAI_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}
_OPENAI_CODE_TYPES = {"invalid_api_key": "invalid_request_error", "peer_refused": "invalid_request_error"}


def _openai(code: str, message: str, status: int) -> dict[str, Any]:
    """OpenAI's shape, for the replica's answers and Nginx's alike: always all four fields, `param`
    naming the field at fault (`model` for an unknown model, as OpenAI answers it) or null."""
    kind = _OPENAI_CODE_TYPES.get(code) or _OPENAI_TYPES.get(status)
    kind = kind or ("server_error" if status >= 500 else "invalid_request_error")
    param = "model" if code == "model_not_found" else None
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _libretranslate(_code: str, message: str, _status: int) -> dict[str, Any]:
    return {"error": message}


def _deepl(_code: str, message: str, _status: int) -> dict[str, Any]:
    return {"message": message}


@dataclass(frozen=True)
class Keys:
    """How one API's clients send their key, and how it refuses a missing or a wrong one."""

    # Authorization schemes whose credential is the key itself (Nginx's key map reads these too).
    schemes: tuple[str, ...] = ("Bearer",)
    basic: bool = False  # Basic's password is the key (a client that takes only a URL with name:KEY@)
    body: bool = False  # the key may come in the request body (LibreTranslate's api_key)
    open: tuple[str, ...] = ()  # its routes that ask for no key
    missing_status: int = 401
    wrong_status: int = 403
    missing_code: str = "missing_api_key"
    missing_message: str = "an API key is required"
    wrong_message: str = "Invalid API key"


@dataclass(frozen=True)
class Dialect:
    """One API, declared once: its path prefixes and routes (path: methods), its error shape, the status
    it answers each refusal with, how its key comes and is refused, headers on every error it answers,
    and the replica modules that serve it. The replica's routers and error answers, the key check, the
    OpenAPI document and Nginx's config (its locations, error bodies, key map, Allow) all read these
    declarations."""

    name: str
    prefixes: tuple[str, ...]
    shape: Callable[[str, str, int], dict[str, Any]]
    routes: Mapping[str, tuple[str, ...]]
    statuses: Mapping[int, int] = field(default_factory=dict)  # the core's status: this API's
    code_statuses: Mapping[str, int] = field(default_factory=dict)  # by code, before `statuses`
    keys: Keys = Keys()
    headers: Mapping[str, str] = field(default_factory=dict)
    routed: tuple[str, ...] = ()  # its routes that name a model: routed by model with several pools
    # The replica modules serving its routes, by name (the edge imports none of them): each exports its
    # ROUTERS, which the replica's app mounts, and its OPERATIONS, what the OpenAPI document says of each.
    modules: tuple[str, ...] = ()

    def error(self, code: str, message: str, status: int | None = None) -> dict[str, Any]:
        """The error's body in this API's shape; `status` defaults to the edge table's for the code."""
        return self.shape(code, message, edge_status(code) if status is None else status)

    def status_of(self, code: str, status: int) -> int:
        """The status this API answers a refusal of the core's status and code with."""
        return self.code_statuses.get(code, self.statuses.get(status, status))


# LibreTranslate answers every refusal of the input as 400 (libretranslate/app.py abort(400, ...)) and
# a key past its limits as 403; a busy replica's 503 and a deadline's 504 keep theirs, so Nginx retries
# and clients back off as elsewhere; a document too large keeps its 413. OpenAI and DeepL have no 422.
_AS_400 = {413: 400, 422: 400}
# The code of a refusal past a key's character limit (replica/usage.py), which each API answers its way.
QUOTA_EXCEEDED = "quota_exceeded"
# DeepL's "Quota exceeded. The character limit has been reached." (the deepl client: QuotaExceededException).
DEEPL_QUOTA_STATUS = 456

# The routes that are no API's own (health, the Chimera fusion, the API reference) answer natively.
NATIVE = Dialect(
    "native",
    ("/translate", "/languages", "/metrics", "/memories", "/tmserver/"),
    _native,
    {
        "/health": ("GET",),
        "/metrics": ("GET",),
        "/fuse": ("POST",),
        "/translate": ("POST",),
        "/languages": ("GET",),
        "/memories": ("GET", "POST", "DELETE"),
        "/memories/export": ("GET",),
        "/memories/lookup": ("POST",),
        "/memories/imports/{import_id}": ("DELETE",),
        "/tmserver/languages/": ("GET",),
        "/tmserver/{src}/{tgt}/unit/{text:path}": ("GET",),
        REFERENCE_SCHEMA: ("GET",),
        REFERENCE_PAGE: ("GET",),
        REFERENCE_ASSETS + "{name}": ("GET",),
    },
    # Weblate's tmserver machinery takes only a URL: its key comes as https://name:KEY@host/...
    keys=Keys(basic=True, open=("/health", REFERENCE_SCHEMA, REFERENCE_PAGE, REFERENCE_ASSETS + "{name}")),
    routed=("/translate",),
    modules=(
        "hunyuan_serve.replica.ops",
        "hunyuan_serve.replica.apis.native",
        "hunyuan_serve.replica.apis.memories",
        "hunyuan_serve.replica.apis.tmserver",
        "hunyuan_serve.replica.openapi.reference",
    ),
)
# OpenAI answers 401 to a wrong key too (its clients raise AuthenticationError on it), and names both
# cases invalid_api_key.
OPENAI = Dialect(
    "openai",
    ("/v1/",),
    _openai,
    {
        "/v1/chat/completions": ("POST",),
        "/v1/completions": ("POST",),
        "/v1/models": ("GET",),
        "/v1/models/{model:path}": ("GET",),
    },
    statuses={422: 400},
    keys=Keys(wrong_status=401, missing_code="invalid_api_key"),
    routed=("/v1/chat/completions", "/v1/completions"),
    modules=("hunyuan_serve.replica.apis.openai",),
)
# LibreTranslate answers 403 to both (what its clients expect), in its own words (libretranslate/app.py,
# access_check); its language list needs no key there, and Weblate's backend reads it without its api_key
# (weblate/machinery/libretranslate.py, download_languages). Its CORS header is on every answer (its
# after_request); Nginx hides it and sets its own (nginx.cors_origins).
LIBRETRANSLATE = Dialect(
    "libretranslate",
    ("/libretranslate/",),
    _libretranslate,
    {
        "/libretranslate/translate": ("POST",),
        "/libretranslate/detect": ("POST",),
        "/libretranslate/languages": ("GET",),
        "/libretranslate/translate_file": ("POST",),
        "/libretranslate/download_file/{name}": ("GET",),
    },
    statuses=_AS_400,
    code_statuses={QUOTA_EXCEEDED: 403, "document_too_large": 413},
    keys=Keys(
        body=True,
        open=("/libretranslate/languages",),
        missing_status=403,
        missing_message="Please contact the server operator to get an API key",
    ),
    headers={"Access-Control-Allow-Origin": "*"},
    modules=("hunyuan_serve.replica.apis.libretranslate",),
)
# DeepL answers 403 to a missing and a wrong key alike, and its clients send DeepL-Auth-Key.
DEEPL = Dialect(
    "deepl",
    ("/v2/", "/v3/"),
    _deepl,
    {
        "/v2/translate": ("POST",),
        "/v2/languages": ("GET", "POST"),
        "/v2/usage": ("GET", "POST"),
        "/v2/glossaries": ("GET", "POST"),
        "/v2/glossaries/{glossary_id}": ("GET", "DELETE"),
        "/v2/glossaries/{glossary_id}/entries": ("GET",),
        "/v2/glossary-language-pairs": ("GET",),
        "/v2/document": ("POST",),
        "/v2/document/{document_id}": ("POST",),
        "/v2/document/{document_id}/result": ("POST",),
        "/v3/languages": ("GET",),
        "/v3/glossaries": ("GET", "POST"),
        "/v3/glossaries/{glossary_id}": ("GET", "DELETE"),
        "/v3/glossaries/{glossary_id}/entries": ("GET",),
    },
    statuses={422: 400},
    code_statuses={QUOTA_EXCEEDED: DEEPL_QUOTA_STATUS},
    keys=Keys(schemes=("DeepL-Auth-Key",), missing_status=403),
    modules=("hunyuan_serve.replica.apis.deepl",),
)
IMMERSIVE = Dialect(
    "immersive",
    ("/immersive/translate",),
    _native,
    {"/immersive/translate": ("POST",)},
    modules=("hunyuan_serve.replica.apis.immersive",),
)
DIALECTS = (NATIVE, OPENAI, LIBRETRANSLATE, DEEPL, IMMERSIVE)
# Each public path's methods, as the replicas' routes answer them (a test holds the two equal) and Nginx
# names them in the Allow of its own 405. {name} is one path segment, {name:path} the rest of the path.
ROUTE_METHODS: dict[str, tuple[str, ...]] = {p: m for d in DIALECTS for p, m in d.routes.items()}
# The Authorization schemes whose credential is the key, of every API: read on every path, so a client
# pointed at another API's path still gets that API's answer rather than a key refusal.
KEY_SCHEMES = tuple(dict.fromkeys(s.lower() for d in DIALECTS for s in d.keys.schemes))
BASIC_KEY = any(d.keys.basic for d in DIALECTS)

# The errors Nginx makes itself, each with its status; edge.render renders them once per dialect.
EDGE_ERRORS = {
    "unavailable": (503, "no replica can take this request now (none ready, or all busy); retry later"),
    "upstream_timeout": (504, "no replica answered in time"),
    "body_too_large": (413, "request body exceeds {limit}"),
    "rate_limited": (429, "too many requests for this key or client; retry later"),
    "peer_refused": (403, PEER_REFUSED),
}
# Made by Nginx only in front of several pools (routing by model, edge/templates/route.js), which puts
# the model asked for in place of {model}.
POOL_ERRORS = {
    "model_not_found": (404, "the model '{model}' is not served here; GET /v1/models lists those served"),
}

# The bulk cap's refusal (edge_bulk_conns), with the replica's own code for a refused overload, so a
# client handles both alike: a 503 overloaded with Retry-After.
BULK_ERRORS = {
    "overloaded": (
        503,
        "bulk work is at this pool's cap (its replicas' slots less the share kept for interactive "
        "requests); retry later",
    ),
}


# Nginx's own refusals of what no location takes: a path nothing serves, a method a path does not take
# (TRACE, which Nginx refuses itself, or one its own locations do not answer), with the path's Allow.
ROUTING_ERRORS = {
    "not_found": (404, "nothing is served at this path; GET /openapi.json lists the API's paths"),
    "method_not_allowed": (405, "this path does not take this method; the Allow header lists those it does"),
}


def allow_header(methods: tuple[str, ...]) -> str:
    """The Allow of a path of these methods: HEAD with GET, as the replicas' routes answer it."""
    named = [*methods, *(["HEAD"] if "GET" in methods else [])]
    return ", ".join(named)


def edge_status(code: str) -> int:
    """The status of an error Nginx makes itself (EDGE_ERRORS, POOL_ERRORS, BULK_ERRORS); 500 for any
    other code."""
    return {**EDGE_ERRORS, **POOL_ERRORS, **BULK_ERRORS}.get(code, (500, ""))[0]


# The replicas' own route to one pool (/_hs/pool/NAME/) refuses every other caller with this, natively.
INTERNAL_ONLY = "only this host's own processes (or a caller with the peer secret) may use /_hs/pool/"


def path_regex(path: str) -> str:
    """A route's path template as a regex (Python's and Nginx's): {name} one segment, {name:path} the rest."""
    parts = re.split(r"(\{[^}]+\})", path)
    return "".join(
        (".+" if p.endswith(":path}") else "[^/]+") if p.startswith("{") else re.escape(p) for p in parts
    )


_OPEN = re.compile("|".join(f"(?:{path_regex(p)})" for d in DIALECTS for p in d.keys.open))


def is_open(path: str) -> bool:
    """Whether a path is one of the routes that ask for no key (each API's `keys.open`)."""
    return _OPEN.fullmatch(path) is not None


def dialect_of(path: str) -> Dialect:
    """The dialect whose prefix the path starts with (ours for anything else)."""
    for dialect in DIALECTS:
        if any(path == p.rstrip("/") or path.startswith(p) for p in dialect.prefixes):
            return dialect
    return NATIVE
