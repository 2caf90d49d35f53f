"""Ensemble /translate and the Chimera's /fuse over HTTP: scripted engines, one app fusing for the others."""

from __future__ import annotations

import contextlib
import hashlib
import re
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hunyuan_serve.cache.key import cache_key
from hunyuan_serve.families import sampling_defaults
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.families.chimera import fusion_prompt
from hunyuan_serve.languages import find_language
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.engine.interface import Generation, Sampling
from hunyuan_serve.replica.ensemble import Fused, answer_fields, fusion_header, refusal_reason
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready

EN, ZH = find_language("en"), find_language("zh")


class SamplingEngine(FakeEngine):
    """A translation engine whose sample() answers n distinct candidates and records each call's n."""

    def __init__(self) -> None:
        super().__init__(max_model_len=4000)
        self.model_name = "fake-mt"
        self.sampled: list[tuple[int, Sampling]] = []

    async def sample(
        self, prompt: Prompt, sampling: Sampling, request_id: str, n: int, priority: int = 0
    ) -> list[Generation]:
        self.sampled.append((n, sampling))
        text = prompt.messages[0]["content"].rsplit("\n", 1)[-1]
        return [Generation(f"{text} #{i}", self.count_prompt_tokens(prompt), 3, "stop") for i in range(n)]


class ChimeraEngine(FakeEngine):
    """The Chimera's engine: answers 'fused N' and keeps every prompt; `fail` makes it raise."""

    def __init__(self) -> None:
        super().__init__(max_model_len=4000)
        self.model_name = "fake-chimera"
        self.fail = False

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation:
        generation = await super().generate(prompt, sampling, request_id, priority)
        if self.fail:
            raise RuntimeError("chimera engine down")
        return Generation(f"fused {len(self.given)}", generation.prompt_tokens, 2, "stop")


Served = tuple[Any, httpx.Client]


@pytest.fixture(scope="module")
def apps() -> Iterator[dict[str, Served]]:
    """chimera; mt (fused by chimera); down (chimera_url a closed port); refuse (the same, 503); alone."""
    with contextlib.ExitStack() as stack:
        served: dict[str, Served] = {}

        def serve(name: str, engine: Any, family: str, **replica: Any) -> str:
            url = stack.enter_context(serve_in_thread(create_app(engine, make_config(**replica), family)))
            client = stack.enter_context(httpx.Client(base_url=url, timeout=10))
            wait_ready(client)
            served[name] = (engine, client)
            return url

        chimera_url = serve("chimera", ChimeraEngine(), "chimera")
        # Bound but not listening: connections are refused, and no server started after takes the port.
        held = stack.enter_context(socket.socket())
        held.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{held.getsockname()[1]}"
        serve("mt", SamplingEngine(), "hunyuan-mt", chimera_url=chimera_url, chimera_timeout_s=0.5)
        serve("down", SamplingEngine(), "hunyuan-mt", chimera_url=closed)
        serve("refuse", SamplingEngine(), "hunyuan-mt", chimera_url=closed, chimera_failure="refuse")
        serve("alone", SamplingEngine(), "hunyuan-mt")
        yield served


def _translate(apps: dict[str, Served], name: str, **fields: Any) -> httpx.Response:
    return apps[name][1].post("/translate", json={"source_lang": "en", "target_lang": "zh", **fields})


def test_an_ensemble_is_n_samples_in_one_call_fused_by_the_chimera(apps: dict[str, Served]) -> None:
    mt, chimera = apps["mt"][0], apps["chimera"][0]
    response = _translate(apps, "mt", text="Good morning", ensemble={"candidates": 3})
    assert response.status_code == 200, response.text
    body = response.json()
    candidates = ["Good morning #0", "Good morning #1", "Good morning #2"]
    assert body["candidates"] == candidates
    assert body["result"] == f"fused {len(chimera.given)}" and body["fused_by"] == "fake-chimera"
    assert response.headers["X-Hunyuan-Fusion"] == "fused; by=fake-chimera"
    n, sampling = mt.sampled[-1]
    defaults = sampling_defaults("hunyuan-mt")  # the family's sampling, not greedy
    assert n == 3 and (sampling.temperature, sampling.top_p) == (defaults.temperature, defaults.top_p)
    assert chimera.given[-1] == fusion_prompt(EN, ZH, "Good morning", candidates)
    # The default count is the README's six.
    default = _translate(apps, "mt", text="Good night", ensemble={})
    assert len(default.json()["candidates"]) == 6 and mt.sampled[-1][0] == 6


def test_a_batch_answers_one_ensemble_object_per_text(apps: dict[str, Served]) -> None:
    response = _translate(apps, "mt", texts=["One", "Two"], ensemble={"candidates": 2})
    assert response.status_code == 200, response.text
    body = response.json()
    assert [each["candidates"] for each in body["results"]] == [["One #0", "One #1"], ["Two #0", "Two #1"]]
    assert all(each["fused_by"] == "fake-chimera" for each in body["results"])
    assert body["cached"] == [False, False] and body["source_lang"] == "en"


def test_the_cache_keeps_ensembles_and_plain_answers_apart(apps: dict[str, Served]) -> None:
    first = _translate(apps, "mt", text="Cache me", ensemble={"candidates": 2}).json()
    plain = _translate(apps, "mt", text="Cache me").json()
    assert plain["cached"] is False and isinstance(plain["result"], str) and "candidates" not in plain
    again = _translate(apps, "mt", text="Cache me", ensemble={"candidates": 2}).json()
    assert again["cached"] is True and again["candidates"] == first["candidates"]
    other = _translate(apps, "mt", text="Cache me", ensemble={"candidates": 3}).json()
    assert other["cached"] is False and len(other["candidates"]) == 3
    args: tuple[Any, ...] = ("m", "en", "zh", "t", {"temperature": 0.7}, {"family": "hunyuan-mt"})
    assert cache_key(*args) == cache_key(*args, 0) != cache_key(*args, 2) != cache_key(*args, 3)


def test_a_chimera_down_degrades_to_the_first_candidate(apps: dict[str, Served]) -> None:
    response = _translate(apps, "down", text="Hello", ensemble={"candidates": 2})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["result"] == "Hello #0" and body["fused_by"] is None
    assert body["candidates"] == ["Hello #0", "Hello #1"]
    assert response.headers["X-Hunyuan-Fusion"] == "degraded; texts=1/1; reason=unreachable (ConnectError)"
    refused = _translate(apps, "refuse", text="Hello", ensemble={"candidates": 2})
    assert refused.status_code == 503
    assert refused.json()["error"]["code"] == "fusion_unavailable"
    assert "did not fuse the candidates: unreachable (ConnectError)" in refused.json()["error"]["message"]


def test_a_failing_or_slow_chimera_degrades_naming_why(apps: dict[str, Served]) -> None:
    chimera: ChimeraEngine = apps["chimera"][0]
    chimera.fail = True
    try:
        failed = _translate(apps, "mt", text="Engine down", ensemble={"candidates": 2})
    finally:
        chimera.fail = False
    assert failed.status_code == 200 and failed.json()["fused_by"] is None
    assert failed.headers["X-Hunyuan-Fusion"].endswith("reason=HTTP 503 engine_error")
    chimera.hold()
    try:
        slow = _translate(apps, "mt", text="Too slow", ensemble={"candidates": 2})
    finally:
        chimera.let_go()
    assert slow.status_code == 200 and slow.json()["result"] == "Too slow #0"
    assert "reason=timeout (ReadTimeout, chimera_timeout_s=0.5)" in slow.headers["X-Hunyuan-Fusion"]


@pytest.mark.parametrize(
    ("app", "fields", "status", "code", "message"),
    [
        ("mt", {"ensemble": {"candidates": 1}}, 400, "invalid_ensemble",
         "ensemble.candidates must be 2 to 8 candidate translations, got 1"),
        ("mt", {"ensemble": {"candidates": 9}}, 400, "invalid_ensemble", "got 9"),
        ("mt", {"ensemble": {"candidates": "six"}}, 400, "invalid_ensemble",
         'ensemble.candidates must be an integer, got "six"'),
        ("mt", {"ensemble": 6}, 400, "invalid_ensemble", 'ensemble must be {"candidates": N}, N from 2 to 8'),
        ("mt", {"ensemble": {}, "stream": True}, 400, "invalid_ensemble", "cannot be combined with stream"),
        ("alone", {"ensemble": {}}, 400, "ensemble_unavailable",
         "none is configured (replica.chimera_url)"),
        ("chimera", {}, 400, "fusion_only", "fake-chimera is a Hunyuan-MT-Chimera model"),
    ],
)  # fmt: skip
def test_bad_ensembles_are_refused_naming_the_field(
    apps: dict[str, Served], app: str, fields: dict[str, Any], status: int, code: str, message: str
) -> None:
    response = _translate(apps, app, text="Hi", **fields)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and message in error["message"]


def _fuse(apps: dict[str, Served], name: str, **fields: Any) -> httpx.Response:
    body = {"source_lang": "en", "target_lang": "zh", "text": "It’s on the house.", **fields}
    return apps[name][1].post("/fuse", json=body, headers={"X-Request-ID": "fuse-1"})


def test_fuse_sends_the_readme_prompt_and_logs_its_digest(
    apps: dict[str, Served], caplog: pytest.LogCaptureFixture
) -> None:
    chimera = apps["chimera"][0]
    with caplog.at_level("INFO", logger="hunyuan_serve.replica.access"):
        response = _fuse(apps, "chimera", candidates=["这是免费的。", "本店请客。"])
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["result"] == f"fused {len(chimera.given)}" and body["model"] == "fake-chimera"
    assert body["request_id"] == "fuse-1" and body["cached"] is False
    prompt = fusion_prompt(EN, ZH, "It’s on the house.", ["这是免费的。", "本店请客。"])
    assert chimera.given[-1] == prompt
    digest = hashlib.sha256(prompt.messages[0]["content"].encode("utf-8")).hexdigest()
    lines = [r.getMessage() for r in caplog.records if '"request_id": "fuse-1"' in r.getMessage()]
    assert len(lines) == 1 and f'"prompt_sha256": "{digest}"' in lines[0] and '"candidates": 2' in lines[0]


@pytest.mark.parametrize(
    ("app", "fields", "status", "code", "message"),
    [
        ("mt", {"candidates": ["a", "b"]}, 400, "fusion_unsupported",
         "POST /fuse needs a Hunyuan-MT-Chimera replica (prompt family chimera); this one serves fake-mt "
         "with prompt family hunyuan-mt"),
        ("chimera", {"candidates": ["a"]}, 400, "invalid_candidates", "candidates must be 2 to 8"),
        ("chimera", {"candidates": ["a"] * 9}, 400, "invalid_candidates", "got 9"),
        ("chimera", {}, 422, "missing_field", "candidates (a list of candidate translations) is required"),
        ("chimera", {"candidates": ["a", 2]}, 422, "invalid_parameter", "must be a list of strings"),
        ("chimera", {"candidates": ["a", "b"], "ensemble": {}}, 422, "unknown_field", "ensemble"),
        ("chimera", {"candidates": ["a", "b"], "source_lang": "auto"}, 400, "unsupported_language", "auto"),
    ],
)  # fmt: skip
def test_bad_fusions_are_refused_naming_the_field(
    apps: dict[str, Served], app: str, fields: dict[str, Any], status: int, code: str, message: str
) -> None:
    response = _fuse(apps, app, **fields)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and message in error["message"]


def test_answer_and_header_shapes() -> None:
    ok = Fused("融合", ("甲", "乙"), "chimera-7b")
    down = Fused("甲", ("甲", "乙"), None, "HTTP 503 not_ready: 加载中\nnext")
    assert answer_fields(False, [ok]) == {
        "result": "融合",
        "candidates": ["甲", "乙"],
        "fused_by": "chimera-7b",
    }
    assert answer_fields(True, [ok, down])["results"][1] == {"result": "甲", "candidates": ["甲", "乙"],
                                                             "fused_by": None}  # fmt: skip
    assert fusion_header([ok]) == {"X-Hunyuan-Fusion": "fused; by=chimera-7b"}
    # Only printable ASCII reaches the header (the reason may quote any text).
    assert fusion_header([ok, down]) == {
        "X-Hunyuan-Fusion": "degraded; texts=1/2; reason=HTTP 503 not_ready:  next"
    }
    error = httpx.Response(429, json={"error": {"code": "rate_limited", "message": "slow down"}})
    assert refusal_reason(error) == "HTTP 429 rate_limited"
    assert refusal_reason(httpx.Response(502, text="<html>bad gateway</html>")) == "HTTP 502"


@pytest.mark.parametrize(
    ("replica", "message"),
    [
        ({"chimera_url": "ftp://10.0.0.9:8090"}, "chimera_url is an http:// or https:// URL"),
        ({"chimera_url": "http://10.0.0.9:8090", "request_timeout_s": 20},
         "chimera_timeout_s (30) must be under request_timeout_s (20)"),
    ],
)  # fmt: skip
def test_fusion_settings_are_checked_naming_the_field(replica: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        make_config(**replica)
    make_config(request_timeout_s=20)  # without a Chimera pool the deadline alone is no conflict


@pytest.fixture(scope="module")
def fusing_pool(apps: dict[str, Served]) -> Iterator[tuple[SamplingEngine, httpx.Client]]:
    """A translation replica whose pool fuses every translation (replica.ensemble_candidates 3)."""
    chimera_url = str(apps["chimera"][1].base_url).rstrip("/")
    engine = SamplingEngine()
    cfg = make_config(chimera_url=chimera_url, chimera_timeout_s=0.5, ensemble_candidates=3)
    with serve_in_thread(create_app(engine, cfg, "hunyuan-mt")) as url, httpx.Client(base_url=url) as client:
        wait_ready(client)
        yield engine, client


def test_a_pool_set_to_fuse_fuses_every_dialect(
    apps: dict[str, Served], fusing_pool: tuple[SamplingEngine, httpx.Client]
) -> None:
    engine, client = fusing_pool
    native = client.post("/translate", json={"source_lang": "en", "target_lang": "zh", "text": "Hello"})
    assert native.status_code == 200, native.text
    assert len(native.json()["candidates"]) == 3 and native.json()["fused_by"] == "fake-chimera"
    deepl = client.post(
        "/v2/translate", json={"text": ["Open the door"], "source_lang": "EN", "target_lang": "ZH"}
    )
    assert deepl.status_code == 200, deepl.text
    assert deepl.json()["translations"][0]["text"].startswith("fused ") and engine.sampled[-1][0] == 3
    libre = client.post("/libretranslate/translate", json={"q": "Close it", "source": "en", "target": "zh"})
    assert libre.status_code == 200, libre.text
    assert libre.json()["translatedText"].startswith("fused ") and engine.sampled[-1][0] == 3
    # A request that asks for its own ensemble keeps its count.
    own = client.post(
        "/translate",
        json={"source_lang": "en", "target_lang": "zh", "text": "Hi", "ensemble": {"candidates": 2}},
    )
    assert len(own.json()["candidates"]) == 2


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"replica": {"ensemble_candidates": 1}}, "1 candidate is no ensemble"),
        ({"replica": {"ensemble_candidates": 3}}, "replica.ensemble_candidates: no Chimera pool"),
        (
            {"pools": [{"name": "mt", "replica": {"ensemble_candidates": 3}}, {"name": "c"}]},
            "pools.mt.replica.ensemble_candidates: no Chimera pool to fuse the candidates (set pools.mt.chimera_pool)",  # noqa: E501
        ),
    ],
)
def test_a_pool_default_ensemble_needs_a_chimera(data: dict[str, Any], message: str) -> None:
    from hunyuan_serve.config import ConfigError, build_config

    with pytest.raises(ConfigError) as err:
        build_config(data, {})
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("scope", "key"),
    [
        (
            {"state": {"hs_key": "K-body"}, "headers": [], "query_string": b""},
            "K-body",
        ),  # LibreTranslate's api_key
        ({"headers": [(b"authorization", b"Bearer K-head")], "query_string": b""}, "K-head"),
        ({"headers": [], "query_string": b"token=K-query"}, "K-query"),
        ({"headers": [], "query_string": b""}, None),
    ],
)
def test_the_fusion_is_sent_the_key_the_caller_was_let_in_with(
    scope: dict[str, Any], key: str | None
) -> None:
    from starlette.requests import Request

    from hunyuan_serve.auth import KEY_STATE
    from hunyuan_serve.replica.ensemble import caller_key

    assert KEY_STATE == "hs_key"
    assert caller_key(Request({"type": "http", "method": "POST", "path": "/x", **scope})) == key
