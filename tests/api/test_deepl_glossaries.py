"""Glossaries and per-key usage through the official deepl client, unchanged, against the replica app (a
scripted engine in-process, a real keys file and store); the real stack is test_deepl_stack's."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import deepl
import httpx
import pytest
from deepl.api_data import MultilingualGlossaryDictionaryEntries

from hunyuan_serve import auth
from hunyuan_serve.config import ServeConfig
from hunyuan_serve.families import HUNYUAN_MT, HY_MT15
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.usage import key_label
from tests.support.replica_fakes import FakeEngine, serve_in_thread, wait_ready

KEY_A = "sk-glossary-owner-a1b2c3"
KEY_B = "sk-glossary-other-d4e5f6"
KEY_SMALL = "sk-small-quota-g7h8i9"
SMALL_LIMIT = 20


class PromptEngine(FakeEngine):
    """The fake engine, keeping the text of every prompt it was given."""

    def prompt_texts(self) -> list[str]:
        return [p.messages[0]["content"] if p.is_chat else p.text for p in self.given]


@dataclass
class App:
    url: str
    engine: PromptEngine
    store: Path


def _serve(tmp: Path, family: str, **replica: Any) -> Iterator[App]:
    tmp.mkdir(parents=True, exist_ok=True)
    keys = tmp / "keys.txt"
    keys.write_text(f"{KEY_A}\n{KEY_B}\n{KEY_SMALL} limit={SMALL_LIMIT}\n")
    store = tmp / "store.sqlite"
    if "cache_redis_url" not in replica:  # one shared layer: the file or Redis
        replica["store_path"] = str(store)
    cfg = ServeConfig.model_validate(
        {"auth": {"keys_file": str(keys)}, "replica": {"cache_entries": 100, **replica}, "run_dir": str(tmp)}
    )
    engine = PromptEngine()
    with serve_in_thread(create_app(engine, cfg, family)) as url:
        with httpx.Client(base_url=url, timeout=10) as client:
            wait_ready(client)
        yield App(url, engine, store)


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    yield from _serve(tmp_path_factory.mktemp("glossaries"), HY_MT15, max_glossary_bytes=2048)


@contextlib.contextmanager
def client(app: App, key: str, multilingual: bool = False) -> Iterator[deepl.DeepLClient]:
    kind = deepl.DeepLClient if multilingual else deepl.Translator
    made = kind(key, server_url=app.url, send_platform_info=False)
    try:
        yield made  # type: ignore[misc]
    finally:
        made.close()


def test_glossary_lifecycle_is_the_owners_alone(app: App) -> None:
    with client(app, KEY_A) as owner, client(app, KEY_B) as other:
        made = owner.create_glossary("Product", "EN", "DE", {"Hello": "Hallo", "cat": "Katze"})
        assert (made.name, made.ready, made.source_lang, made.target_lang) == ("Product", True, "EN", "DE")
        assert made.entry_count == 2 and made.creation_time.tzinfo is not None
        assert owner.get_glossary(made.glossary_id).glossary_id == made.glossary_id
        assert owner.get_glossary_entries(made) == {"Hello": "Hallo", "cat": "Katze"}
        assert [x.glossary_id for x in owner.list_glossaries()] == [made.glossary_id]
        assert other.list_glossaries() == []
        with pytest.raises(deepl.GlossaryNotFoundException):
            other.get_glossary(made.glossary_id)
        with pytest.raises(deepl.GlossaryNotFoundException):
            other.delete_glossary(made.glossary_id)
        with pytest.raises(deepl.DeepLException, match="Not found"):
            other.translate_text("Hello", source_lang="EN", target_lang="DE", glossary=made.glossary_id)
        before = len(app.engine.given)
        owner.translate_text("Hello, world", source_lang="EN", target_lang="DE", glossary=made)
        fed = app.engine.prompt_texts()[before:]
        assert len(fed) == 1 and "Hallo" in fed[0] and "Katze" not in fed[0]  # only the term in the text
        owner.delete_glossary(made)
        assert owner.list_glossaries() == []
        with pytest.raises(deepl.GlossaryNotFoundException):
            owner.get_glossary(made.glossary_id)


def test_glossary_languages_must_match_the_request(app: App) -> None:
    with client(app, KEY_A) as owner:
        made = owner.create_glossary("EN-DE", "EN", "DE", {"cat": "Katze"})
        with pytest.raises(
            deepl.DeepLException, match=r"glossary's languages \(en->de\) do not match.*en->fr"
        ):
            owner.translate_text("cat", source_lang="EN", target_lang="FR", glossary=made.glossary_id)
        english = owner.create_glossary("DE-EN", "DE", "EN-GB", {"Katze": "cat"})
        assert english.target_lang == "EN"  # one glossary for both English variants, as DeepL keeps it
        assert owner.translate_text("Katze", source_lang="DE", target_lang="EN-US", glossary=english).text
        for each in (made, english):
            owner.delete_glossary(each)


def test_multilingual_glossaries_through_the_v3_calls(app: App) -> None:
    with client(app, KEY_A, multilingual=True) as owner:
        dictionaries = [
            MultilingualGlossaryDictionaryEntries("EN", "DE", {"cat": "Katze"}),
            MultilingualGlossaryDictionaryEntries("DE", "EN", {"Katze": "cat", "Hund": "dog"}),
        ]
        made = owner.create_multilingual_glossary("Both ways", dictionaries)
        counts = {(d.source_lang, d.target_lang): d.entry_count for d in made.dictionaries}
        assert counts == {("EN", "DE"): 1, ("DE", "EN"): 2}
        assert [x.glossary_id for x in owner.list_multilingual_glossaries()] == [made.glossary_id]
        assert owner.get_multilingual_glossary(made.glossary_id).name == "Both ways"
        got = owner.get_multilingual_glossary_entries(made, "DE", "EN").dictionaries[0]
        assert got.entries == "Katze\tcat\nHund\tdog"  # the client hands v3's TSV on as DeepL sends it
        assert owner.list_glossaries() == []  # v2 speaks of one pair a glossary
        before = len(app.engine.given)
        owner.translate_text("Der Hund", source_lang="DE", target_lang="EN-US", glossary=made)
        assert "dog" in app.engine.prompt_texts()[before]
        with client(app, KEY_B, multilingual=True) as other, pytest.raises(deepl.GlossaryNotFoundException):
            other.delete_multilingual_glossary(made)
        owner.delete_multilingual_glossary(made)
        assert owner.list_multilingual_glossaries() == []


def test_bad_glossaries_are_refused_and_nothing_is_stored(app: App) -> None:
    with client(app, KEY_B) as other:
        with pytest.raises(deepl.DeepLException, match='duplicates the source term "cat"'):
            other.create_glossary_from_csv("dup", "EN", "DE", "cat,Katze\ndog,Hund\ncat,Mieze\n")
        with pytest.raises(deepl.DeepLException, match="target term of entry 2 is empty"):
            other.create_glossary_from_csv("empty", "EN", "DE", "cat,Katze\ndog,\n")
        with pytest.raises(ValueError, match="not a valid string"):  # the client checks a dict itself
            other.create_glossary("empty", "EN", "DE", {"cat": ""})
        with pytest.raises(deepl.DeepLException, match="the limit is 2048 bytes"):
            other.create_glossary("big", "EN", "DE", {f"term{i}": "x" * 20 for i in range(100)})
        with pytest.raises(deepl.DeepLException, match="'source_lang' not supported"):
            other.create_glossary("lang", "XX", "DE", {"cat": "Katze"})
        assert other.list_glossaries() == []
    headers = {"Authorization": f"DeepL-Auth-Key {KEY_B}"}
    body = {"name": "n", "source_lang": "en", "target_lang": "de", "entries": "a\tb", "entries_format": "xml"}
    with httpx.Client(base_url=app.url, headers=headers, timeout=10) as http:
        refused = http.post("/v2/glossaries", json=body)
        assert refused.status_code == 400 and "'entries_format' not supported" in refused.json()["message"]
        dup = {
            "name": "d",
            "dictionaries": [{"source_lang": "en", "target_lang": "de", "entries": "a\tb"}] * 2,
        }
        assert http.post("/v3/glossaries", json=dup).status_code == 400
        assert http.get("/v2/glossaries").json() == {"glossaries": []}
        assert http.get("/v3/glossaries").json() == {"glossaries": []}
    pairs = deepl.Translator(KEY_B, server_url=app.url).get_glossary_languages()
    assert any((p.source_lang, p.target_lang) == ("en", "de") for p in pairs)


EN_DE_CSV = {"source_lang": "en", "target_lang": "de", "entries_format": "csv"}


@pytest.mark.parametrize(
    ("path", "fields", "named"),
    [
        ("/v2/glossaries", {"source_lang": "en", "target_lang": "en", "entries": "a\tb"}, "both 'en'"),
        ("/v2/glossaries", {"source_lang": "EN-GB", "target_lang": "EN-US", "entries": "a\tb"}, "both 'en'"),
        ("/v2/glossaries", {**EN_DE_CSV, "entries": ","}, "no entry found"),
        ("/v2/glossaries", {**EN_DE_CSV, "entries": '""\n'}, "no entry found"),
        ("/v3/glossaries", {"source_lang": "de", "target_lang": "de", "entries": "a\tb"}, "both 'de'"),
        ("/v3/glossaries", {**EN_DE_CSV, "entries": ",,"}, "no entry found"),
    ],
)
def test_a_glossary_that_could_not_be_used_is_refused_not_stored(
    app: App, path: str, fields: dict[str, str], named: str
) -> None:
    """A language into itself (no pair /v2/glossary-language-pairs lists) or entries that parse to none:
    a 400 naming it, in DeepL's shape, and nothing stored that a GET would then have to answer."""
    body: dict[str, Any] = (
        {"name": "n", **fields} if path == "/v2/glossaries" else {"name": "n", "dictionaries": [fields]}
    )
    headers = {"Authorization": f"DeepL-Auth-Key {KEY_B}"}
    with httpx.Client(base_url=app.url, headers=headers, timeout=10) as http:
        refused = http.post(path, json=body)
        assert refused.status_code == 400, refused.text
        assert list(refused.json()) == ["message"] and named in refused.json()["message"]
        assert http.get("/v3/glossaries").json() == {"glossaries": []}


def test_a_family_without_a_terminology_prompt_says_so(tmp_path: Path) -> None:
    for served in _serve(tmp_path, HUNYUAN_MT):
        with client(served, KEY_A) as owner:
            made = owner.create_glossary("g", "EN", "DE", {"cat": "Katze"})
            with pytest.raises(
                deepl.DeepLException, match="prompt family hunyuan-mt has no terminology prompt"
            ):
                owner.translate_text("cat", source_lang="EN", target_lang="DE", glossary=made)
            with pytest.raises(deepl.DeepLException, match="'source_lang' is required"):
                httpx_post(
                    served, "/v2/translate", {"text": ["cat"], "target_lang": "DE", "glossary_id": "x"}
                )


def httpx_post(app: App, path: str, body: dict[str, Any], key: str = KEY_A) -> None:
    """A raw request, its DeepL-shaped refusal raised as the client would."""
    response = httpx.post(app.url + path, json=body, headers={"Authorization": f"DeepL-Auth-Key {key}"})
    if response.status_code >= 400:
        raise deepl.DeepLException(response.json()["message"])


def test_usage_is_counted_per_key_and_a_limit_refuses_in_each_apis_shape(app: App) -> None:
    with client(app, KEY_SMALL) as small, client(app, KEY_A) as unlimited:
        start = unlimited.get_usage().character
        assert start.limit == 10**12 and not start.limit_reached
        first = small.get_usage().character
        assert (first.count, first.limit) == (0, SMALL_LIMIT)
        small.translate_text("Hello", source_lang="EN", target_lang="DE")
        small.translate_text("Hello", source_lang="EN", target_lang="DE")  # a cached answer counts too
        assert small.get_usage().character.count == 10
        with pytest.raises(deepl.QuotaExceededException, match="has translated 10 of its 20 characters"):
            small.translate_text("Eleven char", source_lang="EN", target_lang="DE")
        assert small.get_usage().character.count == 10  # the refused request was not counted
        assert unlimited.get_usage().character.count == start.count  # another key's count did not move
    headers = {"Authorization": f"Bearer {KEY_SMALL}"}
    with httpx.Client(base_url=app.url, headers=headers, timeout=10) as http:
        libre = http.post(
            "/libretranslate/translate", json={"q": "eleven char", "source": "en", "target": "de"}
        )
        assert libre.status_code == 403 and "Quota exceeded" in libre.json()["error"]
        native = http.post(
            "/translate", json={"text": "eleven char", "source_lang": "en", "target_lang": "de"}
        )
        assert native.status_code == 429 and native.json()["error"]["code"] == "quota_exceeded"
        chat = {"model": "fake", "messages": [{"role": "user", "content": "x" * 11}]}
        openai = http.post("/v1/chat/completions", json=chat)
        assert openai.status_code == 429 and openai.json()["error"]["code"] == "quota_exceeded"
        assert http.post(
            "/translate", json={"text": "ok", "source_lang": "en", "target_lang": "de"}
        ).is_success
        metrics = httpx.get(app.url + "/metrics").text
    line = f'hunyuan_key_characters_total{{key="{key_label(auth.key_id(KEY_SMALL))}"}} 12.0'
    assert line in metrics and KEY_SMALL not in metrics


def test_hosts_sharing_redis_share_glossaries_and_counts(tmp_path: Path) -> None:
    from tests.support.redis_server import redis_server

    with redis_server(tmp_path) as redis, contextlib.ExitStack() as hosts:
        shared = {"cache_redis_url": redis.url, "cache_redis_prefix": "hosts-test:"}
        one, two = (hosts.enter_context(_served(tmp_path / name, HY_MT15, **shared)) for name in ("a", "b"))
        with client(one, KEY_SMALL) as first, client(two, KEY_SMALL) as second:
            made = first.create_glossary("g", "EN", "DE", {"cat": "Katze"})
            second.translate_text("a cat", source_lang="EN", target_lang="DE", glossary=made)
            assert "Katze" in two.engine.prompt_texts()[-1]  # host b read what host a stored
            first.translate_text("cat", source_lang="EN", target_lang="DE")
            assert first.get_usage().character.count == second.get_usage().character.count == 8
            assert int(redis.command("GET", f"hosts-test:usage:{auth.key_id(KEY_SMALL)}")) == 8
            second.delete_glossary(made)
            assert first.list_glossaries() == []
        assert not one.store.exists() and not two.store.exists()  # no SQLite file beside Redis


_served = contextlib.contextmanager(_serve)


def weblate_http(app: App) -> httpx.Client:
    """HTTP as Weblate's DeepL backend sends it (weblate/machinery/deepl.py, 2026.10.1: get_headers)."""
    return httpx.Client(base_url=app.url, headers={"Authorization": f"DeepL-Auth-Key {KEY_A}"}, timeout=10)


def test_weblate_glossary_with_xml_placeholders_keeps_tags_and_applies_terms(app: App) -> None:
    with weblate_http(app) as http:
        # create_glossary (get_glossary_dictionary), then _prepare_translation_request's body.
        dictionary = {"source_lang": "en", "target_lang": "de", "entries": "file\tDatei"}
        dictionary["entries_format"] = "tsv"
        made = http.post("/v3/glossaries", json={"name": "weblate:1", "dictionaries": [dictionary]})
        assert made.status_code == 201, made.text
        glossary_id = made.json()["glossary_id"]
        body = {
            "text": ['Open the file <x id="0"></x> now', "Close"],
            "source_lang": "EN",
            "target_lang": "DE",
            "formality": "default",
            "tag_handling": "xml",
            "ignore_tags": ["x"],
            "glossary_id": glossary_id,
        }
        before = len(app.engine.given)
        answered = http.post("/v2/translate", json=body)
        assert answered.status_code == 200, answered.text
        texts = [each["text"] for each in answered.json()["translations"]]
        assert len(texts) == 2 and '<x id="0"></x>' in texts[0]
        prompts = app.engine.prompt_texts()[before:]
        assert any("Datei" in prompt and "Open the file" in prompt for prompt in prompts)
        assert not any("<x" in prompt for prompt in prompts)  # the tag never reaches the model
        # update_glossary: a 404 here makes Weblate delete the glossary and create it anew.
        put = http.put(f"/v3/glossaries/{glossary_id}/dictionaries", json={"dictionaries": [dictionary]})
        assert put.status_code == 404
        assert http.delete(f"/v3/glossaries/{glossary_id}").status_code == 204


def test_v3_languages_in_deepls_shape(app: App, tmp_path: Path) -> None:
    with weblate_http(app) as http:
        text = http.get("/v3/languages", params={"resource": "translate_text"}).json()
        glossary = http.get("/v3/languages", params={"resource": "glossary"}).json()
        assert http.get("/v3/languages", params={"resource": "write"}).json() == []
        refused = http.get("/v3/languages")
        assert refused.status_code == 400 and "resource" in refused.json()["message"]
    by_code = {each["lang"]: each for each in text}
    assert set(by_code["DE"]) == {"lang", "name", "usable_as_source", "usable_as_target", "features"}
    assert by_code["ZH"]["usable_as_source"] and not by_code["ZH"]["usable_as_target"]
    assert by_code["EN-US"]["usable_as_target"] and not by_code["EN-US"]["usable_as_source"]
    assert {"glossary", "tag_handling"} <= set(by_code["DE"]["features"])
    assert "formality" not in by_code["DE"]["features"]  # the model has no formality control
    assert {each["lang"] for each in glossary} == set(by_code)
    for plain in _serve(tmp_path, HUNYUAN_MT):
        with weblate_http(plain) as http:
            listed = http.get("/v3/languages", params={"resource": "translate_text"}).json()
        assert listed and all("glossary" not in each["features"] for each in listed)
