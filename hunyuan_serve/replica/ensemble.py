"""An ensemble's fusion: each text's candidates to the Chimera pool (POST /fuse), or why it could not fuse."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx
from starlette.requests import Request

from hunyuan_serve import auth
from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.replica.engine.interface import Generation
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.schema import TranslateRequest

FUSE_PATH = "/fuse"
FUSION_HEADER = "X-Hunyuan-Fusion"
_UNSAFE = re.compile(r"[^\x20-\x7e]+")  # a header value is latin-1 text on one line: the reason is ASCII


@dataclass(frozen=True)
class Fused:
    """One text's ensemble answer: the fusion, or (fused_by None) its first candidate and why not fused."""

    result: str
    candidates: tuple[str, ...]
    fused_by: str | None
    reason: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"result": self.result, "candidates": list(self.candidates), "fused_by": self.fused_by}


def fused(candidates: Sequence[str], answer: Any) -> Fused:
    """The Chimera's 200 answer ({"result", "model", ...}), or a failure when it is not that shape."""
    if not isinstance(answer, dict) or not isinstance(answer.get("result"), str):
        return unfused(candidates, "the Chimera pool answered 200 without a result")
    model = answer.get("model")
    return Fused(answer["result"], tuple(candidates), model if isinstance(model, str) else "")


def unfused(candidates: Sequence[str], reason: str) -> Fused:
    """The degraded answer: the first candidate (the translation model's own first sample)."""
    return Fused(candidates[0], tuple(candidates), None, reason)


def refusal_reason(response: httpx.Response) -> str:
    """Why a non-200 answer of the Chimera pool did not fuse: its status and, when it says, its error code."""
    code = ""
    try:
        error = response.json().get("error")
        code = str(error.get("code", "")) if isinstance(error, dict) else ""
    except (ValueError, AttributeError):
        pass  # not our error shape (a proxy's page, say): the status says enough
    return f"HTTP {response.status_code}" + (f" {code}" if code else "")


def fusion_header(answers: Sequence[Fused]) -> dict[str, str]:
    """X-Hunyuan-Fusion: `fused; by=NAME`, or `degraded; reason=...` naming the first text's failure."""
    failed = [each for each in answers if each.fused_by is None]
    if failed:
        reason = _UNSAFE.sub(" ", failed[0].reason)[:200]
        return {FUSION_HEADER: f"degraded; texts={len(failed)}/{len(answers)}; reason={reason}"}
    return {FUSION_HEADER: f"fused; by={_UNSAFE.sub(' ', answers[0].fused_by or '')}"}


def answer_fields(batch: bool, answers: Sequence[Fused]) -> dict[str, Any]:
    """The ensemble part of a /translate answer: result, candidates, fused_by; a batch: one such per text."""
    if batch:
        return {"results": [each.as_dict() for each in answers]}
    return answers[0].as_dict()


def refuse_if_degraded(cfg: ReplicaConfig, answers: Sequence[Fused]) -> None:
    """With chimera_failure refuse, a text that was not fused makes the request a 503."""
    failed = [each for each in answers if each.fused_by is None]
    if failed and cfg.chimera_failure == "refuse":
        raise ApiError(
            503,
            "fusion_unavailable",
            f"the Chimera pool at {cfg.chimera_url} did not fuse the candidates: {failed[0].reason}",
            {"Retry-After": str(cfg.retry_after_s)},
        )


def caller_key(request: Request) -> str | None:
    """The API key the request was let in with (header, ?token= or LibreTranslate's body api_key, as the
    key check found it), sent on to the Chimera pool, whose replicas check keys too."""
    found = request.scope.get("state", {}).get(auth.KEY_STATE)
    return (
        found
        if isinstance(found, str)
        else auth.request_key(request.headers, request.scope.get("query_string", b""))
    )


class Fusion:
    """The keep-alive client to the Chimera pool: opened with the app, closed at its shutdown."""

    def __init__(self, cfg: ReplicaConfig, headers: Mapping[str, str] | None = None) -> None:
        self.cfg = cfg
        # Sent with every fusion: the peer secret, where the hosts have one (the Chimera pool's Nginx
        # and replicas refuse a call without it).
        self.headers = dict(headers or {})
        self._client: httpx.AsyncClient | None = None
        # Bounded: one 64-text batch must not put 64 fusions on the Chimera pool at once (past its
        # max_in_flight every ensemble of every caller would degrade).
        self._turns = asyncio.Semaphore(cfg.chimera_max_concurrency)

    def open(self) -> None:
        if self.cfg.chimera_url and self._client is None:
            timeout = httpx.Timeout(self.cfg.chimera_timeout_s, connect=self.cfg.chimera_connect_timeout_s)
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=self.cfg.chimera_keepalive)
            # trust_env off: a proxy set for the clients' side must not sit between two replicas.
            self._client = httpx.AsyncClient(
                base_url=self.cfg.chimera_url,
                timeout=timeout,
                limits=limits,
                trust_env=False,
                headers=self.headers,
            )

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def fuse_all(
        self,
        req: TranslateRequest,
        candidates: Sequence[Sequence[str]],
        request_id: str,
        key: str | None = None,
    ) -> list[Fused]:
        """Every text's fusion at once, each answered or degraded on its own; key: the caller's API key,
        sent on (the Chimera's replicas check keys as the translation replica did)."""
        calls = (self.fuse(req, index, each, request_id, key) for index, each in enumerate(candidates))
        return list(await asyncio.gather(*calls))

    async def fuse(
        self,
        req: TranslateRequest,
        index: int,
        candidates: Sequence[str],
        request_id: str,
        key: str | None = None,
    ) -> Fused:
        """One text's fusion; a connection error, timeout or non-200 answer is a degraded Fused."""
        self.open()
        assert self._client is not None, "fuse() needs chimera_url (schema refuses an ensemble without it)"
        body = {
            "source_lang": req.source.code,
            "target_lang": req.target.code,
            "text": req.texts[index],
            "candidates": list(candidates),
            "max_tokens": req.sampling.max_tokens,  # the fusion is about as long as a candidate
        }
        headers = {"X-Request-ID": f"{request_id}-fuse{index}"}
        if key is not None:
            headers["Authorization"] = f"Bearer {key}"
        try:
            async with self._turns:
                response = await self._client.post(FUSE_PATH, json=body, headers=headers)
        except httpx.TimeoutException as err:
            return unfused(
                candidates,
                f"timeout ({type(err).__name__}, chimera_timeout_s={self.cfg.chimera_timeout_s:g})",
            )
        except httpx.HTTPError as err:
            return unfused(candidates, f"unreachable ({type(err).__name__})")
        if response.status_code != 200:
            return unfused(candidates, refusal_reason(response))
        try:
            return fused(candidates, response.json())
        except ValueError:
            return unfused(candidates, "the Chimera pool answered 200 with a body that is not JSON")


def candidates_generation(samples: list[Generation]) -> Generation:
    """An ensemble's samples as one Generation: their texts as a JSON list, so the cache and the
    coalescing of identical requests keep them as they keep one answer; tokens summed, times the longest."""
    return Generation(
        text=json.dumps([each.text for each in samples], ensure_ascii=False),
        prompt_tokens=samples[0].prompt_tokens,  # one prompt, prefilled once for all of them
        output_tokens=sum(each.output_tokens for each in samples),
        finish_reason=samples[0].finish_reason,
        queue_s=max(each.queue_s for each in samples),
        engine_s=max(each.engine_s for each in samples),
    )
