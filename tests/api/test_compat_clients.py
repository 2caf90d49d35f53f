"""The official `libretranslatepy` and `deepl` clients, unchanged, against the real stack (`up`: Nginx + a
vLLM replica on the tiny model), and Immersive Translate's request shape through the same Nginx.

Random weights emit EOS at once, so the stack runs with the test knob that ignores it: each answer is then
max_tokens tokens of noise, and the checks are on shapes, codes and detected languages, not on the text.
"""

from __future__ import annotations

import urllib.error
from collections.abc import Iterator

import deepl
import httpx
import pytest
from libretranslatepy import LibreTranslateAPI

from tests.support.shared_stack import SharedStack

pytestmark = [pytest.mark.engine, pytest.mark.nginx]

ENGLISH = "The weather is nice today, let us go for a walk in the park together."
TRADITIONAL = "今天天氣很好，我們一起去公園散步吧。"


Stack = SharedStack


@pytest.fixture(scope="module")
def stack(shared_stack: SharedStack) -> Stack:
    return shared_stack


@pytest.fixture(scope="module")
def libre(stack: Stack) -> LibreTranslateAPI:
    return LibreTranslateAPI(stack.url + "/libretranslate/", api_key="unused-on-loopback")


@pytest.fixture(scope="module")
def translator(stack: Stack) -> Iterator[deepl.Translator]:
    client = deepl.Translator("unused-on-loopback", server_url=stack.url, send_platform_info=False)
    yield client
    client.close()


def test_libretranslatepy_translate(libre: LibreTranslateAPI) -> None:
    # The tiny model's noise may decode to nothing: the check is that the client finds its field.
    assert isinstance(libre.translate("Hello, world.", "en", "zh-Hans", timeout=120), str)
    # source "auto": detected by the replica, the answer's shape is the same for the client.
    assert isinstance(libre.translate(ENGLISH, "auto", "de", timeout=120), str)


def test_libretranslatepy_languages(libre: LibreTranslateAPI) -> None:
    languages = libre.languages(timeout=30)
    codes = {each["code"] for each in languages}
    assert len(languages) == 38 and {"en", "zh-Hans", "zh-Hant", "yue", "bo", "ug"} <= codes
    assert all(each["name"] and len(each["targets"]) == 37 for each in languages)


def test_libretranslatepy_detect(libre: LibreTranslateAPI) -> None:
    found = libre.detect(TRADITIONAL, timeout=30)
    assert found[0]["language"] == "zh-Hant" and 50 < found[0]["confidence"] <= 100
    assert libre.detect(ENGLISH, timeout=30)[0]["language"] == "en"


def test_libretranslatepy_sees_errors_as_libretranslate_sends_them(libre: LibreTranslateAPI) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        libre.translate("Hello", "en", "xx", timeout=30)
    assert refused.value.code == 400
    assert refused.value.read() == b'{"error":"xx is not supported"}'


def test_deepl_translate_text_single(translator: deepl.Translator) -> None:
    result = translator.translate_text(ENGLISH, target_lang="DE")
    assert isinstance(result, deepl.TextResult)
    assert isinstance(result.text, str) and result.detected_source_lang == "EN"
    assert result.billed_characters == len(ENGLISH)


def test_deepl_translate_text_list(translator: deepl.Translator) -> None:
    results = translator.translate_text(["Hello", "World"], source_lang="EN", target_lang="ZH-HANT")
    assert isinstance(results, list) and len(results) == 2
    assert all(isinstance(each.text, str) and each.detected_source_lang == "EN" for each in results)
    traditional = translator.translate_text(TRADITIONAL, target_lang="EN-US")
    assert isinstance(traditional, deepl.TextResult) and traditional.detected_source_lang == "ZH"


def test_deepl_languages(translator: deepl.Translator) -> None:
    targets = {each.code: each for each in translator.get_target_languages()}
    assert {"EN-US", "EN-GB", "PT-BR", "PT-PT", "ZH-HANS", "ZH-HANT", "DE"} <= set(targets)
    assert targets["DE"].supports_formality is False
    sources = [each.code for each in translator.get_source_languages()]
    assert "EN" in sources and sources.count("ZH") == 1


def test_deepl_usage(translator: deepl.Translator) -> None:
    usage = translator.get_usage()
    assert usage.character.valid and not usage.any_limit_reached


def test_deepl_refusals_reach_the_client_as_deepl_errors(translator: deepl.Translator) -> None:
    with pytest.raises(deepl.DeepLException, match="Value for 'target_lang' not supported"):
        translator.translate_text("Hello", target_lang="XX")
    with pytest.raises(deepl.DeepLException, match="formality"):
        translator.translate_text("Hello", target_lang="DE", formality="more")


def test_immersive_translate_through_nginx(stack: Stack) -> None:
    # The custom API's shape as Immersive Translate documents it: immersive-translate/i18ns,
    # official/docs/services/custom.md at commit c4990fbb (immersivetranslate.com/docs/services/custom):
    # POST {source_lang, target_lang, text_list}, answered {translations: [{detected_source_lang, text}]}.
    body = {"source_lang": "auto", "target_lang": "zh-CN", "text_list": [ENGLISH, TRADITIONAL]}
    with httpx.Client(base_url=stack.url, trust_env=False, timeout=120) as http:
        answer = http.post("/immersive/translate", json=body)
        assert answer.status_code == 200, answer.text
        found = answer.json()["translations"]
        assert [each["detected_source_lang"] for each in found] == ["en", "zh-TW"]
        assert all(isinstance(each["text"], str) for each in found)
        refused = http.post("/immersive/translate", json={"target_lang": "zh-CN", "text_list": []})
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "empty_text"
