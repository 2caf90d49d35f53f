"""`hunyuan-serve translate` run as a user runs it, timed from its first request to its last answer."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any


def main() -> int:
    """argv: TIMES_FILE, then the CLI's own arguments (translate ...). The CLI runs unchanged; only
    httpx's send is wrapped to note when each request left and its answer was read, so the start-up
    of the interpreter and its imports (the offline engines do not pay them either) stay out."""
    times_path, argv = Path(sys.argv[1]), sys.argv[2:]
    import httpx

    from hunyuan_serve.cli import main as cli

    spans: list[tuple[float, float]] = []
    cpu: list[float] = []  # this process's CPU seconds when each request left and each answer was read
    send = httpx.AsyncClient.send

    async def timed_send(self: httpx.AsyncClient, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        started = time.time()
        cpu.append(time.process_time())
        try:
            return await send(self, request, **kwargs)
        finally:
            spans.append((started, time.time()))
            cpu.append(time.process_time())

    httpx.AsyncClient.send = timed_send  # type: ignore[method-assign]
    began = time.time()
    code = cli(argv)
    figures = {
        "code": code,
        "requests": len(spans),
        "first": min((s for s, _ in spans), default=began),
        "last": max((e for _, e in spans), default=began),
        "cli_s": time.time() - began,
        "cpu_s": max(cpu, default=0.0) - min(cpu, default=0.0),
    }
    times_path.write_text(json.dumps(figures), encoding="utf-8")
    return code


if __name__ == "__main__":
    sys.exit(main())
