"""Weblate 2026.10.1's own LibreTranslate, DeepL (with a glossary), OpenAI and tmserver machinery classes
against the real stack (`up`: Nginx + two vLLM replicas on a tiny hy-mt1.5 checkpoint, the keyed shared
stack), each filling a batch of 20 units over HTTP (tmserver: the key's translation memory's matches).
Weblate runs in its own Python 3.12 venv (.venv-weblate, made by deploy/weblate-venv.sh);
tests/api/weblate_driver.py drives it and prints what it got."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.weblate_driver import ASKED, MEMORY
from tests.support.shared_stack import KEYS, SharedStack

pytestmark = [pytest.mark.engine, pytest.mark.nginx]

REPO = Path(__file__).resolve().parents[2]
WEBLATE_PYTHON = REPO / ".venv-weblate" / "bin" / "python"
DRIVER = Path(__file__).with_name("weblate_driver.py")
KEY = KEYS["weblate"].secret
BATCH = 20
DRIVER_TIMEOUT_S = 600.0  # Django's start with Weblate's apps, three backends of 20 strings on 2 cores
PLACEHOLDERS = {"libretranslate": "[X5X]", "deepl": '<x id="5"></x>', "openai": "@@PH1@@"}


@pytest.fixture(scope="module")
def report(keyed_stack: SharedStack) -> dict[str, Any]:
    if not WEBLATE_PYTHON.exists():
        pytest.skip(f"no Weblate venv at {WEBLATE_PYTHON}: run deploy/weblate-venv.sh (make install does)")
    auth = {"Authorization": f"Bearer {KEY}"}
    model = httpx.get(f"{keyed_stack.url}/v1/models", headers=auth).json()
    served = model["data"][0]["id"]
    rows = "".join(f"{source}\t{target}\n" for source, target in MEMORY.items()).encode()
    query = {"file": "weblate.tsv", "source_lang": "en", "target_lang": "zh"}
    made = httpx.post(f"{keyed_stack.url}/memories", params=query, content=rows, headers=auth)
    assert made.status_code == 201, made.text
    try:
        done = subprocess.run(
            [str(WEBLATE_PYTHON), str(DRIVER), keyed_stack.url, KEY, served],
            capture_output=True,
            text=True,
            timeout=DRIVER_TIMEOUT_S,
            check=False,
        )
    finally:
        assert httpx.delete(f"{keyed_stack.url}/memories", headers=auth).status_code == 204
    assert done.returncode == 0, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps({name: each.get("seconds") for name, each in found.items()}), file=sys.stderr)
    return found


@pytest.mark.parametrize("backend", ["libretranslate", "deepl", "openai"])
def test_each_backend_passes_its_form_check_and_fills_a_batch_of_20(
    report: dict[str, Any], backend: str
) -> None:
    got = report[backend]
    assert got["form"] is None, got["form"]
    assert got["error"] is None, got["error"]
    assert len(got["answers"]) == BATCH and got["filled"] == BATCH
    if backend == "libretranslate":
        return  # its [X5X] tokens go to the model as text: a tiny random model need not keep them
    marked = [answers[0] for text, answers in got["answers"].items() if PLACEHOLDERS[backend] in text]
    assert len(marked) == BATCH // 5 and all(PLACEHOLDERS[backend] in each for each in marked)


def test_deepl_lists_languages_and_recreates_a_changed_glossary(report: dict[str, Any]) -> None:
    assert report["deepl"]["pairs"] > 100  # every source with every target, from /v3/languages
    assert report["deepl"]["update"] == "recreate"  # the dictionary PUT's 404, as Weblate relies on


def test_tmserver_lists_the_memorys_pairs_and_finds_a_stored_string_and_a_variant(
    report: dict[str, Any],
) -> None:
    got = report["tmserver"]
    assert got["form"] is None, got["form"]
    assert ["en", "zh_hans"] in got["pairs"] and got["supported"] is True
    stored, variant = (got["found"][text] for text in ASKED)
    assert [(m["text"], m["quality"]) for m in stored] == [("总批次数", 100)]
    [close] = variant
    assert (
        close["source"] == "Open the settings of the current image now"
        and close["text"] == "立即打开当前图像的设置"
    )
    assert close["quality"] > got["threshold"]  # above Weblate's own default threshold (80)
