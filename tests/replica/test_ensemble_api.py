"""The Chimera's /fuse over HTTP, and a non-Chimera replica refusing it: apps on scripted engines."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready

from hunyuan_serve.families.chimera import fusion_prompt
from hunyuan_serve.languages import find_language
from hunyuan_serve.prompts import Prompt
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.engine import Generation, Sampling

EN, ZH = find_language("en"), find_language("zh")


class SamplingEngine(FakeEngine):
    """A translation replica's engine."""

    def __init__(self) -> None:
        super().__init__(max_model_len=4000)
        self.model_name = "fake-mt"


class ChimeraEngine(FakeEngine):
    """The Chimera's engine: answers 'fused N' and keeps every prompt; `fail` makes it raise."""

    def __init__(self) -> None:
        super().__init__(max_model_len=4000)
        self.model_name = "fake-chimera"
        self.fail = False

    async def generate(self, prompt: Prompt, sampling: Sampling, request_id: str) -> Generation:
        generation = await super().generate(prompt, sampling, request_id)
        if self.fail:
            raise RuntimeError("chimera engine down")
        return Generation(f"fused {len(self.given)}", generation.prompt_tokens, 2, "stop")


Served = tuple[Any, httpx.Client]


@pytest.fixture(scope="module")
def apps() -> Iterator[dict[str, Served]]:
    """A Chimera replica and a translation replica."""
    with contextlib.ExitStack() as stack:
        served: dict[str, Served] = {}

        def serve(name: str, engine: Any, family: str, **replica: Any) -> str:
            url = stack.enter_context(serve_in_thread(create_app(engine, make_config(**replica), family)))
            client = stack.enter_context(httpx.Client(base_url=url, timeout=10))
            wait_ready(client)
            served[name] = (engine, client)
            return url

        serve("chimera", ChimeraEngine(), "chimera")
        serve("mt", SamplingEngine(), "hunyuan-mt")
        yield served


def test_a_chimera_refuses_plain_translation(apps: dict[str, Served]) -> None:
    response = apps["chimera"][1].post(
        "/translate", json={"source_lang": "en", "target_lang": "zh", "text": "Hi"}
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "fusion_only" and "fake-chimera is a Hunyuan-MT-Chimera model" in error["message"]


def _fuse(apps: dict[str, Served], name: str, **fields: Any) -> httpx.Response:
    body = {"source_lang": "en", "target_lang": "zh", "text": "It’s on the house.", **fields}
    return apps[name][1].post("/fuse", json=body, headers={"X-Request-ID": "fuse-1"})


def test_fuse_sends_the_readme_prompt_and_logs_its_digest(
    apps: dict[str, Served], caplog: pytest.LogCaptureFixture
) -> None:
    chimera = apps["chimera"][0]
    with caplog.at_level("INFO", logger="hunyuan_serve.replica.access"):
        response = _fuse(apps, "chimera", candidates=["这是免费的。", "本店请客。"])
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["result"] == f"fused {len(chimera.given)}" and body["model"] == "fake-chimera"
    assert body["request_id"] == "fuse-1" and body["cached"] is False
    prompt = fusion_prompt(EN, ZH, "It’s on the house.", ["这是免费的。", "本店请客。"])
    assert chimera.given[-1] == prompt
    digest = hashlib.sha256(prompt.messages[0]["content"].encode("utf-8")).hexdigest()
    lines = [r.getMessage() for r in caplog.records if '"request_id": "fuse-1"' in r.getMessage()]
    assert len(lines) == 1 and f'"prompt_sha256": "{digest}"' in lines[0] and '"candidates": 2' in lines[0]


@pytest.mark.parametrize(
    ("app", "fields", "status", "code", "message"),
    [
        ("mt", {"candidates": ["a", "b"]}, 400, "fusion_unsupported",
         "POST /fuse needs a Hunyuan-MT-Chimera replica (prompt family chimera); this one serves fake-mt "
         "with prompt family hunyuan-mt"),
        ("chimera", {"candidates": ["a"]}, 400, "invalid_candidates", "candidates must be 2 to 8"),
        ("chimera", {"candidates": ["a"] * 9}, 400, "invalid_candidates", "got 9"),
        ("chimera", {}, 422, "missing_field", "candidates (a list of candidate translations) is required"),
        ("chimera", {"candidates": ["a", 2]}, 422, "invalid_parameter", "must be a list of strings"),
        ("chimera", {"candidates": ["a", "b"], "ensemble": {}}, 422, "unknown_field", "ensemble"),
        ("chimera", {"candidates": ["a", "b"], "source_lang": "auto"}, 400, "unsupported_language", "auto"),
    ],
)  # fmt: skip
def test_bad_fusions_are_refused_naming_the_field(
    apps: dict[str, Served], app: str, fields: dict[str, Any], status: int, code: str, message: str
) -> None:
    response = _fuse(apps, app, **fields)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and message in error["message"]
