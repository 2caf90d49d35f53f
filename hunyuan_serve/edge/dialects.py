"""Each API's path prefixes and error shapes: the one table the replica and Nginx both answer from."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# A host's refusal of a caller without the peer secret, by the replica (auth.PeerCheck) and Nginx alike.
PEER_REFUSED = "only the gateway of this deployment may call this host (X-Hunyuan-Peer missing or wrong)"
# The request headers the APIs read that a page may set itself: the key (Bearer or DeepL-Auth-Key
# scheme), the body's type, the request id, the request's class (replica.priority.HEADER). Nginx's CORS
# preflight allows exactly these (Content-Length and Host are the browser's own, never preflighted).
REQUEST_HEADERS = ("Authorization", "Content-Type", "X-Request-ID", "X-Priority")
# The API reference: the OpenAPI document, its page and the page's files. The replicas serve them, Nginx
# routes them there, and no key is asked for them (the page fetches the document without one).
REFERENCE_SCHEMA = "/openapi.json"
REFERENCE_PAGE = "/docs"
REFERENCE_ASSETS = "/docs/assets/"


# -- dialects: the one table of path prefixes and error shapes (the app's and Nginx's) ------------


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
class Dialect:
    """One API's path prefixes, error shape and the statuses it uses for a missing and a wrong key."""

    name: str
    prefixes: tuple[str, ...]
    shape: Callable[[str, str, int], dict[str, Any]]
    missing_status: int = 401
    wrong_status: int = 403
    body_key: bool = False  # its key may come in the request body (LibreTranslate's api_key)
    missing_message: str = "an API key is required"
    wrong_message: str = "Invalid API key"

    def error(self, code: str, message: str, status: int | None = None) -> dict[str, Any]:
        """The error's body in this API's shape; `status` defaults to the edge table's for the code."""
        return self.shape(code, message, edge_status(code) if status is None else status)


# OpenAI answers 401 to a wrong key too (its clients raise AuthenticationError on it); LibreTranslate
# and DeepL answer 403 to both (what their clients expect); ours: 401 missing, 403 wrong.
NATIVE = Dialect("native", ("/translate", "/languages", "/metrics", "/memories", "/tmserver/"), _native)
OPENAI = Dialect("openai", ("/v1/",), _openai, 401, 401)
# LibreTranslate's own words (libretranslate/app.py, access_check) for a key it needs and a wrong one.
LIBRETRANSLATE = Dialect(
    "libretranslate",
    ("/libretranslate/",),
    _libretranslate,
    403,
    403,
    body_key=True,
    missing_message="Please contact the server operator to get an API key",
)
DEEPL = Dialect("deepl", ("/v2/", "/v3/"), _deepl, 403, 403)
DIALECTS = (NATIVE, OPENAI, LIBRETRANSLATE, DEEPL, Dialect("immersive", ("/immersive/translate",), _native))

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
# Each public path's methods, as the replicas' routes answer them (a test holds the two equal) and Nginx
# names them in the Allow of its own 405. {name} is one path segment, {name:path} the rest of the path.
ROUTE_METHODS: dict[str, tuple[str, ...]] = {
    "/health": ("GET",),
    "/metrics": ("GET",),
    "/fuse": ("POST",),
    "/translate": ("POST",),
    "/languages": ("GET",),
    "/memories": ("GET", "POST", "DELETE"),
    "/memories/export": ("GET",),
    "/memories/imports/{import_id}": ("DELETE",),
    "/tmserver/languages/": ("GET",),
    "/tmserver/{src}/{tgt}/unit/{text:path}": ("GET",),
    REFERENCE_SCHEMA: ("GET",),
    REFERENCE_PAGE: ("GET",),
    REFERENCE_ASSETS + "{name}": ("GET",),
    "/immersive/translate": ("POST",),
    "/v1/chat/completions": ("POST",),
    "/v1/completions": ("POST",),
    "/v1/models": ("GET",),
    "/v1/models/{model:path}": ("GET",),
    "/libretranslate/translate": ("POST",),
    "/libretranslate/detect": ("POST",),
    "/libretranslate/languages": ("GET",),
    "/libretranslate/translate_file": ("POST",),
    "/libretranslate/download_file/{name}": ("GET",),
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


def dialect_of(path: str) -> Dialect:
    """The dialect whose prefix the path starts with (ours for anything else)."""
    for dialect in DIALECTS:
        if any(path == p.rstrip("/") or path.startswith(p) for p in dialect.prefixes):
            return dialect
    return NATIVE
