"""/translate's instruction fields (glossary, context, style, preserve_format) over HTTP, scripted engine."""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from hunyuan_serve.families import FAMILIES, FEW_SHOT, HUNYUAN_MT, HY_MT2, HY_MT15
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.families.build import build_prompt
from hunyuan_serve.languages import find_language
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.engine.interface import Generation, Sampling
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready, wait_until

# Small limits, so each bound is reachable in a test (and shown to come from the config).
LIMITS = {
    "max_glossary_terms": 3,
    "max_glossary_term_chars": 12,
    "max_context_chars": 2000,
    "max_style_chars": 40,
}
EN, ZH, FR = find_language("en"), find_language("zh"), find_language("fr")


class ScriptedEngine(FakeEngine):
    """The fake engine that keeps every prompt it got and, when given `reply`, answers with it."""

    def __init__(self) -> None:
        super().__init__(max_model_len=1000)
        self.prompts: list[Prompt] = []
        self.reply: Callable[[Prompt], str] | None = None

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation:
        self.prompts.append(prompt)
        generation = await super().generate(prompt, sampling, request_id, priority)
        return generation if self.reply is None else dataclasses.replace(generation, text=self.reply(prompt))


Served = tuple[ScriptedEngine, httpx.Client]


@pytest.fixture(scope="module")
def apps() -> Iterator[dict[str, Served]]:
    """One replica app per family, all with the small LIMITS."""
    served: dict[str, Served] = {}
    with contextlib.ExitStack() as stack:
        for family in FAMILIES:
            engine = ScriptedEngine()
            url = stack.enter_context(serve_in_thread(create_app(engine, make_config(**LIMITS), family)))
            client = stack.enter_context(httpx.Client(base_url=url, timeout=10))
            wait_ready(client)
            served[family] = (engine, client)
        yield served


@pytest.fixture(autouse=True)
def _no_reply(apps: dict[str, Served]) -> Iterator[None]:
    yield
    for engine, _ in apps.values():
        engine.reply = None


def _post(client: httpx.Client, **fields: Any) -> httpx.Response:
    return client.post("/translate", json={"source_lang": "en", "target_lang": "zh", **fields})


def _sent(engine: ScriptedEngine) -> str:
    prompt = engine.prompts[-1]
    return prompt.messages[0]["content"] if prompt.is_chat else prompt.text


FEATURE_CASES = {
    "glossary object, only the terms in the text": (
        HY_MT15,
        {
            "text": "Load the LoRA on the GPU",
            "glossary": {"GPU": "显卡", "LoRA": "LoRA", "VAE": "变分自编码器"},
        },
        {"glossary": {"GPU": "显卡", "LoRA": "LoRA"}},
    ),
    "glossary list": (
        HY_MT2,
        {"text": "Use the GPU", "glossary": [{"source": "GPU", "target": "显卡"}]},
        {"glossary": {"GPU": "显卡"}},
    ),
    "glossary with no term in the text is the plain prompt": (
        HY_MT15,
        {"text": "Hello there", "glossary": {"GPU": "显卡"}},
        {},
    ),
    "context (HY-MT1.5 contextual)": (
        HY_MT15,
        {"text": "It is fast.", "context": "We bought a new GPU."},
        {"context": "We bought a new GPU."},
    ),
    "context (Hy-MT2 background)": (
        HY_MT2,
        {"text": "It is fast.", "context": "  We bought a new GPU.  "},
        {"context": "We bought a new GPU."},
    ),
    "style (Hy-MT2)": (HY_MT2, {"text": "Hello", "style": "formal"}, {"style": "formal"}),
    "formatted (HY-MT1.5)": (
        HY_MT15,
        {"text": "Click <b>Save</b> now", "preserve_format": True},
        {"preserve_format": True},
    ),
    "preserve_format false is the plain prompt": (HY_MT2, {"text": "Hi", "preserve_format": False}, {}),
}


@pytest.mark.parametrize("name", list(FEATURE_CASES))
def test_each_field_reaches_the_engine_as_the_familys_template(apps: dict[str, Served], name: str) -> None:
    family, fields, expected_features = FEATURE_CASES[name]
    engine, client = apps[family]
    response = _post(client, **fields)
    assert response.status_code == 200, response.text
    expected = build_prompt(family, EN, ZH, fields["text"], **expected_features)
    assert engine.prompts[-1] == expected


def test_batch_gives_each_text_its_own_terms(apps: dict[str, Served]) -> None:
    engine, client = apps[HY_MT15]
    glossary = {"GPU": "显卡", "LoRA": "LoRA"}
    response = _post(client, texts=["a GPU", "a LoRA", "nothing"], glossary=glossary, max_tokens=7)
    assert response.status_code == 200, response.text
    got = {_content(p) for p in engine.prompts[-3:]}
    expected = {
        _content(build_prompt(HY_MT15, EN, ZH, text, glossary=glossary))
        for text in ("a GPU", "a LoRA", "nothing")
    }
    assert got == expected and len(got) == 3


def _content(prompt: Prompt) -> str:
    return prompt.messages[0]["content"]


UNSUPPORTED = [
    (HUNYUAN_MT, {"glossary": {"Hello": "你好"}}, "glossary", "hy-mt1.5, hy-mt2"),
    # A term that is not in the text still asks for the feature: the answer does not depend on the text.
    (HUNYUAN_MT, {"glossary": {"GPU": "显卡"}}, "glossary", "hy-mt1.5, hy-mt2"),
    (FEW_SHOT, {"context": "before"}, "context", "hy-mt1.5, hy-mt2"),
    (HY_MT15, {"style": "formal"}, "style", "hy-mt2"),
    (HUNYUAN_MT, {"style": "formal"}, "style", "hy-mt2"),
    (HY_MT2, {"preserve_format": True}, "preserve_format", "hy-mt1.5"),
    (HUNYUAN_MT, {"preserve_format": True}, "preserve_format", "hy-mt1.5"),
]


@pytest.mark.parametrize(("family", "fields", "feature", "have"), UNSUPPORTED)
def test_a_field_the_family_lacks_is_400_naming_it_and_the_families_that_have_it(
    apps: dict[str, Served], family: str, fields: dict[str, Any], feature: str, have: str
) -> None:
    engine, client = apps[family]
    calls = engine.calls
    response = _post(client, text="Hello", **fields)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "unsupported_feature"
    assert f"prompt family {family} has no official prompt for {feature}" in error["message"]
    assert error["message"].endswith(f"families that have one: {have}")
    assert engine.calls == calls
    assert _post(client, text="Hello").status_code == 200  # nothing else affected


@pytest.mark.parametrize("family", [HY_MT15, HY_MT2])
def test_two_features_at_once_are_refused_saying_plainly_that_no_family_has_them(
    apps: dict[str, Served], family: str
) -> None:
    _, client = apps[family]
    response = _post(client, text="Hello GPU", glossary={"GPU": "显卡"}, context="a manual")
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "unsupported_feature"
    assert error["message"] == (
        f"prompt family {family} has no official prompt for glossary together with context; no family has "
        "one (each official prompt takes one of them at a time)"
    )


BAD_FIELDS = [
    ({"glossary": "GPU=显卡"}, 422, "invalid_glossary", "glossary must be an object"),
    ({"glossary": 5}, 422, "invalid_glossary", "glossary must be an object"),
    ({"glossary": [{"source": "GPU"}]}, 422, "invalid_glossary", "glossary[0]: each entry must be"),
    ({"glossary": {"GPU": 3}}, 422, "invalid_glossary", "source and target must be strings"),
    ({"glossary": {"GPU": "  "}}, 422, "invalid_glossary", "must not be empty"),
    ({"glossary": {f"t{i}": "x" for i in range(4)}}, 422, "invalid_glossary", "at most 3 are allowed"),
    ({"glossary": {"GPU": "x" * 13}}, 422, "invalid_glossary", "longer than 12 characters"),
    ({"context": 5}, 422, "invalid_parameter", "context must be a string"),
    ({"context": "a\x00b"}, 422, "invalid_text", "context contains a NUL"),
    ({"context": "c" * 2001}, 413, "context_too_long", "the limit is 2000 characters"),
    ({"style": ["formal"]}, 422, "invalid_parameter", "style must be a string"),
    ({"style": "s" * 41}, 413, "style_too_long", "the limit is 40 characters"),
    ({"preserve_format": "yes"}, 422, "invalid_parameter", "preserve_format must be true or false"),
    ({"preserve_format": 1}, 422, "invalid_parameter", "preserve_format must be true or false"),
]


@pytest.mark.parametrize(("fields", "status", "code", "words"), BAD_FIELDS)
def test_malformed_or_oversized_fields_are_a_clear_4xx(
    apps: dict[str, Served], fields: dict[str, Any], status: int, code: str, words: str
) -> None:
    # Hy-MT2 has glossary, context and style, so each of these is refused for its shape, not its family.
    _, client = apps[HY_MT2]
    response = _post(client, text="Hello GPU", **fields)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code
    assert words in response.json()["error"]["message"]


def test_empty_glossary_and_null_fields_are_not_asked_for(apps: dict[str, Served]) -> None:
    engine, client = apps[HUNYUAN_MT]
    response = _post(client, text="Hi", glossary={}, context=None, style="  ", preserve_format=None)
    assert response.status_code == 200, response.text
    assert engine.prompts[-1] == build_prompt(HUNYUAN_MT, EN, ZH, "Hi")


def test_a_context_over_the_token_budget_is_413_saying_the_context_counts(apps: dict[str, Served]) -> None:
    _, client = apps[HY_MT15]
    response = _post(client, text="It is fast.", context="c" * 1500, max_tokens=100)
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "context_too_long"
    assert "text with its context (1500 characters)" in error["message"]
    assert "the limit is 900 tokens" in error["message"]
    batch = _post(client, texts=["a", "b"], context="c" * 1500, max_tokens=100).json()["error"]
    assert batch["message"].startswith("texts[0] with its context")


def test_formatted_answer_has_its_markup_restored(apps: dict[str, Served]) -> None:
    engine, client = apps[HY_MT15]
    engine.reply = lambda _prompt: "<target>点击<s1>保存</s1>，<s2></s2>然后<s3>关闭</s3></target>"
    text = "Click <b>Save</b>,<br/> then *close*"
    response = _post(client, text=text, preserve_format=True)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["result"] == "点击<b>保存</b>，<br/>然后*关闭*"
    assert body["format_lost"] == []


def test_lost_markup_is_named_and_not_returned_broken(apps: dict[str, Served]) -> None:
    engine, client = apps[HY_MT15]
    # The model dropped </s1> and never returned s2: both pairs are reported, neither is half-restored.
    engine.reply = lambda _prompt: "<target>点击<s1>保存，然后关闭</target>"
    texts = ["Click <b>Save</b>, then <i>close</i>", "Plain <b>bold</b>!"]
    response = _post(client, texts=texts, preserve_format=True)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["results"] == ["点击保存，然后关闭", "点击保存，然后关闭"]
    assert body["format_lost"] == [["<b></b>", "<i></i>"], ["<b></b>"]]
    assert not any("<s" in result or "<b>" in result for result in body["results"])


def test_without_preserve_format_the_answer_is_returned_as_is(apps: dict[str, Served]) -> None:
    engine, client = apps[HY_MT15]
    engine.reply = lambda _prompt: "<target>x</target>"
    body = _post(client, text="Hello <b>there</b>").json()
    assert body["result"] == "<target>x</target>" and "format_lost" not in body


def test_a_cached_formatted_answer_is_read_the_same_way(apps: dict[str, Served]) -> None:
    engine, client = apps[HY_MT15]
    engine.reply = lambda _prompt: "<target><s1>保存</s1></target>"
    first = _post(client, text="<b>Save</b> it", preserve_format=True).json()
    engine.reply = lambda _prompt: "never asked"
    second = _post(client, text="<b>Save</b> it", preserve_format=True).json()
    assert (first["cached"], second["cached"]) == (False, True)
    assert first["result"] == second["result"] == "<b>保存</b>"
    assert second["format_lost"] == []


@pytest.mark.parametrize(
    ("family", "one", "other"),
    [
        (HY_MT15, {"context": "The menu."}, {"context": "The river."}),
        (HY_MT15, {}, {"context": "The menu."}),
        (HY_MT2, {"style": "formal"}, {"style": "casual"}),
        (HY_MT15, {"glossary": {"Bank": "银行"}}, {"glossary": {"Bank": "河岸"}}),
        (HY_MT15, {}, {"glossary": {"Bank": "银行"}}),
        (HY_MT15, {}, {"preserve_format": True}),
    ],
)
def test_requests_differing_in_one_field_share_no_cache_entry(
    apps: dict[str, Served], family: str, one: dict[str, Any], other: dict[str, Any]
) -> None:
    engine, client = apps[family]
    text = f"Bank {len(engine.prompts)}"  # a text no earlier test cached
    calls = engine.calls
    first = _post(client, text=text, **one).json()
    second = _post(client, text=text, **other).json()
    again = _post(client, text=text, **other).json()
    assert (first["cached"], second["cached"], again["cached"]) == (False, False, True)
    assert engine.calls == calls + 2


def test_glossary_terms_not_in_the_text_do_not_split_the_cache(apps: dict[str, Served]) -> None:
    # The key holds the terms actually sent: a glossary none of whose terms occur sends the plain prompt.
    _, client = apps[HY_MT15]
    assert _post(client, text="Good morning").json()["cached"] is False
    assert _post(client, text="Good morning", glossary={"GPU": "显卡"}).json()["cached"] is True


def test_concurrent_requests_differing_only_in_context_do_not_coalesce(apps: dict[str, Served]) -> None:
    engine, client = apps[HY_MT15]
    calls = engine.calls
    coalesced = _coalesced(client)
    engine.hold()
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            pending = [
                pool.submit(_post, client, text="Same words", context=context) for context in ("One.", "Two.")
            ]
            wait_until(lambda: len(engine.running) == 2, what="both requests running in the engine")
            engine.let_go()
            responses = [future.result() for future in pending]
    finally:
        engine.let_go()
    assert [r.status_code for r in responses] == [200, 200]
    assert engine.calls == calls + 2 and _coalesced(client) == coalesced


def _coalesced(client: httpx.Client) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("hunyuan_coalesced_total "):
            return float(line.split()[1])
    raise AssertionError("no hunyuan_coalesced_total in /metrics")


def test_the_fields_work_for_batch_and_xx_to_xx(apps: dict[str, Served]) -> None:
    engine, client = apps[HY_MT2]
    response = client.post(
        "/translate",
        json={"texts": ["Hello", "Bye"], "source_lang": "en", "target_lang": "fr", "style": "formal"},
    )
    assert response.status_code == 200, response.text
    assert [_content(p) for p in engine.prompts[-2:]] == [
        _content(build_prompt(HY_MT2, EN, FR, text, style="formal")) for text in ("Hello", "Bye")
    ]
