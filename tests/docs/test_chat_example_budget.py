"""docs/apis.md's chat example, run as written (the real curl) on a replica of the CPU demo's family:
a base model never ends its chat turn, so a chat that names no max_tokens gets the family's chat budget,
not the whole default one (512 tokens took the demo 49-120 s). Which budget the engine is asked for is
the replica's pure logic: a recording engine stands in for vLLM (test_readme_examples.py runs the same
example on the real engine)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from hunyuan_serve.families import FEW_SHOT, HUNYUAN_MT
from hunyuan_serve.families.build import CHAT_MAX_TOKENS
from hunyuan_serve.replica.app import create_app
from tests.support.readme_examples import REPO, Example, missing, page_blocks, shape
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl not installed")

CONFIGURED = 512  # replica.max_tokens, the budget of a request that names none
CURL_TIMEOUT_S = 60.0


def _chat_example() -> Example:
    """The page's one chat example (a test that finds none, or two, says so)."""
    found = [
        example
        for block in page_blocks((REPO / "docs" / "apis.md",))
        for example in block.examples
        if "/v1/chat/completions" in example.command
    ]
    assert len(found) == 1, f"docs/apis.md: {len(found)} chat examples"
    return found[0]


def _asked_budget(family: str, body: dict[str, object] | None = None) -> int:
    """The max_tokens the engine got for the example as written (or with `body` merged into its -d)."""
    example = _chat_example()
    engine = FakeEngine(max_model_len=4 * CONFIGURED)
    app = create_app(engine, make_config(max_tokens=CONFIGURED), family)
    with serve_in_thread(app) as url:
        argv = example.argv(url.removeprefix("http://"))
        if body is not None:
            data = argv.index("-d") + 1
            argv[data] = json.dumps({**json.loads(argv[data]), **body})
        done = subprocess.run(argv, capture_output=True, text=True, timeout=CURL_TIMEOUT_S, check=False)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert example.documented is not None and missing(shape(example.documented), answer) == [], answer
    return engine.samplings[-1].max_tokens


def test_the_demo_familys_chat_gets_its_chat_budget() -> None:
    assert _asked_budget(FEW_SHOT) == CHAT_MAX_TOKENS[FEW_SHOT] < CONFIGURED


def test_a_chat_that_names_max_tokens_gets_it() -> None:
    assert _asked_budget(FEW_SHOT, {"max_tokens": 300}) == 300
    assert _asked_budget(FEW_SHOT, {"max_completion_tokens": 200}) == 200


def test_a_family_that_ends_its_turn_keeps_the_configured_budget() -> None:
    assert HUNYUAN_MT not in CHAT_MAX_TOKENS and _asked_budget(HUNYUAN_MT) == CONFIGURED


def test_the_page_says_what_the_demo_answers() -> None:
    page = (REPO / "docs" / "apis.md").read_text(encoding="utf-8")
    assert f"at most {CHAT_MAX_TOKENS[FEW_SHOT]} tokens" in page
