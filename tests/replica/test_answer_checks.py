"""The answer checks in the core, over a scripted engine: one case per check, flag against retry, dialects."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from hunyuan_serve.families.base import Prompt
from hunyuan_serve.replica.admission import priority
from hunyuan_serve.replica.admission.gate import ACCESS_LOG
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.engine.interface import Generation, Sampling
from hunyuan_serve.replica.metrics import Metrics
from hunyuan_serve.replica.review import Review
from tests.support.qa_scripted import ENGLISH, HEADER, Served, flag_counts, served
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready


@pytest.fixture(scope="module")
def flagging() -> Iterator[Served]:
    with served(qa="flag") as pair:
        yield pair


# (what, source, scripted answer, finish reason, target, the check)
CASES = [
    (
        "wrong language",
        "Bonjour à tous, il fait beau aujourd'hui dans la ville.",
        ENGLISH,
        "stop",
        "zh",
        "wrong_language",
    ),
    ("echo", ENGLISH, ENGLISH, "stop", "fr", "echo"),
    ("loop", "Finally, lock it.", "最后，最终，封锁，封锁，封锁，封锁，封锁", "stop", "zh", "loop"),
    ("truncation", "Open the settings page and save.", "打开设置页面", "length", "zh", "truncated"),
    ("a lost line", "Open\nSave\nClose", "打开\n保存", "stop", "zh", "lines"),
    ("a lost number", "Delete 3 files", "删除文件", "stop", "zh", "numbers"),
]


@pytest.mark.parametrize(
    ("what", "source", "answer", "reason", "target", "name"), CASES, ids=[c[0] for c in CASES]
)
def test_each_failure_is_flagged_in_the_native_answer_and_its_header(
    flagging: Served, what: str, source: str, answer: str, reason: str, target: str, name: str
) -> None:
    engine, client = flagging
    engine.script[source] = [(answer, reason)]
    response = client.post("/translate", json={"text": source, "source_lang": "auto", "target_lang": target})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["result"] == answer  # flag returns the answer as it came
    assert name in [flag["check"] for flag in body["qa"]], (what, body["qa"])
    assert all(set(flag) == {"check", "detail"} and flag["detail"] for flag in body["qa"])
    assert response.headers[HEADER].startswith("flagged 1/1: 0=") and name in response.headers[HEADER]


def test_a_batch_says_which_texts_failed_in_input_order(flagging: Served) -> None:
    engine, client = flagging
    engine.script["Delete 7 files"] = [("删除文件", "stop")]
    texts = ["Open the file.", "Delete 7 files", "Save the file."]
    response = client.post("/translate", json={"texts": texts, "source_lang": "en", "target_lang": "zh"})
    body = response.json()
    assert [[flag["check"] for flag in each] for each in body["qa"]] == [[], ["numbers"], []]
    assert response.headers[HEADER] == "flagged 1/3: 1=numbers"
    passed = client.post(
        "/translate", json={"text": "Open the file.", "source_lang": "en", "target_lang": "zh"}
    )
    assert passed.json()["qa"] == [] and passed.headers[HEADER] == "ok"


def test_a_request_turns_the_checks_off_or_is_refused_for_a_value_that_is_no_policy(flagging: Served) -> None:
    _, client = flagging
    off = client.post(
        "/translate", json={"text": "Delete 3 files", "source_lang": "en", "target_lang": "zh", "qa": "off"}
    )
    assert "qa" not in off.json() and HEADER not in off.headers
    bad = client.post(
        "/translate", json={"text": "Open", "source_lang": "en", "target_lang": "zh", "qa": "loud"}
    )
    assert bad.status_code == 422 and "qa must be one of off, flag, retry" in bad.json()["error"]["message"]


def test_other_dialects_keep_their_shape_and_say_it_in_the_header(flagging: Served) -> None:
    engine, client = flagging
    engine.script["Remove 5 images"] = [("删除图像", "stop")]
    deepl = client.post(
        "/v2/translate", json={"text": ["Remove 5 images", "Open"], "target_lang": "ZH", "source_lang": "EN"}
    )
    assert deepl.status_code == 200 and set(deepl.json()) == {"translations"}
    assert deepl.headers[HEADER] == "flagged 1/2: 0=numbers"
    libre = client.post(
        "/libretranslate/translate", json={"q": "Remove 5 images", "source": "en", "target": "zh"}
    )
    assert set(libre.json()) == {"translatedText"} and libre.headers[HEADER] == "flagged 1/1: 0=numbers"
    immersive = client.post(
        "/immersive/translate", json={"text_list": ["Open"], "source_lang": "en", "target_lang": "zh"}
    )
    assert set(immersive.json()) == {"translations"} and immersive.headers[HEADER] == "ok"
    chat = client.post(
        "/v1/chat/completions", json={"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
    )
    assert chat.status_code == 200 and chat.headers[HEADER] == "ok"


def test_flags_are_counted_by_check_and_written_to_the_log_line(
    flagging: Served, caplog: pytest.LogCaptureFixture
) -> None:
    engine, client = flagging
    engine.script["Close 9 tabs"] = [("关闭标签页", "stop")]
    with caplog.at_level("INFO", ACCESS_LOG):
        client.post("/translate", json={"text": "Close 9 tabs", "source_lang": "en", "target_lang": "zh"})
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == ACCESS_LOG]
    assert lines[-1]["qa"] == "flagged 1/1: 0=numbers"
    # Labelled with the pool this replica serves: `default`, for a config without pools.
    assert flag_counts(client)[("numbers", "default")] >= 1


def test_retry_keeps_the_second_answer_only_when_it_fails_fewer_checks() -> None:
    with served(qa="retry") as (engine, client):
        engine.script["Delete 3 files"] = [("删除文件", "stop"), ("删除 3 个文件", "stop")]
        better = client.post(
            "/translate", json={"text": "Delete 3 files", "source_lang": "en", "target_lang": "zh"}
        )
        assert better.json()["result"] == "删除 3 个文件" and better.json()["qa"] == []
        assert better.headers[HEADER] == "ok" and engine.calls_for("Delete 3 files") == 2
        engine.script["Delete 4 files"] = [("删除文件", "stop"), ("删除删除删除删除删除文件", "stop")]
        worse = client.post(
            "/translate", json={"text": "Delete 4 files", "source_lang": "en", "target_lang": "zh"}
        )
        assert worse.json()["result"] == "删除文件" and [f["check"] for f in worse.json()["qa"]] == [
            "numbers"
        ]
        assert engine.calls_for("Delete 4 files") == 2
        fine = client.post(
            "/translate", json={"text": "Open the file.", "source_lang": "en", "target_lang": "zh"}
        )
        assert fine.json()["qa"] == [] and engine.calls_for("Open the file.") == 1  # passed: asked once
        # A greedy request's second try is sampled: greedy decoding would give the same answer.
        engine.script["Delete 5 files"] = [("删除文件", "stop")]
        client.post(
            "/translate",
            json={"text": "Delete 5 files", "source_lang": "en", "target_lang": "zh", "temperature": 0},
        )
        assert [s.temperature for s in engine.samplings[-2:]] == [0.0, 0.7]


def test_flag_never_calls_the_engine_twice(flagging: Served) -> None:
    engine, client = flagging
    engine.script["Move 2 layers"] = [("移动图层", "stop"), ("移动 2 个图层", "stop")]
    response = client.post(
        "/translate", json={"text": "Move 2 layers", "source_lang": "en", "target_lang": "zh"}
    )
    assert response.json()["result"] == "移动图层" and engine.calls_for("Move 2 layers") == 1


def test_the_key_policy_applies_between_the_request_and_the_pool() -> None:
    review = Review(make_config(qa="flag").replica, Metrics(FakeEngine(), lambda: 0), {"kid-retry": "retry"})
    token = priority.KEY.set("kid-retry")
    try:
        assert review.policy(None) == "retry" and review.policy("off") == "off"
    finally:
        priority.KEY.reset(token)
    assert review.policy(None) == "flag"


def test_a_streams_last_event_carries_its_checks(flagging: Served) -> None:
    _, client = flagging
    body = {"text": "Delete 3 files", "source_lang": "en", "target_lang": "zh", "stream": True}
    with client.stream("POST", "/translate", json=body) as response:
        events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
    done = events[-1]
    # The fake engine streams "<N>" (N the prompt's length): the source's 3 is not in it.
    assert done["done"] is True and [flag["check"] for flag in done["qa"]] == ["numbers"]


class FusingEngine(FakeEngine):
    """A Chimera's engine: every fusion answers `answer`."""

    def __init__(self) -> None:
        super().__init__(max_model_len=4000)
        self.model_name = "fake-chimera"
        self.answer = ""

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation:
        done = await super().generate(prompt, sampling, request_id, priority)
        return Generation(self.answer, done.prompt_tokens, 4, "stop")


def test_with_a_chimera_pool_a_text_still_flagged_has_its_two_answers_fused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    chimera = FusingEngine()
    with serve_in_thread(create_app(chimera, make_config(), "chimera")) as chimera_url:
        with httpx.Client(base_url=chimera_url, timeout=10) as client:
            wait_ready(client)
        with served(qa="retry", chimera_url=chimera_url) as (engine, client):
            engine.script["Delete 3 files"] = [("删除文件", "stop"), ("删掉文件", "stop")]
            chimera.answer = "删除 3 个文件"
            with caplog.at_level("INFO", ACCESS_LOG):
                body = {"text": "Delete 3 files", "source_lang": "en", "target_lang": "zh"}
                fused = client.post("/translate", json=body)
            assert fused.json()["result"] == "删除 3 个文件" and fused.json()["qa"] == [], fused.json()
            sent, fusions = chimera.given[-1], len(chimera.given)  # the warm-up came first
            assert "删除文件" in sent.messages[0]["content"] and "删掉文件" in sent.messages[0]["content"]
            line = [json.loads(r.getMessage()) for r in caplog.records if r.name == ACCESS_LOG][-1]
            assert line["qa_retried"] == 1 and line["qa_fused"] == 1 and line["qa_replaced"] == 1
            # A fusion no better than the answers it fused is dropped: the first answer stands.
            engine.script["Delete 4 files"] = [("删除文件", "stop")]
            chimera.answer = "删除删除删除删除删除文件"
            kept = client.post(
                "/translate", json={"text": "Delete 4 files", "source_lang": "en", "target_lang": "zh"}
            )
            assert kept.json()["result"] == "删除文件" and [f["check"] for f in kept.json()["qa"]] == [
                "numbers"
            ]
            assert len(chimera.given) == fusions + 1


def test_a_kept_second_answer_is_what_the_cache_answers_next() -> None:
    with served(qa="retry", cache_entries=100) as (engine, client):
        engine.script["Delete 6 files"] = [("删除文件", "stop"), ("删除 6 个文件", "stop")]
        body = {"text": "Delete 6 files", "source_lang": "en", "target_lang": "zh"}
        first = client.post("/translate", json=body).json()
        again = client.post("/translate", json=body).json()
        assert first["result"] == again["result"] == "删除 6 个文件" and again["cached"] is True
        assert again["qa"] == [] and engine.calls_for("Delete 6 files") == 2  # none for the second request
