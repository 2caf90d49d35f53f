"""A long Markdown document through a running service: `translate` (batched, fanned out) vs one at a time.

Prints segments/s and wall time for both and writes them as JSON (a row for the report). The document
is built from the bench's real UI strings (Stable Diffusion WebUI's, MIT), several sentences a paragraph,
so it runs tens of pages with no two sentences alike (the client sends a repeated sentence once).
`make bench` runs it against its stack (bench/run.py); `--up` starts a stack of its own, as the bench does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

if __package__ in (None, ""):  # `python bench/documents.py` as well as `python -m bench.documents`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hunyuan_serve.client.api import AsyncTranslateClient
from hunyuan_serve.client.cli import main as translate_main
from hunyuan_serve.client.settings import ClientSettings, api_key_from
from hunyuan_serve.localization.formats import Options, parse

DATA = Path(__file__).resolve().parent / "data" / "sd-webui-zh_CN.json"
PAGE_CHARS = 1800  # a standard manuscript page (30 lines of 60 characters): what "pages" counts
# A language the bench's k6 runs do not ask for (names.STACK_TARGETS): the stack's cache holds none of it.
TARGET = "it"
CONCURRENCY, BATCH_SIZE = 8, 16  # the client's bound and batch size for the document


@dataclass(frozen=True)
class DocumentRow:
    """One run: the document, the batched `translate` and the one-at-a-time sample, with their rates."""

    document_chars: int
    segments: int
    exit: int  # translate's exit status (1: some segments failed their checks, as the tiny model's do)
    failed: int
    batched_wall_s: float
    one_at_a_time_segments: int
    one_at_a_time_wall_s: float

    @property
    def pages(self) -> float:
        return self.document_chars / PAGE_CHARS

    @property
    def batched_per_s(self) -> float:
        return self.segments / self.batched_wall_s if self.batched_wall_s > 0 else 0.0

    @property
    def one_at_a_time_per_s(self) -> float:
        wall = self.one_at_a_time_wall_s
        return self.one_at_a_time_segments / wall if wall > 0 else 0.0

    @property
    def speedup(self) -> float:
        return self.batched_per_s / self.one_at_a_time_per_s if self.one_at_a_time_per_s > 0 else 0.0

    def as_dict(self) -> dict[str, float | int]:
        return {
            **asdict(self),
            "pages": round(self.pages, 1),
            "batched_segments_per_s": round(self.batched_per_s, 2),
            "one_at_a_time_segments_per_s": round(self.one_at_a_time_per_s, 2),
            "one_at_a_time_wall_s_all": round(self.segments / self.one_at_a_time_per_s, 1)
            if self.one_at_a_time_per_s
            else 0.0,
            "speedup": round(self.speedup, 2),
        }


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
    # The key as `translate` takes it (run() calls its main in this process): from the environment.
    key = api_key_from(os.environ)
    settings = ClientSettings.model_validate(
        {"base_url": url, "concurrency": 1, "batch_size": 1, "api_key": key}
    )
    async with AsyncTranslateClient(settings) as client:
        started = time.monotonic()
        for text in segments:
            await client.translate(text, target, "en")
        return time.monotonic() - started


def run(
    url: str,
    sentences: int,
    target: str = TARGET,
    concurrency: int = CONCURRENCY,
    batch_size: int = BATCH_SIZE,
    serial: int | None = None,
) -> DocumentRow:
    """The document through `translate`, then `serial` segments of the same kind (all: None) one at a time.

    The one-at-a-time run gets the next sentences of the same kind: the service's cache would answer
    the same ones at once. Its rate is what the batched rate is compared with.
    """
    work = Path(tempfile.mkdtemp(prefix="bench-documents-"))
    src, dst, report = work / "long.md", work / f"long.{target}.md", work / "report.json"
    src.write_text(build_document(sentences), encoding="utf-8")
    segments = [s.strip() for s in parse(src.read_text(encoding="utf-8"), "markdown", Options()).segments]
    args = ["--url", url, "--from", "en", "--to", target, str(src), "-o", str(dst), "--no-cache"]
    args += ["--no-progress", "--concurrency", str(concurrency), "--batch-size", str(batch_size)]
    started = time.monotonic()
    code = translate_main([*args, "--report", str(report)])
    batched_s = time.monotonic() - started
    failed = int(json.loads(report.read_text(encoding="utf-8"))["failed"]) if report.exists() else -1
    other = parse(build_document(sentences, skip=sentences), "markdown", Options()).segments
    alone = [s.strip() for s in other if s.strip()][: serial or None]
    alone_s = asyncio.run(one_at_a_time(url, alone, target))
    return DocumentRow(
        len(src.read_text(encoding="utf-8")),
        len(segments),
        code,
        failed,
        round(batched_s, 2),
        len(alone),
        alone_s,
    )


HEADER = (
    "| document | segments | failed checks | batched wall s | batched seg/s | one at a time "
    "(sample) | one-at-a-time seg/s | one at a time, all (projected) s | speedup |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def section(
    row: DocumentRow | None, concurrency: int = CONCURRENCY, batch_size: int = BATCH_SIZE
) -> list[str]:
    """The report's section for the row (nothing when the run had none)."""
    if row is None:
        return []
    figures = row.as_dict()
    return [
        "## Long documents: a Markdown file through `translate`",
        "",
        f"A {row.pages:.0f}-page Markdown document ({row.document_chars} characters, bench/documents.py) "
        f"through `hunyuan-serve translate` (sentences by pysbd, batches of {batch_size}, {concurrency} at "
        "once, reassembled in order) against the same kind of sentences sent one at a time, each waiting "
        "for the answer before the next; the one-at-a-time wall time for the whole document is its rate "
        "projected over every segment.",
        "",
        HEADER,
        f"| {row.pages:.0f} pages | {row.segments} | {row.failed} | {row.batched_wall_s:.1f} "
        f"| {row.batched_per_s:.2f} | {row.one_at_a_time_segments} in {row.one_at_a_time_wall_s:.1f} s "
        f"| {row.one_at_a_time_per_s:.2f} | {figures['one_at_a_time_wall_s_all']} | {row.speedup:.1f}x |",
        "",
    ]


@contextlib.contextmanager
def own_stack(replicas: int, work: Path) -> Iterator[str]:
    """A tiny checkpoint and `up` on it as `make bench` starts its stack; its URL while it runs."""
    from bench.procs import free_port, running
    from bench.targets import detect_hardware, ready_replicas, stack_device_flags, start_stack
    from hunyuan_serve.families import HUNYUAN_MT
    from hunyuan_serve.tiny_model import build_tiny_model

    model = build_tiny_model(work / f"tiny-{HUNYUAN_MT}")  # as bench/run.py's prepare_model names it
    flags = stack_device_flags(detect_hardware("auto"), replicas)
    server, url = start_stack(model, work / "stack", flags, base_port=free_port())
    with running(server):
        server.wait_http(f"{url}/health", timeout_s=900, ok=lambda _: ready_replicas(work / "stack") > 0)
        yield url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="A running service (`make up`).")
    parser.add_argument("--up", action="store_true", help="Start a tiny-model stack as make bench does.")
    parser.add_argument("--replicas", type=int, default=2, help="Replicas of the --up stack.")
    parser.add_argument(
        "--sentences", type=int, default=1000, help="Sentences in the document (1000: ~29 pages)."
    )
    parser.add_argument("--serial", type=int, help="Sentences sent one at a time (default: as many).")
    parser.add_argument("--to", dest="target", default=TARGET)
    parser.add_argument("--concurrency", type=int, default=CONCURRENCY)
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    parser.add_argument("--out", type=Path, help="Write the row as JSON here too.")
    args = parser.parse_args(argv)
    # A SIGTERM (timeout(1), say) unwinds like Ctrl-C, so that the --up stack is stopped, not left behind.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(own_stack(args.replicas, Path(tempfile.mkdtemp()))) if args.up else args.url
        row = run(url, args.sentences, args.target, args.concurrency, args.batch_size, args.serial)
    print(json.dumps(row.as_dict(), indent=2))
    print("\n".join(section(row, args.concurrency, args.batch_size)))
    if args.out:
        args.out.write_text(json.dumps(row.as_dict(), indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
