"""JSON (flat, nested, i18next) and Flutter ARB: values replaced where they lie, the rest byte for byte."""

from __future__ import annotations

import json

import pytest

from hunyuan_serve.localization.formats import Options, detect_format, parse

ODD = '{ "a" :"A\\u00e9\\n" ,\n\t"list":[ "x",1 , {"y" : "Y"} ],\r\n "n":null,"t":true, "e": "" }\n'
I18NEXT = (
    '{\n  "key_one": "{{count}} item",\n  "key_other": "{{count}} items",\n'
    '  "nest": {"deep": "$t(key_one)"}\n}'
)
ARB = """{
  "@@locale": "en",
  "helloWorld": "Hello World!",
  "@helloWorld": {
    "description": "The conventional newborn programmer greeting"
  },
  "itemCount": "{count, plural, =0{No items} =1{1 item} other{{count} items}}",
  "@itemCount": {"placeholders": {"count": {"type": "int"}}}
}
"""


@pytest.mark.parametrize("content", [ODD, I18NEXT, ARB])
def test_unchanged_values_give_the_same_bytes(content: str) -> None:
    doc = parse(content, "json")
    assert doc.render(list(doc.segments)) == content


def test_only_the_values_change() -> None:
    doc = parse(ODD, "json")
    assert doc.segments == ("Aé\n", "x", "Y", "")
    assert doc.labels == ("a", "list[0]", "list[2].y", "e")
    out = doc.render(["Ä\u00e9\n", "X", 'say "hi"', ""])
    assert out == ODD.replace('"x"', '"X"').replace('"Y"', '"say \\"hi\\""').replace(
        '"A\\u00e9\\n"', '"\\u00c4\\u00e9\\n"'
    )  # an ASCII file written with \\u escapes keeps writing them
    assert json.loads(out)["list"][2]["y"] == 'say "hi"'


def test_i18next_nesting_and_plural_keys_kept() -> None:
    doc = parse(I18NEXT, "json")
    out = json.loads(doc.render(["{{count}} 个", "{{count}} 个", "$t(key_one)"]))
    assert list(out) == ["key_one", "key_other", "nest"] and out["key_one"] == "{{count}} 个"


def test_arb_messages_only_and_locale_set() -> None:
    doc = parse(ARB, "arb", Options(target="zh"))
    assert doc.labels == ("helloWorld", "itemCount")  # "@" metadata is not translated
    out = doc.render(["你好世界！", doc.segments[1]])
    data = json.loads(out)
    assert data["@@locale"] == "zh" and data["helloWorld"] == "你好世界！"
    assert data["@helloWorld"]["description"] == "The conventional newborn programmer greeting"
    assert out.replace("你好世界！", "Hello World!").replace('"zh"', '"en"') == ARB
    assert detect_format("lib/l10n/app_en.arb", ARB) == "arb"


@pytest.mark.parametrize(
    ("target", "keys"),
    [
        ("ru", ["key_one", "key_other", "key_few", "key_many", "nest"]),
        ("zh", ["key_other", "nest"]),
        ("ar", ["key_one", "key_other", "key_zero", "key_two", "key_few", "key_many", "nest"]),
    ],
)
def test_i18next_plurals_get_the_targets_categories(target: str, keys: list[str]) -> None:
    doc = parse(I18NEXT, "json", Options(target=target))
    out = doc.render([f"[{target}] {text}" for text in doc.segments])
    data = json.loads(out)
    assert list(data) == keys and data["nest"] == {"deep": f"[{target}] $t(key_one)"}
    assert data["key_other"] == f"[{target}] {{{{count}}}} items"
    assert all(data[k] == data["key_other"] for k in keys if k not in ("key_one", "key_other", "nest"))
    assert out.startswith('{\n  "key_') and '",\n  "nest": {' in out  # laid out like its neighbours


def test_i18next_zero_and_ordinals_stay() -> None:
    content = '{"n_zero": "none", "n_one": "one", "n_other": "{{count}}", "p_ordinal_one": "st"}'
    doc = parse(content, "json", Options(target="zh"))
    assert json.loads(doc.render(list(doc.segments))) == {"n_zero": "none", "n_other": "{{count}}"} | {
        "p_ordinal_one": "st"
    }
