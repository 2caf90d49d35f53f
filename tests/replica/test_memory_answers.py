"""The translation memories in a replica app (scripted engine, real HTTP, real SQLite and Redis):
exact answers without the engine in every API, close matches in the prompt, the HTTP API, tmserver."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from lxml import etree

from hunyuan_serve.config import ServeConfig
from hunyuan_serve.memory.tmx import read_tmx
from hunyuan_serve.replica.app import create_app
from tests.support.redis_server import RedisServer, redis_server
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready
from tests.support.stacks import free_port

DTD = Path(__file__).parents[1] / "memory" / "tmx14.dtd"
TSV = "Save the current image now\t立即保存当前图像\nBatch count\t总批次数\n"


@contextlib.contextmanager
def _app(engine: FakeEngine, family: str = "hy-mt1.5", **replica: Any) -> Iterator[httpx.Client]:
    app = create_app(engine, make_config(**replica), family)
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30) as client:
        wait_ready(client)
        engine.calls = 0  # the warm-up's call: the tests count their own
        yield client


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine()


@pytest.fixture
def client(engine: FakeEngine, tmp_path: Path) -> Iterator[httpx.Client]:
    with _app(engine, store_path=str(tmp_path / "store.sqlite")) as client:
        yield client


def _import(client: httpx.Client, data: str, name: str = "ui.tsv", **params: str) -> httpx.Response:
    query = {"file": name, "source_lang": "en", "target_lang": "zh", **params}
    return client.post("/memories", params=query, content=data.encode())


def _translate(client: httpx.Client, **body: Any) -> httpx.Response:
    return client.post("/translate", json={"source_lang": "en", "target_lang": "zh", **body})


def test_an_exact_match_is_the_answer_without_the_engine(client: httpx.Client, engine: FakeEngine) -> None:
    made = _import(client, TSV)
    assert made.status_code == 201, made.text
    assert made.json()["units"] == 2 and made.json()["file"] == "ui.tsv"
    one = _translate(client, text="Batch count")
    assert one.status_code == 200 and engine.calls == 0
    assert one.json()["result"] == "总批次数" and one.json()["memory"] == "exact"
    assert one.headers["X-Hunyuan-Memory"] == "exact"
    batch = _translate(client, texts=["Batch count", "Something new", "Save the current image now"])
    assert batch.json()["results"][0::2] == ["总批次数", "立即保存当前图像"]
    assert batch.json()["memory"] == ["exact", "miss", "exact"] and engine.calls == 1
    assert batch.headers["X-Hunyuan-Memory"] == "exact=2, miss=1"
    assert _translate(client, text="Batch count", target_lang="de").json()["memory"] == "miss"
    metrics = client.get("/metrics").text
    assert 'hunyuan_memory_lookups_total{result="exact"} 3.0' in metrics


def test_every_api_is_answered_from_the_memory(client: httpx.Client, engine: FakeEngine) -> None:
    _import(client, TSV)
    deepl = client.post(
        "/v2/translate", json={"text": ["Batch count"], "target_lang": "ZH", "source_lang": "EN"}
    )
    assert deepl.json()["translations"][0]["text"] == "总批次数"
    libre = client.post(
        "/libretranslate/translate", json={"q": "Batch count", "source": "en", "target": "zh"}
    )
    assert libre.json()["translatedText"] == "总批次数"
    immersive = client.post(
        "/immersive/translate", json={"text_list": ["Batch count"], "source_lang": "en", "target_lang": "zh"}
    )
    assert immersive.json()["translations"][0]["text"] == "总批次数"
    for answer in (deepl, libre, immersive):
        assert answer.headers["X-Hunyuan-Memory"] == "exact", answer.text
    assert engine.calls == 0


def test_close_matches_go_into_the_terminology_prompt(client: httpx.Client, engine: FakeEngine) -> None:
    _import(client, TSV)
    answer = _translate(client, text="Save the current picture now")
    assert answer.json()["memory"] == "fuzzy" and answer.headers["X-Hunyuan-Memory"] == "fuzzy"
    prompt = engine.given[-1].messages[0]["content"]
    assert "Save the current image now 翻译成 立即保存当前图像" in prompt  # HY-MT1.5's terminology line
    assert _translate(client, text="Delete everything").json()["memory"] == "miss"


def test_close_matches_join_a_requests_context(client: httpx.Client, engine: FakeEngine) -> None:
    _import(client, TSV)
    answer = _translate(client, text="Save the current picture now", context="A settings page.")
    assert answer.json()["memory"] == "fuzzy"
    prompt = engine.given[-1].messages[0]["content"]
    assert prompt.startswith("A settings page.\nSave the current image now => 立即保存当前图像\n")


def test_a_family_without_such_a_prompt_says_so(engine: FakeEngine, tmp_path: Path) -> None:
    with _app(engine, "hunyuan-mt", store_path=str(tmp_path / "s.sqlite")) as client:
        _import(client, TSV)
        answer = _translate(client, text="Save the current picture now").json()
    assert answer["memory"] == "miss"
    assert "hunyuan-mt has no terminology or context prompt" in answer["memory_unguided"]
    assert "立即保存" not in engine.given[-1].messages[0]["content"]


def test_matches_that_do_not_fit_the_token_budget_are_left_out(tmp_path: Path) -> None:
    engine = FakeEngine(max_model_len=100)  # one token a character: room for the text, not a match too
    with _app(engine, store_path=str(tmp_path / "s.sqlite")) as client:
        _import(client, TSV)
        answer = _translate(client, text="Save the current picture now", max_tokens=16)
    assert answer.status_code == 200, answer.text
    assert answer.json()["memory_unguided"] == "no close match fits the prompt's token budget"


def test_a_malformed_file_is_refused_naming_its_line_and_nothing_is_kept(client: httpx.Client) -> None:
    bad = (
        '<?xml version="1.0"?>\n<tmx version="1.4">\n<header srclang="en"/>\n<body>\n<tu><tuv>\n</body></tmx>'
    )
    refused = _import(client, bad, "ui.tmx")
    assert refused.status_code == 400
    assert refused.json()["error"]["message"].startswith("TMX line 6: not well-formed XML")
    assert client.get("/memories").json() == {"memory": "own", "imports": []}


def test_the_size_bound_refuses_an_import_whole(engine: FakeEngine, tmp_path: Path) -> None:
    with _app(engine, store_path=str(tmp_path / "s.sqlite"), memory_max_units=2) as client:
        assert _import(client, TSV).status_code == 201
        full = _import(client, "Quit\t退出\n", "more.tsv")
        assert full.status_code == 413 and "the limit is 2" in full.json()["error"]["message"]
        assert [each["file"] for each in client.get("/memories").json()["imports"]] == ["ui.tsv"]


def test_list_export_and_delete(client: httpx.Client) -> None:
    first = _import(client, TSV).json()
    _import(client, "Quit\t退出\n", "more.tsv")
    exported = client.get("/memories/export", params={"format": "tmx"})
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("application/x-tmx")
    assert etree.DTD(str(DTD)).validate(etree.fromstring(exported.content))
    assert len(read_tmx(exported.content).units) == 3
    assert client.delete(f"/memories/imports/{first['id']}").status_code == 204
    assert [each["file"] for each in client.get("/memories").json()["imports"]] == ["more.tsv"]
    assert client.delete(f"/memories/imports/{first['id']}").status_code == 404
    assert client.delete("/memories").status_code == 204
    assert client.get("/memories/export", params={"format": "csv"}).content == b""


def test_tmserver_lists_the_pairs_and_answers_exact_and_close_matches(client: httpx.Client) -> None:
    _import(client, TSV)
    assert client.get("/tmserver/languages/").json() == {
        "sourceLanguages": ["en"],
        "targetLanguages": ["zh", "zh_cn", "zh_hans"],
    }
    exact = client.get("/tmserver/en/zh_hans/unit/Batch%20count").json()
    assert exact == [{"source": "Batch count", "target": "总批次数", "quality": 100}]
    close = client.get("/tmserver/en/zh_hans/unit/Save%20the%20current%20picture%20now").json()
    assert close == [{"source": "Save the current image now", "target": "立即保存当前图像", "quality": 80}]
    assert client.get("/tmserver/en/de/unit/Batch%20count").json() == []


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


def test_two_replicas_over_redis_share_one_memory(redis: RedisServer, tmp_path: Path) -> None:
    engines = FakeEngine(), FakeEngine()
    shared = {"cache_redis_url": redis.url, "cache_redis_prefix": f"m{tmp_path.name}:"}
    with _app(engines[0], **shared) as one, _app(engines[1], **shared) as two:
        assert _import(one, TSV).status_code == 201
        answer = _translate(two, texts=["Batch count", "Save the current picture now"])
        assert answer.json()["memory"] == ["exact", "fuzzy"]
        assert answer.json()["results"][0] == "总批次数" and engines[1].calls == 1
        assert [each["file"] for each in two.get("/memories").json()["imports"]] == ["ui.tsv"]


def test_weblate_reaches_tmserver_behind_keys_with_the_key_in_its_url(tmp_path: Path) -> None:
    # Weblate's tmserver machinery takes a URL only: a key goes in as its password (Basic).
    keys = tmp_path / "keys.txt"
    keys.write_text("sk-weblate-9f8e7d\n", encoding="utf-8")
    cfg = ServeConfig.model_validate(
        {"auth": {"keys_file": str(keys)}, "replica": {"store_path": str(tmp_path / "s.sqlite")}}
    )
    with serve_in_thread(create_app(FakeEngine(), cfg, "hy-mt1.5")) as url:
        keyed = httpx.Client(base_url=url, headers={"Authorization": "Bearer sk-weblate-9f8e7d"}, timeout=30)
        wait_ready(keyed)
        assert _import(keyed, TSV).status_code == 201
        tmserver = url.replace("http://", "http://weblate:sk-weblate-9f8e7d@") + "/tmserver"
        assert httpx.get(tmserver + "/languages/").json()["sourceLanguages"] == ["en"]
        assert httpx.get(tmserver + "/en/zh_hans/unit/Batch%20count").json()[0]["quality"] == 100
        wrong = url.replace("http://", "http://weblate:sk-wrong@") + "/tmserver/languages/"
        assert httpx.get(wrong).status_code == 403
        keyed.close()


def test_a_memory_store_that_does_not_answer_leaves_translation_to_the_model() -> None:
    engine = FakeEngine()
    with _app(engine, cache_redis_url=f"redis://127.0.0.1:{free_port()}/0") as client:
        answer = _translate(client, text="Batch count")
        assert answer.status_code == 200, answer.text
        assert "memory" not in answer.json() and engine.calls == 1
        refused = client.get("/memories")
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "store_unavailable"


def _sse(response: httpx.Response) -> list[Any]:
    blocks = [b.removeprefix("data: ") for b in response.text.split("\n\n") if b.startswith("data: ")]
    return [json.loads(b) for b in blocks if b != "[DONE]"]


def test_streams_are_answered_from_the_memory_where_it_holds_the_text(
    client: httpx.Client, engine: FakeEngine
) -> None:
    _import(client, TSV)
    native = client.post(
        "/translate", json={"source_lang": "en", "target_lang": "zh", "text": "Batch count", "stream": True}
    )
    assert native.headers.get("X-Hunyuan-Memory") == "exact", native.text
    delta, done = _sse(native)
    assert delta == {"delta": "总批次数"} and done["result"] == "总批次数" and done["memory"] == "exact"
    system = (
        "\nYou are a highly skilled translation assistant, adept at translating text\n"
        "from language 'en'\nto language 'zh_Hans'\nwith precision and nuance.\n\n\n"
        "You always reply with translated string only.\n"
    )
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "Batch count"}]
    openai = client.post("/v1/chat/completions", json={"model": "fake", "messages": messages, "stream": True})
    assert openai.headers.get("X-Hunyuan-Memory") == "exact", openai.text
    assert (
        "".join(c["choices"][0]["delta"].get("content", "") for c in _sse(openai) if c["choices"])
        == "总批次数"
    )
    assert engine.calls == 0
    missed = client.post(
        "/translate", json={"source_lang": "en", "target_lang": "zh", "text": "Quit", "stream": True}
    )
    assert _sse(missed)[-1]["done"] is True and engine.calls == 1  # the model's stream, as before


def test_a_stream_is_guided_by_close_matches_and_a_text_cut_in_segments_streams_as_before(
    engine: FakeEngine, tmp_path: Path
) -> None:
    with _app(engine, store_path=str(tmp_path / "store.sqlite"), segment_tokens=200) as client:
        _import(client, TSV)
        body = {"source_lang": "en", "target_lang": "zh", "stream": True}
        close = client.post("/translate", json={**body, "text": "Save the current picture now"})
        assert close.headers["X-Hunyuan-Memory"] == "fuzzy" and _sse(close)[-1]["memory"] == "fuzzy"
        assert "Save the current image now 翻译成 立即保存当前图像" in engine.given[-1].messages[0]["content"]
        sent = len(engine.given)
        long = "\n\n".join(f"Save the current picture number {n} now." for n in range(12))
        cut = client.post("/translate", json={**body, "text": long})
        done = _sse(cut)[-1]
        assert done["done"] is True and len(engine.given) > sent + 1  # its segments, one prompt each
        assert not any("翻译成" in p.messages[0]["content"] for p in engine.given[sent:])
        assert "memory" not in done and "X-Hunyuan-Memory" not in cut.headers


def test_whole_texts_are_looked_up_as_given_and_blank_translations_kept_on_request(
    client: httpx.Client, engine: FakeEngine
) -> None:
    rows = "Copy image to: ,将图片发动到:\nCopy image to:,将图片复制到:\n•,・\n(hidden),\n(a space), \n"
    assert _import(client, rows, "ui.csv").json()["units"] == 4  # an empty target: not translated yet
    assert _import(client, rows, "ui.csv", blank="keep").json()["units"] == 5
    asked = ["Copy image to: ", "Copy image to:", "•", "(hidden)", "(a space)", "Copy image"]
    found = client.post("/memories/lookup", json={"source_lang": "en", "target_lang": "zh", "texts": asked})
    assert found.json() == {
        "translations": ["将图片发动到:", "将图片复制到:", "・", "", " ", None],
        "memory": True,
    }
    none = client.post("/memories/lookup", json={"source_lang": "en", "target_lang": "de", "texts": asked})
    assert none.json() == {"translations": [None] * 6, "memory": False}  # the client stops asking
    assert engine.calls == 0
    assert 'hunyuan_memory_lookups_total{result="exact"} 5.0' in client.get("/metrics").text
    bad = client.post("/memories/lookup", json={"source_lang": "en", "target_lang": "xx", "texts": []})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "unsupported_language"
    assert _import(client, rows, "ui.csv", blank="maybe").status_code == 400
    close = client.get("/tmserver/en/zh/unit/(hidden%20now)").json()
    assert close == []  # a blank translation guides nothing
