"""A long text through the replica: cut into segments sent as one batch, joined, a lost line flagged."""

from __future__ import annotations

import json

from hunyuan_serve.qa import completeness
from tests.support.qa_scripted import CHINESE, served

# The fake engine counts a character as a token: a target of 20 cuts each paragraph at its sentences
# (each of at most 20 characters, and each its own: identical ones would share one engine call). No
# digits: the scripted answers have none, and a number lost is a flag of its own.
NAMES = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"]
PARAGRAPHS = [f"Part {name} starts. Then {name} more. End of {name}." for name in NAMES]
LONG = "\n\n".join(PARAGRAPHS)
BODY = {"source_lang": "en", "target_lang": "zh"}


def test_a_long_text_is_cut_sent_as_one_batch_and_joined_paragraph_for_paragraph() -> None:
    with served(segment_tokens=20) as (engine, client):
        warm = len(engine.asked)  # the warm-up's
        response = client.post("/translate", json={**BODY, "text": LONG})
        assert response.status_code == 200, response.text
        result = response.json()["result"]
        assert completeness.paragraphs(result) == len(PARAGRAPHS)
        # Every sentence its own prompt, all in the engine at once (one batch shared by its steps).
        assert len(engine.asked) - warm == 3 * len(PARAGRAPHS) == engine.stats.max_running
        assert result.split("\n\n") == [" ".join([CHINESE] * 3)] * len(PARAGRAPHS)
        assert response.json()["qa"] == []


def test_short_texts_of_a_batch_go_as_they_came_beside_a_long_one() -> None:
    with served(segment_tokens=20) as (engine, client):
        texts = ["Short one", LONG, "  Short two  "]
        results = client.post("/translate", json={**BODY, "texts": texts}).json()["results"]
        assert results[0] == results[2] == CHINESE
        assert completeness.paragraphs(results[1]) == len(PARAGRAPHS)
        assert sum("  Short two  " in prompt.messages[0]["content"] for prompt in engine.given) == 1


def test_a_segment_that_lost_a_line_is_flagged_and_under_retry_sent_again_alone() -> None:
    lines = [f"Line {name} of the notes" for name in NAMES[:8]]  # two lines fit in 47 characters
    text = "\n".join(lines)
    for policy, calls in (("flag", 1), ("retry", 2)):
        with served(segment_tokens=47) as (engine, client):
            for first in ("one", "five", "seven"):  # the other segments, answered line for line
                engine.script[f"Line {first} of the notes"] = [("笔记的一行\n笔记的又一行", "stop")]
            # One line lost, the other answered in full (a line cut short would be length_ratio too).
            engine.script["Line three of the notes"] = [
                ("笔记的第三行只剩这一行", "stop"),
                ("笔记的第三行\n笔记的第四行", "stop"),
            ]
            warm = len(engine.asked)
            answer = client.post("/translate", json={**BODY, "text": text, "qa": policy}).json()
            assert engine.calls_for("Line three of the notes") == calls
            assert (
                engine.calls_for("Line one of the notes") == 1 and len(engine.asked) - warm == 4 + calls - 1
            )
            if policy == "flag":
                assert [flag["check"] for flag in answer["qa"]] == ["lines"]
            else:
                assert answer["qa"] == [] and completeness.lines(answer["result"]) == 8


def test_an_empty_segment_is_a_lost_line_of_the_whole() -> None:
    with served(segment_tokens=20) as (engine, client):
        engine.script["Then two more."] = [("", "stop")]
        answer = client.post("/translate", json={**BODY, "text": LONG}).json()
        flags = {flag["check"]: flag["detail"] for flag in answer["qa"]}
        assert "36 segments sent, 35 answered" in flags["lines"]


def test_a_long_text_streamed_is_answered_whole_at_the_end() -> None:
    with served(segment_tokens=20) as (_, client):
        response = client.post("/translate", json={**BODY, "text": LONG, "stream": True})
        events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
        assert events[-1]["done"] is True
        assert completeness.paragraphs(events[-1]["result"]) == len(PARAGRAPHS)
        assert "".join(event.get("delta", "") for event in events) == events[-1]["result"]


def test_a_segment_over_the_budget_is_a_413_naming_the_callers_text() -> None:
    code = "```\n" + "word " * 800 + "\n```"  # never cut: over the fake's 4000-token window whole
    with served(segment_tokens=20) as (_, client):
        batch = client.post("/translate", json={**BODY, "texts": ["Hi", f"{LONG}\n\n{code}"]})
        assert batch.status_code == 413
        assert batch.json()["error"]["message"].startswith("a segment of texts[1] makes a prompt")


def test_segment_tokens_0_never_cuts() -> None:
    with served(segment_tokens=0) as (engine, client):
        warm = len(engine.asked)
        client.post("/translate", json={**BODY, "text": LONG})
        assert len(engine.asked) - warm == 1
