"""A long Markdown document through a running service: `translate` (batched, fanned out) vs one at a time.

Prints segments/s and wall time for both and writes them as JSON (a row for the report). The document
is built from the bench's real UI strings (Stable Diffusion WebUI's, MIT), several sentences a paragraph,
so it runs tens of pages with no two sentences alike (the client sends a repeated sentence once).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/documents.py` as well as `python -m bench.documents`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hunyuan_serve.client.api import AsyncTranslateClient
from hunyuan_serve.client.command import main as translate_main
from hunyuan_serve.client.formats import Options, parse
from hunyuan_serve.client.settings import ClientSettings

DATA = Path(__file__).resolve().parent / "data" / "sd-webui-zh_CN.json"


def build_document(sentences: int, skip: int = 0) -> str:
    """Headings every ten paragraphs, four sentences a paragraph, each a distinct UI string (after skip)."""
    keys = [
        k.strip().rstrip(".") for k in json.loads(DATA.read_text(encoding="utf-8")) if len(k.split()) >= 3
    ]
    chosen = list(dict.fromkeys(keys))[skip : skip + sentences]
    parts: list[str] = []
    for index in range(0, len(chosen), 4):
        if index % 40 == 0:
            parts.append(f"## Part {index // 40 + 1}")
        parts.append(" ".join(f"{text}." for text in chosen[index : index + 4]))
    return "\n\n".join(parts) + "\n"


async def one_at_a_time(url: str, segments: list[str], target: str) -> float:
    """Wall seconds to send each segment alone, waiting for each answer before the next."""
    settings = ClientSettings(base_url=url, concurrency=1, batch_size=1)
    async with AsyncTranslateClient(settings) as client:
        started = time.monotonic()
        for text in segments:
            await client.translate(text, target, "en")
        return time.monotonic() - started


def run(url: str, sentences: int, target: str, concurrency: int, batch_size: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-documents-"))
    src, dst = work / "long.md", work / f"long.{target}.md"
    src.write_text(build_document(sentences), encoding="utf-8")
    # The one-at-a-time run gets the next sentences of the same kind: the service's cache would
    # answer the same ones at once.
    other = parse(build_document(sentences, skip=sentences), "markdown", Options()).segments
    segments = [s.strip() for s in parse(src.read_text(encoding="utf-8"), "markdown", Options()).segments]
    args = [
        "--url",
        url,
        "--from",
        "en",
        "--to",
        target,
        str(src),
        "-o",
        str(dst),
        "--no-cache",
        "--no-progress",
    ]
    args += [
        "--concurrency",
        str(concurrency),
        "--batch-size",
        str(batch_size),
        "--report",
        str(work / "r.json"),
    ]
    started = time.monotonic()
    code = translate_main(args)
    batched_s = time.monotonic() - started
    alone = [s.strip() for s in other if s.strip()]
    alone_s = asyncio.run(one_at_a_time(url, alone, target))
    return {
        "document_chars": len(src.read_text(encoding="utf-8")),
        "segments": len(segments),
        "exit": code,
        "batched_wall_s": round(batched_s, 2),
        "batched_segments_per_s": round(len(segments) / batched_s, 2),
        "one_at_a_time_wall_s": round(alone_s, 2),
        "one_at_a_time_segments": len(alone),
        "one_at_a_time_segments_per_s": round(len(alone) / alone_s, 2),
        "speedup": round((len(segments) / batched_s) / (len(alone) / alone_s), 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="A running service (`make up`).")
    parser.add_argument(
        "--sentences", type=int, default=600, help="Sentences in the document (~tens of pages)."
    )
    parser.add_argument("--to", dest="target", default="zh")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--out", type=Path, help="Write the row as JSON here too.")
    args = parser.parse_args(argv)
    row = run(args.url, args.sentences, args.target, args.concurrency, args.batch_size)
    print(json.dumps(row, indent=2))
    if args.out:
        args.out.write_text(json.dumps(row, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
