"""A scripted engine whose answers the answer-check tests choose, and a replica app serving it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

import httpx
from prometheus_client.parser import text_string_to_metric_families

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.families import HUNYUAN_MT
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.engine.interface import Generation, Sampling
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready

HEADER = "X-Hunyuan-QA"
ENGLISH = "The weather is nice today, so let us all go for a long walk in the park."
CHINESE = "今天天气很好，我们大家一起去公园里散步很久吧。"


class ScriptedEngine(FakeEngine):
    """Answers each source with the next of its scripted (text, finish reason) pairs; the last repeats.

    A source without a script gets a good Chinese answer; `calls_for` counts the calls per source.
    """

    def __init__(self) -> None:
        super().__init__(max_model_len=4000)
        self.script: dict[str, list[tuple[str, str]]] = {}
        self.asked: list[str] = []

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation:
        done = await super().generate(prompt, sampling, request_id, priority)
        content = prompt.messages[0]["content"] if prompt.is_chat else prompt.text
        source = next((each for each in self.script if each in content), None)
        self.asked.append(source or content)
        if source is None:
            return Generation(CHINESE, done.prompt_tokens, 9, "stop")
        answers = self.script[source]
        text, reason = answers.pop(0) if len(answers) > 1 else answers[0]
        return Generation(text, done.prompt_tokens, 9, reason)

    def calls_for(self, source: str) -> int:
        return sum(source in each for each in self.asked)


Served = tuple[ScriptedEngine, httpx.Client]


@contextlib.contextmanager
def served(
    cfg: ServeConfig | None = None, headers: Mapping[str, str] | None = None, **replica: object
) -> Iterator[Served]:
    """A replica app on the scripted engine: `cfg` as given, else these replica settings (no cache,
    so that every request reaches the engine); the client sends `headers` with every request."""
    engine = ScriptedEngine()
    config = cfg or make_config(**{"cache_entries": 0, **replica})
    with (
        serve_in_thread(create_app(engine, config, HUNYUAN_MT)) as url,
        httpx.Client(base_url=url, timeout=10, headers=dict(headers or {})) as client,
    ):
        wait_ready(client)
        yield engine, client


def flag_counts(client: httpx.Client) -> dict[tuple[str, str], float]:
    """hunyuan_qa_flags_total from the replica's /metrics, by (check, pool)."""
    counts = {}
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for sample in family.samples:
            if sample.name == "hunyuan_qa_flags_total":
                counts[(sample.labels["check"], sample.labels["pool"])] = sample.value
    return counts
