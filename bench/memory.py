"""Translation memories on the SD WebUI strings: hit rates, engine calls saved, wall time against none.

Half the strings (every other one) are imported with their human translations; `translate` then runs
the job on the other half and on the whole set, and on the whole set with all of it imported, each
against the same stack with no memory. The stack is `up` on a tiny HY-MT1.5 checkpoint (its
terminology prompt takes close matches) with the engine stand-in by default (--engine: the real vLLM
engine on it; --model: a real checkpoint), its translation cache off, so an engine call is a cache
miss. The store alone (100,000 TMX units imported, exact lookups) is bench/memory_store.py's.

    flock /tmp/hs-heavy.lock .venv/bin/python -m bench.memory --out /tmp/report-memory.md
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench import memory_store
from bench.procs import REPO, Server, counter_value, free_port, server_env

DATA = REPO / "bench" / "data" / "sd-webui-zh_CN.json"
LOOKUPS = "hunyuan_memory_lookups_total"


def start_stack(model: Path | None, engine: bool, work: Path) -> tuple[Server, str, str]:
    """`up` with one replica, its cache off; the stand-in unless --engine or --model. Returns it, the
    front's URL and the replica's (whose /metrics the front does not serve by default)."""
    from hunyuan_serve.families import HY_MT15
    from hunyuan_serve.tiny_model import build_tiny_model

    checkpoint = model or build_tiny_model(work / "tiny-hy-mt15", kind=HY_MT15)
    port, base = free_port(), free_port()
    argv = [sys.executable, "-m", "hunyuan_serve", "up", "--model", str(checkpoint), "--replicas", "1"]
    argv += ["--port", str(port), "--base-port", str(base), "--run-dir", str(work / "run")]
    argv += ["--cache-entries", "0", "--max-model-len", "2048", "--log-level", "warning"]
    argv += [] if engine or model else ["--stand-in", "true"]
    server = Server("up (memory)", argv, work / "up.log", server_env({"PYTHONPATH": str(REPO)}))
    url = f"http://127.0.0.1:{port}"
    server.wait_http(f"{url}/health", 900, ok=lambda body: body.get("ready") == 1)
    return server, url, f"http://127.0.0.1:{base}"


def _lookups(replica: str) -> dict[str, float]:
    text = httpx.get(f"{replica}/metrics", timeout=30).text
    found = {"exact": 0.0, "fuzzy": 0.0, "miss": 0.0}
    for line in text.splitlines():
        if line.startswith(LOOKUPS + "{"):
            found[line.split('result="', 1)[1].split('"', 1)[0]] = float(line.split()[-1])
    found["engine"] = counter_value(text, "hunyuan_cache_misses")
    return found


def _import(url: str, pairs: dict[str, str]) -> float:
    httpx.delete(f"{url}/memories", timeout=60)
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(pairs.items())
    # blank=keep: the file's empty values hide their strings in SD WebUI; they are its translations too.
    query = {"file": "sd-webui.csv", "source_lang": "en", "target_lang": "zh", "blank": "keep"}
    started = time.perf_counter()
    made = httpx.post(f"{url}/memories", params=query, content=out.getvalue().encode(), timeout=600)
    made.raise_for_status()
    return time.perf_counter() - started


def _memory_file(pairs: dict[str, str], work: Path) -> Path:
    """The strings as a TMX file, for `translate --memory` (the client's own memory)."""
    from hunyuan_serve.memory.tmx import write_tmx
    from hunyuan_serve.storage.memory import Unit

    path = work / "sd-webui.tmx"
    path.write_bytes(write_tmx(Unit("en", "zh", k, v) for k, v in pairs.items() if v))
    return path


def job(urls: tuple[str, str], strings: dict[str, str], work: Path, name: str, *extra: str) -> dict[str, Any]:
    """`translate` of the strings' English (as a source file has it) into zh: wall time, what the
    memory answered, engine calls, and how many outputs equal the human translation."""
    src, dst, report = work / f"{name}.en.json", work / f"{name}.zh.json", work / f"{name}.report.json"
    src.write_text(json.dumps({key: key for key in strings}, ensure_ascii=False), encoding="utf-8")
    url, replica = urls
    before = _lookups(replica)
    argv = [sys.executable, "-m", "hunyuan_serve", "translate", str(src), "-o", str(dst), "--to", "zh"]
    argv += ["--from", "en", "--url", url, "--no-cache", "--no-progress", "--report", str(report), *extra]
    started = time.perf_counter()
    subprocess.run(argv, check=False, capture_output=True, env=server_env({"PYTHONPATH": str(REPO)}))
    wall_s = time.perf_counter() - started
    after = _lookups(replica)
    out = json.loads(dst.read_text(encoding="utf-8"))
    delta = {k: int(after[k] - before[k]) for k in after}
    done = json.loads(report.read_text(encoding="utf-8"))
    return {
        "strings": len(strings),
        "answered_from_memory": done["memory"],
        "wall_s": round(wall_s, 1),
        **delta,
        "identical": sum(out.get(key) == value for key, value in strings.items()),
    }


def run(model: Path | None, engine: bool) -> dict[str, Any]:
    human: dict[str, str] = json.loads(DATA.read_text(encoding="utf-8"))
    items = list(human.items())
    memory, rest = dict(items[0::2]), dict(items[1::2])
    figures: dict[str, Any] = {"store": memory_store.measure()}
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        work = Path(tmp)
        server, url, replica = start_stack(model, engine, work)
        urls = (url, replica)
        try:
            httpx.delete(f"{url}/memories", timeout=60)
            figures["none_rest"] = job(urls, rest, work, "none-rest")
            figures["none_all"] = job(urls, human, work, "none-all")
            figures["half_import_s"] = round(_import(url, memory), 2)
            figures["half_rest"] = job(urls, rest, work, "half-rest")
            figures["half_all"] = job(urls, human, work, "half-all")
            figures["all_import_s"] = round(_import(url, human), 2)
            figures["all_all"] = job(urls, human, work, "all-all")
            httpx.delete(f"{url}/memories", timeout=60)
            figures["file_all"] = job(
                urls, human, work, "file-all", "--memory", str(_memory_file(human, work))
            )
        finally:
            server.stop()
    figures["engine"] = "model" if model else ("vLLM on the tiny checkpoint" if engine else "stand-in")
    return figures


def report(figures: dict[str, Any]) -> str:
    store, full = figures["store"], figures["all_all"]
    rows = [
        ("other half, no memory", figures["none_rest"]),
        ("other half, half imported", figures["half_rest"]),
        ("whole set, no memory", figures["none_all"]),
        ("whole set, half imported", figures["half_all"]),
        ("whole set, all imported", full),
        ("whole set, `translate --memory` file", figures["file_all"]),
    ]
    lines = [
        "# Translation memory on the SD WebUI strings",
        "",
        "## Headline",
        "",
        f"- memory, whole set imported: {full['answered_from_memory']} of {full['strings']} strings answered "
        f"from it, {full['engine']} engine calls, {full['identical']} outputs identical to the human file "
        f"({figures['file_all']['identical']} with `translate --memory`; the file leaves "
        f"{sum(1 for v in json.loads(DATA.read_text(encoding='utf-8')).values() if not v)} strings empty)",
        f"- 100,000 TMX units imported in {store['import_s']} s (target 30 s); exact lookup "
        f"p99 {store['lookup_p99_ms']} ms (target under 1 ms)",
        "",
        f"Engine: {figures['engine']}. Half imported in {figures['half_import_s']} s, all in "
        f"{figures['all_import_s']} s (over HTTP, CSV).",
        "",
        "exact/fuzzy/miss: texts the service looked up (the client sends each distinct text once, and "
        "skips those with nothing to translate); from memory: segments the client's report counts so.",
        "",
        "| job | strings | exact | fuzzy | miss | from memory | engine calls | wall s | identical to human |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    keys = ("strings", "exact", "fuzzy", "miss", "answered_from_memory", "engine", "wall_s", "identical")
    for name, row in rows:
        cells = [row[k] for k in keys]
        lines.append(f"| {name} | " + " | ".join(str(c) for c in cells) + " |")
    lines += ["", f"Store alone: {json.dumps(store)}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the Markdown report (its .json beside)")
    parser.add_argument("--engine", action="store_true", help="vLLM on the tiny checkpoint, not the stand-in")
    parser.add_argument(
        "--model", type=Path, help="a real checkpoint (HY-MT1.5 or Hy-MT2 for fuzzy guidance)"
    )
    args = parser.parse_args(argv)
    figures = run(args.model, args.engine)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report(figures), encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps(figures, indent=2), encoding="utf-8")
    print(report(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
