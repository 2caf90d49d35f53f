"""The service's request bodies and answers as the clients send and read them, and their HTTP options."""

from __future__ import annotations

import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from hunyuan_serve.client.settings import ClientSettings, parse_retry_after
from hunyuan_serve.localization.answers import QaFlag, TranslateError, Translation

# A glossary the service applies itself: {term: translation}, or [{"source": term, "target": translation}].
Terms = Mapping[str, str] | Sequence[Mapping[str, str]]


@dataclass(frozen=True)
class ServedLanguage:
    """A language as the service lists it (`GET /languages`)."""

    code: str
    name: str
    native_name: str = ""


@dataclass(frozen=True)
class Instructions:
    """What the service is told besides the text; each field is sent only when given."""

    glossary: Terms | None = None
    context: str | None = None  # the text that comes before, for the family's contextual prompt
    style: str | None = None  # the style the translation should take (families with a style prompt)

    def fields(self) -> dict[str, Any]:
        """The /translate body fields: a mapping glossary as an object, a list as a list of objects."""
        fields: dict[str, Any] = {}
        if self.glossary:
            glossary = self.glossary
            fields["glossary"] = (
                dict(glossary) if isinstance(glossary, Mapping) else [dict(t) for t in glossary]
            )
        fields.update(
            {key: value for key, value in (("context", self.context), ("style", self.style)) if value}
        )
        return fields


def payload(
    texts: str | Sequence[str],
    target: str,
    source: str | None,
    options: Mapping[str, Any] | None,
    instructions: Instructions,
) -> dict[str, Any]:
    body: dict[str, Any] = {"text": texts} if isinstance(texts, str) else {"texts": list(texts)}
    body["target_lang"] = target
    if source:
        body["source_lang"] = source
    body.update(instructions.fields())
    body.update({k: v for k, v in (options or {}).items() if v is not None})
    return body


def error_from_response(response: httpx.Response) -> TranslateError:
    """The service's {"error": {"code", "message"}} as an exception (or the raw body when not JSON)."""
    retry_after = parse_retry_after(response.headers.get("Retry-After"))
    code, message = "http_error", response.text.strip()[:500] or response.reason_phrase
    try:
        data = response.json()
    except ValueError:
        data = None
    if isinstance(data, dict) and isinstance(data.get("error"), dict):
        code = str(data["error"].get("code", code))
        message = str(data["error"].get("message", message))
    elif isinstance(data, dict) and "detail" in data:
        message = str(data["detail"])
    return TranslateError(response.status_code, code, message, retry_after)


def refuses_qa(error: TranslateError) -> bool:
    """Whether the service refused the request's `qa` field as unknown (it predates the QA checks)."""
    return error.status in (400, 422) and error.code == "unknown_field" and "qa" in error.message


def parse_batch(response: httpx.Response, texts: Sequence[str]) -> list[Translation]:
    data = response.json()
    results = data.get("results") if isinstance(data, dict) else None
    if not isinstance(results, list) or len(results) != len(texts):
        raise TranslateError(response.status_code, "bad_response", f"expected {len(texts)} results")
    cached = data.get("cached")
    flags = cached if isinstance(cached, list) and len(cached) == len(texts) else [False] * len(texts)
    qa = data.get("qa")
    checks = [parse_qa(item) for item in qa] if isinstance(qa, list) and len(qa) == len(texts) else None
    memory = data.get("memory")
    kinds = [str(m) for m in memory] if isinstance(memory, list) and len(memory) == len(texts) else None
    return [
        Translation(
            text,
            str(result),
            bool(flag),
            data.get("latency_ms"),
            data.get("request_id"),
            None if checks is None else checks[index],
            "" if kinds is None else kinds[index],
        )
        for index, (text, result, flag) in enumerate(zip(texts, results, flags, strict=True))
    ]


def parse_lookup(response: httpx.Response, texts: Sequence[str]) -> tuple[dict[str, str], bool]:
    """POST /memories/lookup's answer: each text the memory holds, with its target (null: none), and
    whether the caller has a memory of the pair at all."""
    data = response.json()
    found = data.get("translations") if isinstance(data, dict) else None
    if not isinstance(found, list) or len(found) != len(texts):
        raise TranslateError(response.status_code, "bad_response", f"expected {len(texts)} translations")
    pairs = {text: str(target) for text, target in zip(texts, found, strict=True) if target is not None}
    return pairs, bool(data.get("memory", True))


def parse_one(response: httpx.Response, text: str) -> Translation:
    data = response.json()
    if not isinstance(data, dict) or not isinstance(data.get("result"), str):
        raise TranslateError(response.status_code, "bad_response", "no 'result' in the response")
    return Translation(
        text,
        data["result"],
        bool(data.get("cached")),
        data.get("latency_ms"),
        data.get("request_id"),
        parse_qa(data.get("qa")),
        str(data.get("memory") or ""),
    )


def parse_qa(value: Any) -> tuple[QaFlag, ...] | None:
    """A text's `qa` list of {"check", "detail"} as flags; None when absent or not a list (unchecked).

    A service that predates QA sends none; an entry of another shape is kept by what it names.
    """
    if not isinstance(value, list):
        return None
    flags = []
    for item in value:
        if isinstance(item, dict) and item.get("check"):
            flags.append(QaFlag(str(item["check"]), str(item.get("detail") or "")))
        elif isinstance(item, str) and item:
            flags.append(QaFlag(item))
    return tuple(flags)


def parse_languages(response: httpx.Response) -> list[ServedLanguage]:
    data = response.json()
    return [
        ServedLanguage(
            str(item["code"]), str(item.get("name", item["code"])), str(item.get("native_name", ""))
        )
        for item in data.get("languages", [])
    ]


def http_options(settings: ClientSettings) -> dict[str, Any]:
    headers = {"User-Agent": settings.user_agent, "X-Priority": settings.priority}
    if settings.api_key is not None:
        headers["Authorization"] = f"Bearer {settings.api_key.get_secret_value()}"
    options: dict[str, Any] = {}
    if settings.ca_file is not None:
        # httpx's verify=<path> is deprecated; a context also keeps SSL_CERT_FILE from overriding it.
        options["verify"] = ssl.create_default_context(cafile=settings.ca_file)
    return {
        **options,
        "base_url": settings.base_url,
        "timeout": httpx.Timeout(
            connect=settings.connect_timeout_s,
            read=settings.read_timeout_s,
            write=settings.write_timeout_s,
            pool=settings.pool_timeout_s,
        ),
        "limits": httpx.Limits(
            max_connections=settings.max_connections,
            max_keepalive_connections=settings.max_keepalive_connections,
            keepalive_expiry=settings.keepalive_expiry_s,
        ),
        "headers": headers,
    }
