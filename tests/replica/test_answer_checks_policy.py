"""Which answer-check policy applies, over HTTP with a scripted engine: a key's qa= in a real keys file
against its pool's replica.qa, and each pool's own replica.qa and pool label, from a pools config."""

from __future__ import annotations

from pathlib import Path

import httpx

from hunyuan_serve.config import ServeConfig, resolve_pools
from hunyuan_serve.run.plan import replica_config
from tests.support.qa_scripted import HEADER, flag_counts, served

CAREFUL, QUIET, PLAIN = "sk-qa-careful-7f3a", "sk-qa-quiet-51c9", "sk-qa-plain-0d2e"


def ask(client: httpx.Client, key: str, text: str, **extra: str) -> httpx.Response:
    body = {"text": text, "source_lang": "en", "target_lang": "zh", **extra}
    response = client.post("/translate", json=body, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200, response.text
    return response


def test_a_keys_qa_option_wins_over_its_pool_and_a_request_over_its_key(tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text(f"{CAREFUL} qa=retry\n{QUIET} qa=off\n{PLAIN}\n")
    cfg = ServeConfig.model_validate(
        {"replica": {"cache_entries": 0, "qa": "flag"}, "auth": {"keys_file": str(keys)}}
    )
    with served(cfg, headers={"Authorization": f"Bearer {PLAIN}"}) as (engine, client):
        for source in ("Delete 3 files", "Delete 4 files", "Delete 5 files", "Delete 6 files"):
            digit = source.split()[1]
            engine.script[source] = [("删除文件", "stop"), (f"删除 {digit} 个文件", "stop")]
        # The pool's flag, for a key that names no policy: the first answer, flagged, asked once.
        plain = ask(client, PLAIN, "Delete 3 files")
        assert plain.json()["result"] == "删除文件" and plain.headers[HEADER] == "flagged 1/1: 0=numbers"
        assert engine.calls_for("Delete 3 files") == 1
        # The careful key's retry: asked again, the better second answer kept.
        careful = ask(client, CAREFUL, "Delete 4 files")
        assert careful.json()["result"] == "删除 4 个文件" and careful.json()["qa"] == []
        assert careful.headers[HEADER] == "ok" and engine.calls_for("Delete 4 files") == 2
        # The quiet key's off: no check ran, so the answer says nothing.
        quiet = ask(client, QUIET, "Delete 5 files")
        assert "qa" not in quiet.json() and HEADER not in quiet.headers
        # A request's own qa goes before its key's.
        asked = ask(client, QUIET, "Delete 6 files", qa="flag")
        assert [flag["check"] for flag in asked.json()["qa"]] == ["numbers"]
        assert engine.calls_for("Delete 6 files") == 1


def test_each_pool_answers_under_its_own_policy_and_counts_under_its_own_name() -> None:
    cfg = ServeConfig.model_validate(
        {
            "replica": {"cache_entries": 0},
            "pools": [
                {"name": "careful", "model": "/models/a", "replica": {"qa": "retry"}},
                {"name": "quick", "model": "/models/b", "replica": {"qa": "flag"}},
                {"name": "silent", "model": "/models/c", "replica": {"qa": "off"}},
            ],
        }
    )
    pools = {pool.name: replica_config(pool, 8100 + n) for n, pool in enumerate(resolve_pools(cfg))}
    seen = {}
    for name, pool_cfg in pools.items():
        with served(pool_cfg) as (engine, client):
            engine.script["Close 7 tabs"] = [("关闭标签页", "stop"), ("关闭 7 个标签页", "stop")]
            response = client.post(
                "/translate", json={"text": "Close 7 tabs", "source_lang": "en", "target_lang": "zh"}
            )
            seen[name] = (response.json(), response.headers.get(HEADER), engine.calls_for("Close 7 tabs"))
            counts = flag_counts(client)
        # A pool's counter carries the pool's name, whatever pool it is (and none when it checks nothing).
        assert set(counts) == ({("numbers", name)} if name == "quick" else set()), (name, counts)
    careful, quick, silent = seen["careful"], seen["quick"], seen["silent"]
    assert careful[0]["result"] == "关闭 7 个标签页" and careful[1] == "ok" and careful[2] == 2
    assert quick[0]["result"] == "关闭标签页" and quick[1] == "flagged 1/1: 0=numbers" and quick[2] == 1
    assert "qa" not in silent[0] and silent[1] is None and silent[2] == 1


def test_a_pools_label_is_its_name_even_where_its_overrides_set_another() -> None:
    cfg = ServeConfig.model_validate(
        {"pools": [{"name": "docs", "model": "/models/a", "replica": {"qa_pool_label": "other"}}]}
    )
    [pool] = resolve_pools(cfg)
    assert replica_config(pool, 8100).replica.qa_pool_label == "docs"
    assert ServeConfig().replica.qa_pool_label == "default"
