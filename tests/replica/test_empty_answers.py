"""An empty answer is flagged, never cached, and retried under qa: retry (the engine stand-in, once empty)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from hunyuan_serve.cache.entry import decode_answer
from hunyuan_serve.config import EngineConfig
from hunyuan_serve.families import HUNYUAN_MT
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.qa.flags import HEADER
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.engine.interface import Generation, Sampling
from hunyuan_serve.replica.standin import StandInEngine
from tests.support.replica_fakes import make_config, serve_in_thread, wait_ready, wait_until


@dataclass
class EmptyOnce(StandInEngine):
    """The stand-in (real template and tokenizer), whose first answer to each text is empty."""

    answered: dict[str, int] = field(default_factory=dict)

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation:
        done = await super().generate(prompt, sampling, request_id, priority)
        asked = self.answered
        content = prompt.messages[0]["content"] if prompt.is_chat else prompt.text
        asked[content] = asked.get(content, 0) + 1
        return Generation("" if asked[content] == 1 else done.text, done.prompt_tokens, 0, "stop")


@dataclass
class Served:
    engine: EmptyOnce
    client: httpx.Client
    cache: Path

    def kept(self) -> list[str]:
        """The answers the shared cache (SQLite) holds."""
        if not self.cache.exists():
            return []
        with sqlite3.connect(self.cache) as db:
            rows = list(db.execute("SELECT value FROM translations"))
        return [answer.text for answer in (decode_answer(row[0]) for row in rows) if answer is not None]


@pytest.fixture
def served(tiny_model_dir: Path, tmp_path: Path) -> Iterator[Served]:
    engine = EmptyOnce(EngineConfig(model=str(tiny_model_dir)), str(tiny_model_dir))
    cache = tmp_path / "cache.sqlite"
    config = make_config(cache_path=str(cache))
    with (
        serve_in_thread(create_app(engine, config, HUNYUAN_MT)) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        wait_ready(client, timeout_s=60)
        yield Served(engine, client, cache)


def _ask(client: httpx.Client, text: str, qa: str) -> httpx.Response:
    body = {"text": text, "source_lang": "en", "target_lang": "tl", "qa": qa}
    response = client.post("/translate", json=body)
    assert response.status_code == 200, response.text
    return response


def test_an_empty_answer_is_flagged_and_never_cached(served: Served) -> None:
    first = _ask(served.client, "Open file", "flag")
    assert first.json()["result"] == ""
    assert [flag["check"] for flag in first.json()["qa"]] == ["empty"]
    assert first.headers[HEADER] == "flagged 1/1: 0=empty"
    again = _ask(served.client, "Open file", "flag")
    assert again.json()["cached"] is False and again.json()["result"].strip()
    assert again.json()["qa"] == []
    # The second answer is kept (in both layers): the shared cache holds it alone.
    wait_until(lambda: served.kept() != [], what="the non-empty answer written to the SQLite cache")
    assert served.kept() == [again.json()["result"]]
    assert _ask(served.client, "Open file", "flag").json()["cached"] is True


def test_qa_off_flags_nothing_and_still_keeps_the_empty_answer_out(served: Served) -> None:
    first = _ask(served.client, "Close the window", "off")
    assert first.json()["result"] == "" and "qa" not in first.json()
    assert _ask(served.client, "Close the window", "off").json()["cached"] is False


def test_under_retry_an_empty_answer_is_asked_again_and_the_second_kept(served: Served) -> None:
    response = _ask(served.client, "Save all", "retry")
    body = response.json()
    assert body["result"].strip() and body["qa"] == [] and response.headers[HEADER] == "ok"
    assert [n for content, n in served.engine.answered.items() if "Save all" in content] == [2]
    wait_until(lambda: served.kept() != [], what="the retry's answer written to the SQLite cache")
    assert served.kept() == [body["result"]]
    assert _ask(served.client, "Save all", "retry").json()["cached"] is True
