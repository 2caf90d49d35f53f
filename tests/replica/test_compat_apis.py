"""LibreTranslate, DeepL v2 and Immersive Translate routes and source detection, over a scripted engine."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from hunyuan_serve.families import HUNYUAN_MT, HY_MT2, HY_MT15
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.engine.interface import Generation, Sampling
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready

MAX_TEXTS = 4
ENGLISH = "The weather is nice today, let us go for a walk in the park together."
FRENCH = "Il fait beau aujourd'hui, allons nous promener dans le parc ensemble."
SIMPLIFIED = "今天天气很好，我们一起去公园散步吧。"
TRADITIONAL = "今天天氣很好，我們一起去公園散步吧。"


class ScriptedEngine(FakeEngine):
    """The fake engine that keeps every prompt's content and, when given `reply`, answers with it."""

    def __init__(self) -> None:
        super().__init__(max_model_len=4000)
        self.sent: list[str] = []
        self.reply: Callable[[str], str] | None = None

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation:
        content = prompt.messages[0]["content"] if prompt.is_chat else prompt.text
        self.sent.append(content)
        generation = await super().generate(prompt, sampling, request_id, priority)
        return generation if self.reply is None else dataclasses.replace(generation, text=self.reply(content))


Served = tuple[ScriptedEngine, httpx.Client]


@pytest.fixture(scope="module")
def apps() -> Iterator[dict[str, Served]]:
    """hy-mt1.5 (formatted translation), hy-mt2 (context, style) and hunyuan-mt (no instruction field)."""
    served: dict[str, Served] = {}
    with contextlib.ExitStack() as stack:
        for family in (HY_MT15, HY_MT2, HUNYUAN_MT):
            engine = ScriptedEngine()
            # No cache: every test sees its own prompts reach the engine.
            cfg = make_config(max_batch_texts=MAX_TEXTS, cache_entries=0)
            url = stack.enter_context(serve_in_thread(create_app(engine, cfg, family)))
            client = stack.enter_context(httpx.Client(base_url=url, timeout=10))
            wait_ready(client)
            served[family] = (engine, client)
        yield served


@pytest.fixture(autouse=True)
def _fresh(apps: dict[str, Served]) -> Iterator[None]:
    for engine, _ in apps.values():
        engine.sent.clear()
        engine.reply = None
    yield


@pytest.fixture
def client(apps: dict[str, Served]) -> httpx.Client:
    return apps[HY_MT2][1]


@pytest.fixture
def engine(apps: dict[str, Served]) -> ScriptedEngine:
    return apps[HY_MT2][0]


# -- LibreTranslate ------------------------------------------------------------------------------


def test_libre_form_post_as_libretranslatepy_sends_it(client: httpx.Client, engine: ScriptedEngine) -> None:
    response = client.post("/libretranslate/translate", data={"q": "Hello", "source": "en", "target": "de"})
    assert response.status_code == 200, response.text
    assert response.json() == {"translatedText": f"<{len(engine.sent[0])}>"}
    assert "German" in engine.sent[0] and "Hello" in engine.sent[0]
    assert response.headers["access-control-allow-origin"] == "*"


def test_libre_json_batch_keeps_order(client: httpx.Client, engine: ScriptedEngine) -> None:
    engine.reply = lambda content: content.rsplit("\n", 1)[-1].upper()
    response = client.post(
        "/libretranslate/translate", json={"q": ["one", "two"], "source": "en", "target": "fr"}
    )
    assert response.json() == {"translatedText": ["ONE", "TWO"]}


def test_libre_auto_source_reports_each_text(client: httpx.Client, engine: ScriptedEngine) -> None:
    q = [ENGLISH, FRENCH, TRADITIONAL]
    body = client.post("/libretranslate/translate", json={"q": q, "source": "auto", "target": "de"}).json()
    assert [each["language"] for each in body["detectedLanguage"]] == ["en", "fr", "zh-Hant"]
    assert all(50 < each["confidence"] <= 100 for each in body["detectedLanguage"])  # a percentage
    assert len(engine.sent) == 3
    single = client.post(
        "/libretranslate/translate", json={"q": SIMPLIFIED, "source": "auto", "target": "en"}
    )
    assert single.json()["detectedLanguage"]["language"] == "zh-Hans"


@pytest.mark.parametrize(
    ("code", "name"), [("zh-Hans", "中文"), ("zt", "繁体中文"), ("pb", "Portuguese"), ("ZH", "中文")]
)
def test_libre_codes(client: httpx.Client, engine: ScriptedEngine, code: str, name: str) -> None:
    response = client.post("/libretranslate/translate", json={"q": "Hello", "source": "en", "target": code})
    assert response.status_code == 200, response.text
    assert name in engine.sent[0]


def test_libre_languages_with_targets_and_a_get_body(client: httpx.Client) -> None:
    # libretranslatepy sends a form body on its GET (api_key only); it is read, not refused.
    response = client.request("GET", "/libretranslate/languages", data={"api_key": "k"})
    languages = response.json()
    assert len(languages) == 38
    codes = [each["code"] for each in languages]
    assert "zh-Hans" in codes and "zh-Hant" in codes and "zh" not in codes
    english = next(each for each in languages if each["code"] == "en")
    assert english["name"] == "English" and "en" not in english["targets"] and len(english["targets"]) == 37


def test_libre_detect(client: httpx.Client, engine: ScriptedEngine) -> None:
    found = client.post("/libretranslate/detect", data={"q": TRADITIONAL}).json()
    assert found[0]["language"] == "zh-Hant" and 50 < found[0]["confidence"] <= 100
    assert client.post("/libretranslate/detect", json={"q": FRENCH}).json()[0]["language"] == "fr"
    assert engine.sent == []  # detection never reaches the engine


def test_libre_html_through_the_formatted_template(apps: dict[str, Served]) -> None:
    engine, client = apps[HY_MT15]
    engine.reply = lambda content: "<target><s1>Hallo</s1> Welt</target>"
    body = {"q": "<b>Hello</b> world", "source": "en", "target": "de", "format": "html"}
    response = client.post("/libretranslate/translate", json=body)
    assert response.json() == {"translatedText": "<b>Hallo</b> Welt"}
    assert "<s1>Hello</s1> world" in engine.sent[0]


def test_libre_html_by_segments_where_the_family_has_no_template(
    client: httpx.Client, engine: ScriptedEngine
) -> None:
    engine.reply = lambda content: "[" + content.rsplit("\n", 1)[-1].strip() + "]"
    body = {
        "q": '<p class="x">Hello <b>big</b> world</p><br/>',
        "source": "en",
        "target": "de",
        "format": "html",
    }
    response = client.post("/libretranslate/translate", json=body)
    assert response.json() == {"translatedText": '<p class="x">[Hello] <b>[big]</b> [world]</p><br/>'}
    assert len(engine.sent) == 3


def test_libre_alternatives_are_an_empty_list(client: httpx.Client) -> None:
    body = {"q": ["a", "b"], "source": "en", "target": "de", "alternatives": 3}
    assert client.post("/libretranslate/translate", json=body).json()["alternatives"] == [[], []]
    single = {"q": "a", "source": "en", "target": "de", "alternatives": "2"}
    assert client.post("/libretranslate/translate", data=single).json()["alternatives"] == []
    none = client.post("/libretranslate/translate", json={**single, "alternatives": 0}).json()
    assert "alternatives" not in none


LIBRE_BAD = {
    "missing q": ({"source": "en", "target": "de"}, "missing q parameter"),
    "empty q": ({"q": "", "source": "en", "target": "de"}, "missing q parameter"),
    "blank q": ({"q": "  ", "source": "en", "target": "de"}, "q is empty"),
    "q a number": ({"q": 5, "source": "en", "target": "de"}, "q must be a string"),
    "q list with a number": ({"q": ["a", 5], "source": "en", "target": "de"}, "q[1] must be a string"),
    "too many": ({"q": ["a"] * (MAX_TEXTS + 1), "source": "en", "target": "de"}, "exceeds text limit"),
    "missing source": ({"q": "a", "target": "de"}, "missing source parameter"),
    "missing target": ({"q": "a", "source": "en"}, "missing target parameter"),
    "unknown target": ({"q": "a", "source": "en", "target": "xx"}, "xx is not supported"),
    "auto target": ({"q": "a", "source": "en", "target": "auto"}, "auto is not supported"),
    "unknown source": ({"q": "a", "source": "qq", "target": "de"}, "qq is not supported"),
    "source a list": ({"q": "a", "source": ["en"], "target": "de"}, "source must be a language code"),
    "format": ({"q": "a", "source": "en", "target": "de", "format": "pdf"}, "pdf format is not supported"),
    "alternatives": ({"q": "a", "source": "en", "target": "de", "alternatives": "x"}, "not a number"),
}


@pytest.mark.parametrize("case", list(LIBRE_BAD))
def test_libre_bad_input(client: httpx.Client, engine: ScriptedEngine, case: str) -> None:
    body, message = LIBRE_BAD[case]
    response = client.post("/libretranslate/translate", json=body)
    assert response.status_code == 400, response.text
    assert list(response.json()) == ["error"] and message in response.json()["error"]
    assert engine.sent == []


@pytest.mark.parametrize(
    ("content", "headers", "message"),
    [
        (b'{"q": "a", ', {"content-type": "application/json"}, "not valid JSON"),
        (b'["a"]', {"content-type": "application/json"}, "JSON object"),
        (b"q=%ff%fe&source=en&target=de", {"content-type": "application/x-www-form-urlencoded"}, "UTF-8"),
        (b"q=\xff&source=en", {"content-type": "application/x-www-form-urlencoded"}, "UTF-8"),
        (b"--x\r\nbroken", {"content-type": "multipart/form-data; boundary=x"}, ""),
    ],
)
def test_libre_bad_bodies(
    client: httpx.Client, content: bytes, headers: dict[str, str], message: str
) -> None:
    response = client.post("/libretranslate/translate", content=content, headers=headers)
    assert 400 <= response.status_code < 500, response.text
    assert message in response.json()["error"]


def test_libre_multipart_form(client: httpx.Client) -> None:
    files = {"q": (None, "Hello"), "source": (None, "en"), "target": (None, "de")}
    response = client.post("/libretranslate/translate", files=files)
    assert response.status_code == 200, response.text


# -- DeepL v2 ------------------------------------------------------------------------------------


def test_deepl_json_list(client: httpx.Client, engine: ScriptedEngine) -> None:
    engine.reply = lambda content: "ok"
    body = {"text": [ENGLISH, FRENCH], "target_lang": "DE", "show_billed_characters": True}
    response = client.post("/v2/translate", json=body, headers={"Authorization": "DeepL-Auth-Key k"})
    assert response.json() == {
        "translations": [
            {"detected_source_language": "EN", "text": "ok", "billed_characters": len(ENGLISH)},
            {"detected_source_language": "FR", "text": "ok", "billed_characters": len(FRENCH)},
        ]
    }


def test_deepl_form_with_repeated_text(client: httpx.Client, engine: ScriptedEngine) -> None:
    form = [("text", "Hello"), ("text", "World"), ("target_lang", "fr"), ("source_lang", "en")]
    response = client.post(
        "/v2/translate",
        content=httpx.QueryParams(form).__str__().encode(),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert [each["detected_source_language"] for each in response.json()["translations"]] == ["EN", "EN"]
    assert len(engine.sent) == 2


@pytest.mark.parametrize(
    ("target", "name"),
    [
        ("EN-US", "English"),
        ("en-gb", "English"),
        ("PT-BR", "Portuguese"),
        ("ZH-HANS", "中文"),
        ("ZH-HANT", "繁体中文"),
    ],
)
def test_deepl_target_codes(client: httpx.Client, engine: ScriptedEngine, target: str, name: str) -> None:
    response = client.post(
        "/v2/translate", json={"text": ["Hallo"], "source_lang": "DE", "target_lang": target}
    )
    assert response.status_code == 200, response.text
    assert name in engine.sent[0]


def test_deepl_zh_source_is_told_by_script(client: httpx.Client, engine: ScriptedEngine) -> None:
    body = {"text": [TRADITIONAL, SIMPLIFIED], "source_lang": "ZH", "target_lang": "EN-US"}
    found = client.post("/v2/translate", json=body).json()["translations"]
    assert [each["detected_source_language"] for each in found] == ["ZH", "ZH"]
    assert len(engine.sent) == 2  # one core call per script: Traditional and Simplified


def test_deepl_context_is_the_familys_context(apps: dict[str, Served]) -> None:
    engine, client = apps[HY_MT2]
    body = {"text": ["Open"], "source_lang": "EN", "target_lang": "DE", "context": "a menu of a text editor"}
    assert client.post("/v2/translate", json=body).status_code == 200
    assert "a menu of a text editor" in engine.sent[0]
    _, plain = apps[HUNYUAN_MT]
    refused = plain.post("/v2/translate", json=body)
    assert refused.status_code == 400 and "context" in refused.json()["message"]


def test_deepl_weblate_xml_placeholders_kept(client: httpx.Client, engine: ScriptedEngine) -> None:
    engine.reply = lambda content: "[" + content.rsplit("\n", 1)[-1].strip() + "]"
    # Copied from Weblate 5.14.3 (PyPI weblate==5.14.3), weblate/machinery/deepl.py: the JSON body of
    # download_multiple_translations (formality "default", tag_handling "xml", ignore_tags ["x"]) and a
    # placeable as its format_replacement writes it, <x id="N"></x>.
    body = {
        "text": ['Hello <x id="3"></x>, welcome'],
        "source_lang": "EN",
        "target_lang": "DE",
        "formality": "default",
        "tag_handling": "xml",
        "ignore_tags": ["x"],
    }
    found = client.post("/v2/translate", json=body).json()["translations"][0]["text"]
    assert found == '[Hello] <x id="3"></x>[, welcome]'


def test_deepl_ignore_tags_keep_their_text(client: httpx.Client, engine: ScriptedEngine) -> None:
    engine.reply = lambda content: "[" + content.rsplit("\n", 1)[-1].strip() + "]"
    body = {"text": ["Run <code>make up</code> now"], "target_lang": "DE", "source_lang": "EN"}
    body |= {"tag_handling": "html", "ignore_tags": "code,kbd"}
    found = client.post("/v2/translate", json=body).json()["translations"][0]["text"]
    assert found == "[Run] <code>make up</code> [now]"


def test_deepl_languages(client: httpx.Client) -> None:
    sources = client.get("/v2/languages").json()
    assert [each["language"] for each in sources].count("ZH") == 1 and len(sources) == 37
    by_query = client.get("/v2/languages", params={"type": "target"}).json()
    by_body = client.request("GET", "/v2/languages", data={"type": "target"}).json()  # as deepl sends it
    by_post = client.post("/v2/languages", data={"type": "target"}).json()
    assert by_query == by_body == by_post
    targets = {each["language"] for each in by_query}
    assert {"EN-US", "EN-GB", "PT-BR", "PT-PT", "ZH-HANS", "ZH-HANT", "DE", "YUE"} <= targets
    assert all(each["supports_formality"] is False for each in by_query)


def test_deepl_usage(client: httpx.Client) -> None:
    usage = client.get("/v2/usage").json()
    assert usage["character_count"] == 0 and usage["character_limit"] > 10**9


DEEPL_BAD = {
    "missing text": ({"target_lang": "DE"}, 400, "Parameter 'text' not specified."),
    "empty list": ({"text": [], "target_lang": "DE"}, 400, "Parameter 'text' not specified."),
    "empty text": ({"text": [""], "target_lang": "DE"}, 400, "empty text (text[0])"),
    "number": ({"text": [1], "target_lang": "DE"}, 400, "text[0]"),
    "too many": ({"text": ["a"] * (MAX_TEXTS + 1), "target_lang": "DE"}, 413, "Too many texts"),
    "missing target": ({"text": ["a"]}, 400, "Value for 'target_lang' not supported."),
    "unknown target": ({"text": ["a"], "target_lang": "XX"}, 400, "Value for 'target_lang' not supported."),
    "unknown source": ({"text": ["a"], "target_lang": "DE", "source_lang": "XX"}, 400, "'source_lang'"),
    "formality": ({"text": ["a"], "target_lang": "DE", "formality": "more"}, 400, "'formality'"),
    "glossary": ({"text": ["a"], "target_lang": "DE", "glossary_id": "g"}, 400, "'source_lang' is required"),
    "glossaries": ({"text": ["a"], "target_lang": "DE", "glossary_ids": ["g"]}, 400, "'glossary_ids'"),
    "tag_handling": ({"text": ["a"], "target_lang": "DE", "tag_handling": "md"}, 400, "'tag_handling'"),
    "unknown field": ({"text": ["a"], "target_lang": "DE", "colour": 1}, 400, "colour"),
    "custom_instructions": ({"text": ["a"], "target_lang": "DE", "custom_instructions": [1]}, 400, "custom"),
}


@pytest.mark.parametrize("case", list(DEEPL_BAD))
def test_deepl_bad_input(client: httpx.Client, engine: ScriptedEngine, case: str) -> None:
    body, status, message = DEEPL_BAD[case]
    response = client.post("/v2/translate", json=body)
    assert response.status_code == status, response.text
    assert list(response.json()) == ["message"] and message in response.json()["message"]
    assert engine.sent == []


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        (b'{"text": ', "application/json"),
        (b"[1]", "application/json"),
        (b"text=%ff", "application/x-www-form-urlencoded"),
    ],
)
def test_deepl_bad_bodies(client: httpx.Client, content: bytes, kind: str) -> None:
    response = client.post("/v2/translate", content=content, headers={"content-type": kind})
    assert response.status_code == 400 and list(response.json()) == ["message"]


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("kind", ["both", ""])  # given empty is not left out: DeepL's type is source|target
def test_deepl_languages_bad_type(client: httpx.Client, method: str, kind: str) -> None:
    response = client.request(method, "/v2/languages", params={"type": kind})
    assert response.status_code == 400 and response.json() == {"message": "Value for 'type' not supported."}
    form = client.request(method, "/v2/languages", data={"type": kind})  # the deepl client's GET body
    assert form.status_code == 400 and form.json() == response.json()
    assert client.request(method, "/v2/languages").json() == client.get("/v2/languages?type=source").json()


# -- Immersive Translate -------------------------------------------------------------------------


def test_immersive_auto(client: httpx.Client, engine: ScriptedEngine) -> None:
    engine.reply = lambda content: "ok"
    body = {"source_lang": "auto", "target_lang": "zh-CN", "text_list": [ENGLISH, TRADITIONAL]}
    found = client.post("/immersive/translate", json=body).json()
    assert found == {
        "translations": [
            {"detected_source_lang": "en", "text": "ok"},
            {"detected_source_lang": "zh-TW", "text": "ok"},
        ]
    }


def test_immersive_given_source(client: httpx.Client, engine: ScriptedEngine) -> None:
    body = {"source_lang": "fil", "target_lang": "en", "text_list": ["Magandang umaga"]}
    found = client.post("/immersive/translate", json=body).json()["translations"]
    assert found[0]["detected_source_lang"] == "fil" and len(engine.sent) == 1


IMMERSIVE_BAD = {
    "missing list": ({"target_lang": "en"}, 422, "invalid_parameter"),
    "a string": ({"target_lang": "en", "text_list": "a"}, 422, "invalid_parameter"),
    "empty": ({"target_lang": "en", "text_list": []}, 422, "empty_text"),
    "blank": ({"target_lang": "en", "text_list": [" "]}, 422, "empty_text"),
    "too many": ({"target_lang": "en", "text_list": ["a"] * (MAX_TEXTS + 1)}, 413, "too_many_texts"),
    "no target": ({"text_list": ["a"]}, 422, "missing_field"),
    "unknown target": ({"target_lang": "xx", "text_list": ["a"]}, 400, "unsupported_language"),
}


@pytest.mark.parametrize("case", list(IMMERSIVE_BAD))
def test_immersive_bad_input(client: httpx.Client, case: str) -> None:
    body, status, code = IMMERSIVE_BAD[case]
    response = client.post("/immersive/translate", json=body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == code


# -- our /translate without a source ---------------------------------------------------------------


@pytest.mark.parametrize("source", [{}, {"source_lang": "auto"}, {"src_lang": "AUTO"}])
def test_native_detects_a_missing_source(client: httpx.Client, source: dict[str, str]) -> None:
    body = client.post("/translate", json={"text": FRENCH, "target_lang": "en", **source}).json()
    assert body["source_lang"] == "fr"


def test_native_batch_of_one_language(client: httpx.Client) -> None:
    body = client.post("/translate", json={"texts": [ENGLISH, "Save"], "target_lang": "de"}).json()
    assert body["source_lang"] == "en" and "source_langs" not in body


def test_native_mixed_batch(client: httpx.Client, engine: ScriptedEngine) -> None:
    engine.reply = lambda content: "ok"
    body = client.post("/translate", json={"texts": [ENGLISH, FRENCH, ENGLISH], "target_lang": "de"}).json()
    assert body["source_langs"] == ["en", "fr", "en"] and body["source_lang"] == "en"
    assert body["results"] == ["ok", "ok", "ok"] and body["cached"] == [False, False, False]


def test_native_stream_with_a_detected_source(client: httpx.Client) -> None:
    body = {"text": SIMPLIFIED, "target_lang": "en", "stream": True}
    events = [
        line for line in client.post("/translate", json=body).text.splitlines() if line.startswith("data:")
    ]
    done = json.loads(events[-1].removeprefix("data:"))
    assert done["done"] is True and done["source_lang"] == "zh"


def test_nothing_here_answers_5xx(client: httpx.Client) -> None:
    """Every route and odd body: a 4xx (or 200), never the engine's or a crash's 5xx."""
    odd: list[Any] = [b"", b"null", b"{}", b'{"q": {}}', b'{"text": {"a": 1}}', b"\x00\x01", b"a=b&&&", b"%"]
    routes = ["/libretranslate/translate", "/libretranslate/detect", "/v2/translate", "/immersive/translate"]
    for route in routes:
        for content in odd:
            for kind in ("application/json", "application/x-www-form-urlencoded", ""):
                response = client.post(route, content=content, headers={"content-type": kind} if kind else {})
                assert response.status_code < 500, (route, content, kind, response.text)


@pytest.mark.parametrize(
    ("method", "path", "status", "shape"),
    [
        ("GET", "/v2/no-such-route", 404, ["message"]),
        ("PATCH", "/v3/glossaries/g", 405, ["message"]),
        ("GET", "/v2/translate", 405, ["message"]),
        ("GET", "/libretranslate/translate", 405, ["error"]),
        ("POST", "/libretranslate/suggest", 404, ["error"]),  # LibreTranslate's, not served here
    ],
)
def test_unknown_routes_answer_in_the_dialects_shape(
    client: httpx.Client, method: str, path: str, status: int, shape: list[str]
) -> None:
    response = client.request(method, path)
    assert response.status_code == status and list(response.json()) == shape, response.text
