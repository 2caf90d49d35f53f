"""The plain deployment users start from: one engine, one request at a time behind a lock, no Nginx."""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse

SAMPLING_KEYS = ("temperature", "top_p", "top_k", "repetition_penalty", "max_tokens")


class SerialEngine:
    """The replicas' own engine adapter, driven like a single Gradio/Flask process drives a model."""

    def __init__(self, model: str, device: str) -> None:
        from bench.targets import ENGINE, model_family, model_sampling
        from hunyuan_serve.config import ReplicaConfig
        from hunyuan_serve.replica.engine.vllm_engine import VllmEngine

        # The stack's engine settings on the device the bench chose, and the replicas' own choices
        # per device (float32 and eager on CPU, vLLM's defaults on GPU): only the serving differs.
        cfg = ENGINE.model_copy(update={"model": model, "device": device})
        self.engine = VllmEngine(cfg, model)
        self.family = model_family(model)
        # What a request gets for the sampling fields it leaves out, as a replica would answer it.
        self.defaults = {**model_sampling(model).as_dict(), "max_tokens": ReplicaConfig().max_tokens}
        self.lock = asyncio.Lock()

    async def start(self) -> None:
        await self.engine.start()

    async def translate(
        self, text: str, source: str, target: str, sampling: dict[str, Any]
    ) -> tuple[str, int]:
        from hunyuan_serve.families.build import build_prompt
        from hunyuan_serve.languages import find_language
        from hunyuan_serve.replica.engine.interface import Sampling

        prompt = build_prompt(self.family, find_language(source), find_language(target), text)
        # The lock is the baseline: one request through the model at a time, so nothing is batched.
        async with self.lock:
            out = await self.engine.generate(prompt, Sampling(**sampling), uuid.uuid4().hex)
        return out.text, out.output_tokens


def build_app(engine: SerialEngine) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        await engine.start()
        yield
        engine.engine.shutdown()

    app = FastAPI(lifespan=lifespan)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ready"}

    @app.post("/translate")
    async def translate(body: dict[str, Any]) -> JSONResponse:
        text = body.get("text")
        if not isinstance(text, str) or not text:
            return JSONResponse({"error": {"code": "bad_text", "message": "text is required"}}, 400)
        source = str(body.get("source_lang") or body.get("src_lang") or "en")
        target = str(body.get("target_lang") or body.get("tgt_lang") or "zh")
        sampling = dict(engine.defaults)
        sampling.update({k: body[k] for k in SAMPLING_KEYS if k in body})
        started = time.perf_counter()
        result, tokens = await engine.translate(text, source, target, sampling)
        return JSONResponse(
            {
                "result": result,
                "source_lang": source,
                "target_lang": target,
                "cached": False,
                "latency_ms": round((time.perf_counter() - started) * 1000, 1),
                "usage": {"completion_tokens": tokens},
            }
        )

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--device", choices=("cpu", "cuda"), required=True)
    args = parser.parse_args()
    import uvicorn

    app = build_app(SerialEngine(args.model, args.device))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
