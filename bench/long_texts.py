"""A 100,000-character document as one text through /translate: cut by the replica, answered whole.

The document is the bench's real UI strings (Stable Diffusion WebUI's English keys, MIT), each a
paragraph, after Django's own msgids when `--django WHEEL` names its wheel (`pip download django
--no-deps`: the zh_Hans catalogs' msgids). `--up` starts two CPU replicas of the tiny model as `make
bench` does, with `--segment-tokens 16` and EOS ignored (each segment answered with max_tokens tokens of
noise: an answer of nothing would hide a lost paragraph). While the one request runs, /health is asked
every `--health-every-s`; the row says every status it answered.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import tempfile
import threading
import time
import zipfile
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

if __package__ in (None, ""):  # `python bench/long_texts.py` as well as `python -m bench.long_texts`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.qa import completeness

DATA = Path(__file__).resolve().parent / "data" / "sd-webui-zh_CN.json"
CHARS = 100_000
SEGMENT_TOKENS = 16
MAX_TOKENS = 16  # each segment's answer: EOS ignored, so exactly this many tokens
REQUEST_TIMEOUT_S = ServeConfig().replica.request_timeout_s  # the replica's own deadline


def django_msgids(wheel: Path) -> list[str]:
    """The msgids of the zh_Hans catalogs in Django's wheel (plural forms and the header left out)."""
    import polib

    found = []
    with zipfile.ZipFile(wheel) as archive:
        for name in sorted(archive.namelist()):
            if name.endswith("zh_Hans/LC_MESSAGES/django.po"):
                catalog = polib.pofile(archive.read(name).decode("utf-8"))
                found += [entry.msgid for entry in catalog if entry.msgid and not entry.msgid_plural]
    return found


def build_document(chars: int, wheel: Path | None) -> list[str]:
    """Paragraphs of one line each, no two alike, until the document holds `chars` characters."""
    strings = (django_msgids(wheel) if wheel else []) + list(json.loads(DATA.read_text(encoding="utf-8")))
    paragraphs: list[str] = []
    seen: set[str] = set()
    total = 0
    for each in strings:
        line = " ".join(each.split())
        if not line or line in seen:
            continue
        seen.add(line)
        paragraphs.append(line)
        total += len(line) + 2
        if total >= chars:
            break
    return paragraphs


@contextlib.contextmanager
def health_watch(url: str, every_s: float) -> Iterator[Counter[int]]:
    """/health's statuses (0: no answer within 2 s) asked every every_s until the block ends."""
    seen: Counter[int] = Counter()
    stop = threading.Event()

    def watch() -> None:
        with httpx.Client(timeout=2.0, trust_env=False) as client:
            while not stop.is_set():
                try:
                    seen[client.get(f"{url}/health").status_code] += 1
                except httpx.HTTPError:
                    seen[0] += 1
                stop.wait(every_s)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(5)


def run(url: str, paragraphs: list[str], target: str, every_s: float) -> dict[str, Any]:
    text = "\n\n".join(paragraphs)
    body = {"text": text, "source_lang": "en", "target_lang": target, "max_tokens": MAX_TOKENS}
    with (
        health_watch(url, every_s) as health,
        httpx.Client(timeout=REQUEST_TIMEOUT_S + 30, trust_env=False) as http,
    ):
        started = time.monotonic()
        answer = http.post(f"{url}/translate", json=body)
        wall = time.monotonic() - started
    row: dict[str, Any] = {
        "document_chars": len(text),
        "paragraphs_in": len(paragraphs),
        "status": answer.status_code,
        "wall_s": round(wall, 1),
        "request_timeout_s": REQUEST_TIMEOUT_S,
        "health": {str(status): count for status, count in sorted(health.items())},
    }
    if answer.status_code == 200:
        done = answer.json()
        result = done["result"]
        row.update(
            paragraphs_out=completeness.paragraphs(result),
            blank_lines_in=text.count("\n\n"),
            blank_lines_out=result.count("\n\n"),
            flags=sorted({flag["check"] for flag in done.get("qa", [])}),
            result_chars=len(result),
        )
    else:
        row["error"] = answer.text[:500]
    return row


def verdict(row: dict[str, Any]) -> list[str]:
    """The target, part by part: 200 within the timeout, no paragraph lost, /health 200 throughout."""
    within = row["status"] == 200 and row["wall_s"] <= row["request_timeout_s"]
    kept = row.get("paragraphs_out", 0) >= row["paragraphs_in"] and "paragraphs" not in row.get("flags", [])
    healthy = set(row["health"]) == {"200"}
    return [
        f"- Long text: {row['document_chars']} characters, {row['paragraphs_in']} paragraphs, answered "
        f"{row['status']} in {row['wall_s']} s (request timeout {row['request_timeout_s']:.0f} s): "
        f"{'met' if within else 'NOT met'}",
        f"- Paragraphs out: {row.get('paragraphs_out')} of {row['paragraphs_in']} (blank lines "
        f"{row.get('blank_lines_out')} of {row.get('blank_lines_in')}; the tiny model's noise may add "
        f"some, never take one): {'met' if kept else 'NOT met'}; flags {row.get('flags')}",
        f"- /health during it: {row['health']}: {'met' if healthy else 'NOT met'}",
    ]


@contextlib.contextmanager
def own_stack(
    replicas: int, work: Path, extra: Sequence[str] = ("--segment-tokens", str(SEGMENT_TOKENS))
) -> Iterator[str]:
    """CPU replicas of the tiny model as `make bench` starts them, EOS ignored; extra: more `up` flags
    (by default texts cut at SEGMENT_TOKENS)."""
    from bench.procs import free_port, running
    from bench.targets import detect_hardware, ready_replicas, stack_device_flags, start_stack
    from hunyuan_serve.families import HUNYUAN_MT
    from hunyuan_serve.tiny_model import build_tiny_model

    model = build_tiny_model(work / f"tiny-{HUNYUAN_MT}")
    flags = [*stack_device_flags(detect_hardware("cpu"), replicas), *extra]
    env = {"HUNYUAN_SERVE_TEST_IGNORE_EOS": "1"}
    server, url = start_stack(model, work / "stack", flags, base_port=free_port(), env=env)
    with running(server):
        ready = lambda _: ready_replicas(work / "stack") >= replicas  # noqa: E731
        server.wait_http(f"{url}/health", timeout_s=900, ok=ready)
        yield url


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="http://127.0.0.1:8080", help="A running service (`make up`).")
    parser.add_argument("--up", action="store_true", help="Start two tiny-model replicas as make bench does.")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--chars", type=int, default=CHARS)
    parser.add_argument("--django", type=Path, help="Django's wheel: its zh_Hans msgids come first.")
    parser.add_argument("--to", dest="target", default="zh")
    parser.add_argument("--health-every-s", type=float, default=0.5)
    parser.add_argument("--out", type=Path, help="Write the row as JSON here too.")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwinds, so the --up stack is stopped
    paragraphs = build_document(args.chars, args.django)
    with contextlib.ExitStack() as stack:
        url = stack.enter_context(own_stack(args.replicas, Path(tempfile.mkdtemp()))) if args.up else args.url
        row = run(url, paragraphs, args.target, args.health_every_s)
    print(json.dumps(row, indent=2))
    print("\n".join(verdict(row)))
    if args.out:
        args.out.write_text(json.dumps(row, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
