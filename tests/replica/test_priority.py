"""Interactive and bulk: the class decision, admission histories, the keys file's options."""

from __future__ import annotations

import concurrent.futures
import json
from pathlib import Path
from typing import Any

import httpx
import pydantic
import pytest

from hunyuan_serve import auth
from hunyuan_serve.config import ConfigError, ServeConfig
from hunyuan_serve.replica.admission import priority
from hunyuan_serve.replica.admission.gate import ACCESS_LOG
from hunyuan_serve.replica.admission.in_flight import Admission
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.lifecycle import Lifecycle, Phase
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready, wait_until

GOOD = {"text": "Hello", "source_lang": "en", "target_lang": "zh"}


@pytest.mark.parametrize(
    ("header", "field", "key_default", "endpoint", "expected"),
    [
        ("bulk", "interactive", "interactive", "interactive", "bulk"),  # the header wins
        (" Interactive ", "bulk", "bulk", "bulk", "interactive"),  # any case, spaces trimmed
        (None, "bulk", "interactive", "interactive", "bulk"),  # then the body's field
        (None, None, "bulk", "interactive", "bulk"),  # then the key's default
        (None, None, None, "bulk", "bulk"),  # then the endpoint's
        (None, None, None, "interactive", "interactive"),
    ],
)
def test_the_class_decision(
    header: str | None, field: object, key_default: str | None, endpoint: str, expected: str
) -> None:
    assert priority.request_class(header, field, key_default, endpoint) == expected


@pytest.mark.parametrize(("header", "field"), [("urgent", None), ("", None), (None, "high"), (None, 1)])
def test_a_bad_class_is_a_400_naming_where_it_came_from(header: str | None, field: object) -> None:
    with pytest.raises(ApiError) as err:
        priority.request_class(header, field)
    assert err.value.status == 400 and err.value.code == "invalid_priority"
    assert ("X-Priority" if header is not None else "priority") in err.value.message


def test_endpoint_defaults_and_engine_priorities() -> None:
    assert priority.endpoint_default(1) == "interactive" and priority.endpoint_default(2) == "bulk"
    # vLLM schedules the lower value first (vllm/v1/core/sched/request_queue.py, PriorityRequestQueue).
    assert priority.ENGINE_PRIORITY["interactive"] < priority.ENGINE_PRIORITY["bulk"]


def _admission(max_in_flight: int, reserve: float, weights: dict[str | None, int] | None = None) -> Admission:
    lifecycle = Lifecycle()
    lifecycle.move(Phase.WARMING)
    lifecycle.move(Phase.READY)
    return Admission(lifecycle, max_in_flight, 1, interactive_reserve=reserve, weights=weights)


def _history(admission: Admission, steps: list[tuple[str, str, str | None]]) -> list[str]:
    """Each step (enter|leave, class, key) in order; what each enter got: 'ok' or 'refused'."""
    seen = []
    for action, cls, key in steps:
        if action == "leave":
            admission.leave(cls, key)
            continue
        try:
            admission.enter(cls, key)
            seen.append("ok")
        except ApiError as err:
            assert err.status == 503 and err.code == "overloaded" and err.headers == {"Retry-After": "1"}
            seen.append("refused")
    return seen


def test_bulk_is_refused_first_while_interactive_uses_every_slot() -> None:
    admission = _admission(4, 0.25)  # bulk may hold 3 of 4
    steps = [("enter", "bulk", "a")] * 4 + [("enter", "interactive", None)] * 2
    assert _history(admission, steps) == ["ok", "ok", "ok", "refused", "ok", "refused"]
    assert admission.by_class == {"interactive": 1, "bulk": 3} and admission.in_flight == 4
    # A bulk place given back is a bulk place again.
    assert _history(admission, [("leave", "bulk", "a"), ("enter", "bulk", "a")]) == ["ok"]


def test_without_a_reserve_bulk_may_fill_every_slot() -> None:
    admission = _admission(3, 0.0)
    assert _history(admission, [("enter", "bulk", "a")] * 4) == ["ok", "ok", "ok", "refused"]


def test_two_keys_share_the_bulk_slots() -> None:
    admission = _admission(8, 0.25)  # 6 bulk slots
    # Alone, a key's job may take every bulk slot; a second key is then refused only by the cap.
    first = _history(admission, [("enter", "bulk", "a")] * 6 + [("enter", "bulk", "b")])
    assert first == ["ok"] * 6 + ["refused"]
    # Three of a's finish: b gets in; b (refused no more: it waits for nothing) leaves a what it does
    # not take, max-min fair (tests/replica/test_admission_histories.py has b waiting).
    after = _history(
        admission,
        [("leave", "bulk", "a")] * 3
        + [("enter", "bulk", "b"), ("enter", "bulk", "a"), ("enter", "bulk", "b"), ("enter", "bulk", "a")],
    )
    assert after == ["ok", "ok", "ok", "refused"]
    assert admission.bulk_by_key == {"a": 4, "b": 2}


def test_a_keys_weight_sets_its_share() -> None:
    admission = _admission(8, 0.25, weights={"a": 2, "b": 1})  # 6 bulk slots: a 4, b 2
    steps = [("enter", "bulk", "b")] * 2 + [("enter", "bulk", "a")] * 5 + [("enter", "bulk", "b")]
    assert _history(admission, steps) == ["ok", "ok", "ok", "ok", "ok", "ok", "refused", "refused"]
    assert admission.bulk_by_key == {"a": 4, "b": 2}


def test_the_pure_rule_keeps_a_minimum_share() -> None:
    counts = {"a": 0, "b": 5, "c": 5}
    refused = priority.admits(
        "bulk", "a", in_flight=10, bulk_in_flight=counts, weights={}, max_in_flight=20,
        reserve=0.25, key_share_min=1,
    )  # fmt: skip
    assert refused is None  # 15 bulk slots / 3 keys: a may take 5
    refused = priority.admits(
        "bulk", "a", in_flight=12, bulk_in_flight={**counts, "a": 2}, weights={}, max_in_flight=20,
        reserve=0.25, key_share_min=1,
    )  # fmt: skip
    assert refused is None
    refused = priority.admits(
        "bulk", "a", in_flight=12, bulk_in_flight={"a": 7, "b": 5}, weights={}, max_in_flight=20,
        reserve=0.25, key_share_min=1, waiting_keys={"b"},
    )  # fmt: skip
    assert refused is not None and "share" in refused  # b waits: a's share is half of 15


@pytest.mark.parametrize(
    "bad", [{"interactive_reserve": 1.0}, {"interactive_reserve": -0.1}, {"bulk_key_share_min": 0}]
)
def test_the_shares_are_validated(bad: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError, match=next(iter(bad))):
        ServeConfig.model_validate({"replica": bad})


def test_keys_file_priority_and_weight(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("ci priority=bulk weight=3 limit=10\npage priority=interactive\nplain\n")
    specs = auth.load_key_specs(str(path))
    assert specs["ci"] == auth.KeySpec("ci", 10, "bulk", 3)
    assert specs["page"] == auth.KeySpec("page", None, "interactive", 1)
    assert specs["plain"] == auth.KeySpec("plain")
    cfg = ServeConfig.model_validate({"auth": {"keys_file": str(path)}})
    by_id = auth.key_specs_by_id(cfg.auth)
    assert auth.key_priorities(by_id) == {auth.key_id("ci"): "bulk", auth.key_id("page"): "interactive"}
    assert auth.key_limits(cfg.auth)[auth.key_id("ci")] == 10  # unchanged for the usage check


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("key-one priority=urgent\n", "line 1: priority= takes interactive or bulk"),
        ("key-one weight=0\n", "line 1: weight= takes a whole number of at least 1"),
        ("key-one weight=half\n", "line 1: weight= takes a whole number"),
        ("key-one\nkey-one priority=bulk\n", "line 2: a key listed before with other options"),
    ],
)
def test_bad_priority_options_name_the_line(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "keys"
    path.write_text(text)
    with pytest.raises(ConfigError, match=problem) as err:
        auth.load_key_specs(str(path))
    assert "key-one" not in str(err.value)


def _post(url: str, body: dict[str, Any], cls: str) -> httpx.Response:
    with httpx.Client(base_url=url, timeout=20) as client:
        return client.post("/translate", json=body, headers={"X-Priority": cls})


def test_through_the_app_bulk_is_refused_at_its_cap_and_interactive_admitted() -> None:
    engine = FakeEngine()
    # No queue: past its places a request is refused (with one, it waits: tests/replica/test_queue_wait.py).
    app = create_app(engine, make_config(max_in_flight=4, interactive_reserve=0.5, max_queued=0), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        wait_ready(client)
        warmed = len(engine.priorities)  # the warm-up's own call
        engine.hold()
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            bulk = [pool.submit(_post, url, {**GOOD, "text": f"b{i}"}, "bulk") for i in range(2)]
            wait_until(lambda: len(engine.running) == 2, what="two bulk requests in the engine")
            late_bulk = client.post("/translate", json={**GOOD, "text": "b9"}, headers={"X-Priority": "bulk"})
            people = [pool.submit(_post, url, {**GOOD, "text": f"i{i}"}, "interactive") for i in range(2)]
            wait_until(lambda: len(engine.running) == 4, what="two interactive requests beside them")
            full = client.post("/translate", json={**GOOD, "text": "i9"})
            bad = client.post("/translate", json=GOOD, headers={"X-Priority": "urgent"})
            engine.let_go()
            answered = [f.result() for f in bulk + people]
        assert [r.status_code for r in answered] == [200] * 4
        assert late_bulk.status_code == 503 and late_bulk.headers["retry-after"] == "1"
        assert (
            late_bulk.json()["error"]["code"] == "overloaded"
            and "bulk" in late_bulk.json()["error"]["message"]
        )
        assert full.status_code == 503  # interactive too, once every slot is taken
        assert bad.status_code == 400 and "X-Priority" in bad.json()["error"]["message"]
        assert sorted(engine.priorities[warmed:]) == [0, 0, 1, 1]
        metrics = client.get("/metrics").text.splitlines()
        assert 'hunyuan_class_rejections_total{class="bulk",reason="overload"} 1.0' in metrics
        assert 'hunyuan_class_rejections_total{class="interactive",reason="overload"} 1.0' in metrics
        assert 'hunyuan_class_latency_seconds_count{class="bulk"} 3.0' in metrics
        assert 'hunyuan_class_in_flight{class="bulk"} 0.0' in metrics


def test_the_class_gauge_and_the_log_line_follow_the_request(caplog: pytest.LogCaptureFixture) -> None:
    engine = FakeEngine()
    app = create_app(engine, make_config(), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        wait_ready(client)
        engine.hold()
        with concurrent.futures.ThreadPoolExecutor(1) as pool, caplog.at_level("INFO", ACCESS_LOG):
            pending = pool.submit(_post, url, {**GOOD, "text": "job"}, "bulk")
            wait_until(lambda: len(engine.running) == 1, what="the bulk request in the engine")
            metrics = client.get("/metrics").text.splitlines()
            engine.let_go()
            assert pending.result().status_code == 200
        assert 'hunyuan_class_in_flight{class="bulk"} 1.0' in metrics
        assert 'hunyuan_class_in_flight{class="interactive"} 0.0' in metrics
        lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == ACCESS_LOG]
        assert [line["priority"] for line in lines if line.get("status") == 200][-1] == "bulk"


def test_the_openai_shape_names_the_header() -> None:
    app = create_app(FakeEngine(), make_config(), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        wait_ready(client)
        body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
        bad = client.post("/v1/chat/completions", json=body, headers={"X-Priority": "soon"})
        assert bad.status_code == 400
        assert (
            bad.json()["error"]["type"] == "invalid_request_error"
            and "X-Priority" in bad.json()["error"]["message"]
        )


def test_the_body_field_and_a_batch_settle_the_class_after_admission() -> None:
    engine = FakeEngine()
    app = create_app(engine, make_config(max_in_flight=4, interactive_reserve=0.5), "hunyuan")
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        wait_ready(client)
        warmed = len(engine.priorities)
        pair = {"source_lang": "en", "target_lang": "zh"}
        batch = client.post("/translate", json={"texts": ["a", "b"], **pair})
        marked = client.post("/translate", json={**GOOD, "priority": "bulk"})
        batch_told = client.post(
            "/translate",
            json={"texts": ["c", "d"], "source_lang": "en", "target_lang": "zh"},
            headers={"X-Priority": "interactive"},
        )
        single = client.post("/translate", json={**GOOD, "text": "e"})
        bad = client.post("/translate", json={**GOOD, "priority": "soon"})
        assert [r.status_code for r in (batch, marked, batch_told, single)] == [200] * 4
        # The batch's two texts, the marked one, then the header's batch and the single text.
        assert engine.priorities[warmed:] == [1, 1, 1, 0, 0, 0]
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_priority"
        assert 'hunyuan_class_in_flight{class="bulk"} 0.0' in client.get("/metrics").text.splitlines()


def test_a_batch_without_a_bulk_place_is_refused_and_gives_its_place_back() -> None:
    admission = _admission(2, 0.5)  # one bulk place
    admission.enter("bulk", "a")
    admission.enter("interactive", "a")
    with pytest.raises(ApiError) as err:
        admission.move("interactive", "bulk", "a")
    assert err.value.status == 503 and err.value.code == "overloaded"
    assert admission.by_class == {"interactive": 1, "bulk": 1} and admission.in_flight == 2
    admission.leave("bulk", "a")
    admission.move("interactive", "bulk", "a")
    assert admission.by_class == {"interactive": 0, "bulk": 1} and admission.bulk_by_key == {"a": 1}
