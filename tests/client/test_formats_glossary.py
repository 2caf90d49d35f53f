"""Pure parts of `translate`: file formats round-trip, glossary and keep lists, segment plans, retry maths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hunyuan_serve.client.settings import ClientSettings, parse_retry_after, retry_delay
from hunyuan_serve.localization.formats import FormatError, detect_format, parse_json, parse_text
from hunyuan_serve.localization.glossary import FixedTerms, GlossaryError, load_glossary, parse_glossary
from hunyuan_serve.localization.segments import Action, finish, plan_segment

TEXTS = [
    "one\ntwo\n",
    "one\n\n\ntwo",
    "crlf line\r\n\r\nsecond\r\n",
    "",
    "\n",
    "  indented\n\ttabbed  \n",
]


@pytest.mark.parametrize("content", TEXTS)
def test_text_round_trip(content: str) -> None:
    doc = parse_text(content)
    assert doc.render(doc.segments) == content


def test_text_segments_are_lines_with_blanks_kept() -> None:
    doc = parse_text("a\n\nb\n")
    assert doc.segments == ("a", "", "b")
    assert doc.labels == ("line 1", "line 2", "line 3")
    assert doc.render(["A", "", "B"]) == "A\n\nB\n"


JSONS = [
    '{\n    "Loading...": "Loading...",\n    "txt2img": "txt2img"\n}\n',  # WebUI style: flat, indent 4
    '{\n  "menu": {\n    "file": "File",\n    "items": [\n      "Open",\n      3,\n      null\n    ]\n  },\n'
    '  "n": 2\n}',
    '{"a": "b", "c": ["d", 1.5, false]}',
    '{"a": "b", "c": {"d": "e"}}',
    '{\n    "本翻译由": "御坂桜 提供",\n    "⤡": "⤡"\n}\n',
    "{}",
]


@pytest.mark.parametrize("content", JSONS)
def test_json_round_trip(content: str) -> None:
    doc = parse_json(content)
    assert doc.render(doc.segments) == content


def test_json_values_translated_keys_and_other_values_kept() -> None:
    doc = parse_json('{"menu": {"file": "File", "items": ["Open", 3]}, "n": true}')
    assert doc.segments == ("File", "Open")
    assert doc.labels == ("menu.file", "menu.items[0]")
    out = json.loads(doc.render(["文件", "打开"]))
    assert out == {"menu": {"file": "文件", "items": ["打开", 3]}, "n": True}


@pytest.mark.parametrize("content", ["[1, 2]", '"text"', "{broken"])
def test_json_must_be_an_object(content: str) -> None:
    with pytest.raises(FormatError):
        parse_json(content)


@pytest.mark.parametrize(
    ("name", "content", "fmt"),
    [
        ("ui.json", "x", "json"),
        ("a.txt", "{}", "text"),
        (None, '{"a": "b"}', "json"),
        (None, "{not json", "text"),
        (None, "plain", "text"),
        ("notes", "[1]", "text"),
    ],
)
def test_detect_format(name: str | None, content: str, fmt: str) -> None:
    assert detect_format(name, content) == fmt


def test_parse_glossary_formats() -> None:
    assert parse_glossary('{"Checkpoint Merger": "模型合并", "LoRA": ""}') == {
        "Checkpoint Merger": "模型合并",
        "LoRA": "LoRA",
    }
    text = "# comment\nTrain\t训练\nPrompt = 提示词\nDreambooth\n\n"
    assert parse_glossary(text) == {"Train": "训练", "Prompt": "提示词", "Dreambooth": "Dreambooth"}
    with pytest.raises(GlossaryError, match="must map terms to strings"):
        parse_glossary('{"a": 1}')


def test_load_glossary_and_keep_list(tmp_path: Path) -> None:
    (tmp_path / "g.tsv").write_text("Train\t训练\n", encoding="utf-8")
    (tmp_path / "keep.txt").write_text("Stable Diffusion\nLoRA = not a glossary line\n", encoding="utf-8")
    glossary = load_glossary(tmp_path / "g.tsv", tmp_path / "keep.txt")
    assert glossary.terms == {
        "Train": "训练",
        "Stable Diffusion": "Stable Diffusion",
        "LoRA = not a glossary line": "LoRA = not a glossary line",
    }
    with pytest.raises(GlossaryError, match="cannot read"):
        load_glossary(tmp_path / "missing.tsv")


GLOSSARY = FixedTerms(
    {"Stable Diffusion": "Stable Diffusion", "Stable Diffusion checkpoint": "SD 模型", "Train": "训练"}
)


@pytest.mark.parametrize(
    ("segment", "sent", "protected"),
    [
        ("Train the model", "训练 the model", ("训练",)),
        ("Trainer settings", "Trainer settings", ()),  # whole words only
        ("Load a Stable Diffusion checkpoint", "Load a SD 模型", ("SD 模型",)),  # longest term wins
        ("Stable Diffusion is fun", "Stable Diffusion is fun", ("Stable Diffusion",)),
        ("See `Train` tab", "See `Train` tab", ()),  # never inside a placeholder
    ],
)
def test_glossary_apply(segment: str, sent: str, protected: tuple[str, ...]) -> None:
    assert GLOSSARY.apply(segment) == (sent, protected)


@pytest.mark.parametrize(
    ("segment", "action", "sent"),
    [
        ("Train", Action.GLOSSARY, "Train"),
        ("  Train  ", Action.GLOSSARY, "Train"),
        ("Stable Diffusion", Action.GLOSSARY, "Stable Diffusion"),
        ("", Action.SKIP, ""),
        ("⤡", Action.SKIP, "⤡"),
        ("{prompt}", Action.SKIP, "{prompt}"),
        ("  Train the model\r", Action.SEND, "训练 the model"),
    ],
)
def test_plan_segment(segment: str, action: Action, sent: str) -> None:
    plan = plan_segment(segment, GLOSSARY)
    assert (plan.action, plan.request) == (action, sent)


def test_finish_keeps_whitespace_and_rejects_broken_placeholders() -> None:
    plan = plan_segment("  Hello {name}\r")
    assert finish(plan, "你好 {name}").text == "  你好 {name}\r"
    broken = finish(plan, "你好 名字")
    assert broken.text == "  Hello {name}\r" and broken.problem == "missing '{name}'"
    assert finish(plan, "  ").problem == "empty translation"
    assert finish(plan, None, "refused").text == "  Hello {name}\r"
    assert finish(plan_segment("Train", GLOSSARY), None).text == "训练"


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("1", 1.0),
        ("0", 0.0),
        (" 7 ", 7.0),
        ("-3", 0.0),
        ("", None),
        (None, None),
        ("soon", None),
        ("Wed, 21 Oct 2015 07:28:10 GMT", 10.0),
    ],
)
def test_parse_retry_after(value: str | None, seconds: float | None) -> None:
    now = 1445412480.0  # 2015-10-21 07:28:00 UTC
    assert parse_retry_after(value, now=now) == seconds


@pytest.mark.parametrize(
    ("attempt", "retry_after", "rand", "delay"),
    [
        (0, None, 0.0, 0.5),
        (1, None, 0.0, 1.0),
        (3, None, 1.0, 6.0),  # 4 s backoff + 50% jitter
        (10, None, 0.0, 30.0),  # capped by backoff_max_s
        (0, 2.0, 0.0, 2.0),  # Retry-After wins over a shorter backoff
        (4, 2.0, 0.0, 8.0),  # a longer backoff wins over Retry-After
        (0, 999.0, 0.0, 120.0),  # Retry-After capped
    ],
)
def test_retry_delay(attempt: int, retry_after: float | None, rand: float, delay: float) -> None:
    assert retry_delay(ClientSettings(), attempt, retry_after, lambda: rand) == pytest.approx(delay)
