"""A retry spends only what is left of the request's deadline: a scripted engine whose retry never ends."""

from __future__ import annotations

import asyncio
import json

import httpx

from hunyuan_serve.families import HUNYUAN_MT
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.engine.interface import Generation, Sampling
from tests.support.qa_scripted import HEADER, ScriptedEngine
from tests.support.replica_fakes import make_config, serve_in_thread, wait_ready, wait_until

SOURCE = "Delete 3 files from https://example.com/x now"


class NoSecondAnswer(ScriptedEngine):
    """Scripted; SOURCE's third call (the retry after two first answers) never ends, until cancelled."""

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation:
        content = prompt.messages[0]["content"] if prompt.is_chat else prompt.text
        if SOURCE in content and self.calls_for(SOURCE) >= 2:
            self.asked.append(SOURCE)
            await asyncio.Event().wait()
        return await super().generate(prompt, sampling, request_id, priority)


def test_a_retry_past_the_deadline_gives_the_first_answer_flagged_not_a_504() -> None:
    engine = NoSecondAnswer()
    engine.script[SOURCE] = [("删除文件", "stop")]  # the number and the URL lost: flagged
    config = make_config(cache_entries=0, request_timeout_s=1.5, qa_retry_reserve_s=0.5)
    body = {"text": SOURCE, "source_lang": "en", "target_lang": "zh"}
    with (
        serve_in_thread(create_app(engine, config, HUNYUAN_MT)) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        wait_ready(client)
        flagged = client.post("/translate", json={**body, "qa": "flag"})
        retried = client.post("/translate", json={**body, "qa": "retry"})
        assert flagged.status_code == 200 and retried.status_code == 200, retried.text
        assert retried.json()["result"] == flagged.json()["result"] == "删除文件"
        assert retried.json()["qa"] == flagged.json()["qa"] != []
        assert retried.headers[HEADER] == flagged.headers[HEADER] != "ok"
        assert engine.calls_for(SOURCE) == 3  # the retry was asked, and cut short (aborted)
        wait_until(lambda: not engine.running, what="the cut retry's engine call ended")


class NoRetryAnswer(ScriptedEngine):
    """Scripted; every call for SOURCE after its first (a retry) never ends, until cancelled."""

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation:
        content = prompt.messages[0]["content"] if prompt.is_chat else prompt.text
        if SOURCE in content and self.calls_for(SOURCE) >= 1:
            self.asked.append(SOURCE)
            await asyncio.Event().wait()
        return await super().generate(prompt, sampling, request_id, priority)


def test_a_long_texts_stream_gives_its_first_answers_flagged_when_the_deadline_cuts_the_retry() -> None:
    # A long text is translated whole, then streamed: its retry keeps to the stream's deadline too.
    engine = NoRetryAnswer()
    engine.script[SOURCE] = [("删除文件", "stop")]
    config = make_config(cache_entries=0, request_timeout_s=1.5, qa_retry_reserve_s=0.5, segment_tokens=60)
    text = f"{SOURCE}\n\nOpen the settings page, then choose a language for the whole interface."
    body = {"text": text, "source_lang": "en", "target_lang": "zh", "qa": "retry", "stream": True}
    with (
        serve_in_thread(create_app(engine, config, HUNYUAN_MT)) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        wait_ready(client)
        with client.stream("POST", "/translate", json=body) as response:
            events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
    assert response.status_code == 200
    assert "error" not in events[-1], events[-1]
    assert events[-1]["done"] and events[-1]["result"].startswith("删除文件\n\n"), events[-1]
    assert events[-1]["qa"] != []
    assert engine.calls_for(SOURCE) == 2  # the first answer, and a retry that was cut short
