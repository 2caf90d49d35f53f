"""What an operation takes and may answer, as each API module declares it for the OpenAPI document."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from hunyuan_serve.replica.context import ReplicaContext
from hunyuan_serve.replica.usage import QUOTA_EXCEEDED

Schema = dict[str, Any]
BodyOf = Callable[[ReplicaContext], Schema]
JSON = "application/json"
FORM = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"
SSE = "text/event-stream"
OCTETS = "application/octet-stream"
Refusals = tuple[tuple[int, str], ...]
# What every admitted request may meet (admission/gate.py): not ready, overloaded, the engine failed.
GATE: Refusals = ((503, "overloaded"),)
# Reading a body (read_body, decode_body): too large, not UTF-8 JSON, not an object.
BODY: Refusals = ((413, "body_too_large"), (400, "invalid_json"), (422, "invalid_request"))
# Translating it under the deadline (guarded, request_fault), billed per key (Usage.check).
WORK: Refusals = ((504, "deadline_exceeded"), (400, "invalid_request"), (429, QUOTA_EXCEEDED))
# A translation's refusals; the compatible APIs' add a text too long.
TRANSLATE: Refusals = (*GATE, *BODY, *WORK, (400, "unsupported_language"), (413, "too_many_texts"))
COMPAT: Refusals = (*TRANSLATE, (413, "text_too_long"))
COMPAT_MEDIA = (JSON, FORM)
# What reads or writes the shared store (glossaries, usage, documents, memories).
STORE: Refusals = ((503, "store_unavailable"),)
GLOSSARY_CALL: Refusals = (*GATE, *STORE, (400, "invalid_request"), (404, "glossary_not_found"))
DOCUMENT_CALL: Refusals = (*GATE, *STORE, (400, "invalid_request"), (404, "document_not_found"))
MEMORY_CALL: Refusals = (*GATE, *STORE, (400, "invalid_request"))


@dataclass(frozen=True)
class Op:
    """What one operation takes and may answer: its body (by media type), its own refusals, successes."""

    body: BodyOf | None = None
    media: tuple[str, ...] = (JSON,)
    errors: Refusals = ()
    gated: bool = True
    success: Mapping[int, tuple[str, ...]] = field(default_factory=lambda: {200: (JSON,)})
    params: tuple[Schema, ...] = ()
    edge: bool = True  # behind the key check and Nginx's limits and refusals
    checked: bool = False  # a translation: its answer checks' summary in X-Hunyuan-QA (replica/review.py)
    creates: str = ""  # the field of its 201 body naming what it made: linked to the paths under it


# Each API module's operations: (method, the path as the document names it) -> what it takes and answers.
Operations = Mapping[tuple[str, str], Op]
