"""Through the real stack (`up`: Nginx + a vLLM replica on the tiny model): localize a file, use the page.

The tiny model emits random tokens, so these tests check structure, keys, placeholders kept or
reported, and summary counts, not translation quality. One stack serves the whole module.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from hunyuan_serve.localization.segments import Action, plan_segment
from hunyuan_serve.text.placeholders import find_placeholders
from tests.support.shared_stack import SharedStack
from tests.support.stacks import cli, tail

pytestmark = [pytest.mark.engine, pytest.mark.nginx]


# Real WebUI strings (MIT), nested the way extension localizations group them.
UI: dict[str, Any] = {
    "txt2img": {
        "Loading...": "Loading...",
        "Prompt": "Prompt",
        "Negative prompt": "Negative prompt",
        "Generate": "Generate",
        "⤡": "⤡",
        "Drop File Here": "Drop File Here",
    },
    "hints": {
        "style": "Save current prompts as a style. If you add the token {prompt} to the text, it is kept.",
        "override": "Override `Denoising strength` to 1?",
        "link": "Model link - https://mega.nz/file/ptA2jSSB#G4INKHQG2x2pGAVQBn-yd_U5dMgevGF8YYM9",
        "extra": "Ctrl+up/down precision when editing <extra networks:0.9>",
        "wildcard": "{2$$artist1|artist2|artist3}",
        "jinja": "I love {{ choice('red', 'blue', 'green') }} roses",
        "printf": "Saved %d images to %s",
    },
    "tabs": ["Extras", "PNG Info", "Checkpoint Merger", "Train", "Settings", "Extensions"],
    "version": 3,
}


Stack = SharedStack


@pytest.fixture(scope="module")
def stack(shared_stack: SharedStack) -> Stack:
    """The shared `up`, one replica on the tiny model (sampling on: greedy random weights stop at once)."""
    return shared_stack


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in _strings(value)]
    return []


def _shape(node: Any) -> Any:
    """The document with every string blanked: keys, nesting and other values must not change."""
    if isinstance(node, str):
        return ""
    if isinstance(node, dict):
        return {key: _shape(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_shape(value) for value in node]
    return node


def _translate(stack: Stack, tmp_path: Path, src: Path, dst: Path, report: Path) -> tuple[int, str, dict]:
    cmd = cli("translate", "--url", stack.url, "--from", "en", "--to", "zh")
    cmd += [str(src), "-o", str(dst), "--cache", str(tmp_path / "cache.sqlite"), "--report", str(report)]
    cmd += ["--batch-size", "4", "--concurrency", "4", "--no-progress"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), f"rc {done.returncode}: {done.stderr}\n{tail(stack.log)}"
    return done.returncode, done.stderr, json.loads(report.read_text(encoding="utf-8"))


def test_localize_json_file_through_up(stack: Stack, tmp_path: Path) -> None:
    src, dst, report_path = tmp_path / "en.json", tmp_path / "zh.json", tmp_path / "report.json"
    src.write_text(json.dumps(UI, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    sources = _strings(UI)
    expected_skips = sum(plan_segment(s).action is not Action.SEND for s in sources)

    started = time.monotonic()
    code, err, report = _translate(stack, tmp_path, src, dst, report_path)
    first_run_s = time.monotonic() - started
    out = json.loads(dst.read_text(encoding="utf-8"))

    assert _shape(out) == _shape(UI)  # same keys, order, nesting, list lengths, non-string values
    assert report["total"] == len(sources) == 19
    assert report["skipped"] == expected_skips == 2  # "⤡" and the {2$$...} wildcard
    assert report["translated"] + report["cached"] + report["skipped"] + report["failed"] == report["total"]
    assert report["cached"] == 0 and report["aborted"] is None and report["requests"] >= 5
    assert (code == 1) == (report["failed"] > 0)
    assert f"{report['total']} segments: {report['translated']} translated" in err

    failed_sources = {f["source"] for f in report["failures"]}
    for source, result in zip(sources, _strings(out), strict=True):
        # Every placeholder survives: either the translation kept them all, or the segment was left as is.
        assert Counter(p.text for p in find_placeholders(result)) == Counter(
            p.text for p in find_placeholders(source)
        )
        if source in failed_sources:
            assert result == source
    for failure in report["failures"]:
        assert failure["label"] and failure["problem"].startswith(
            ("missing", "unexpected", "positional", "empty", "control characters")
        )
    assert report["translated"] >= 1  # random tokens, but some plain strings come back usable

    # Re-run: what was accepted comes from the local cache; only the failed segments, and those the
    # service's checks flagged (never cached), are sent again.
    _, _, again = _translate(stack, tmp_path, src, dst, report_path)
    assert again["cached"] == report["translated"] - len(report["flagged"])
    assert again["translated"] + again["failed"] == report["failed"] + len(report["flagged"])
    print(f"\nfirst run {first_run_s:.1f}s: {report['translated']} translated, {report['failed']} failed")


def test_page_translates_through_up(stack: Stack, page: Any, tmp_path: Path) -> None:
    page.goto(stack.url + "/")
    page.wait_for_function("document.querySelectorAll('#target option').length > 0")
    languages = httpx.get(stack.url + "/languages", timeout=10).json()["languages"]
    assert page.eval_on_selector_all("#target option", "os => os.map(o => o.value)") == [
        lang["code"] for lang in languages
    ]
    assert len(languages) == 38

    page.fill("#text", "The weather is nice today.")
    page.select_option("#source", "en")
    page.select_option("#target", "fr")
    page.click("#translate")
    page.wait_for_function("document.querySelector('#latency').textContent.includes('ms')", timeout=120_000)
    assert page.is_hidden("#error")
    shown = page.text_content("#result")
    # The same request again hits the replica's cache: the page showed exactly what the service made.
    api = httpx.post(
        stack.url + "/translate",
        json={"text": "The weather is nice today.", "source_lang": "en", "target_lang": "fr"},
        timeout=120,
    ).json()
    assert api["cached"] is True
    assert shown == api["result"]
    assert "server" in page.text_content("#latency")
    page.screenshot(path=str(tmp_path / "page.png"))

    # A language the service does not offer (forced into the picker) gets the replica's own 400 message.
    page.evaluate("document.querySelector('#target').add(new Option('Klingon', 'tlh'))")
    page.select_option("#target", "tlh")
    page.click("#translate")
    page.wait_for_selector("#error:not([hidden])")
    message = page.text_content("#error")
    assert message.startswith("Cannot translate this request: ") and "tlh" in message
