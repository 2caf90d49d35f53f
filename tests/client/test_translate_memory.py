"""`hunyuan-serve translate` with translation memories: the service's, and a file's (--memory)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from hunyuan_serve.client.cli import main
from hunyuan_serve.memory.tmx import write_tmx
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.storage.memory import Unit
from tests.replica.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready

UI = {"Batch count": "总批次数", "Sampling steps": "迭代步数", "Restore faces": "面部修复"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, FakeEngine]]:
    engine = FakeEngine()
    app = create_app(engine, make_config(store_path=str(tmp_path / "store.sqlite")), "hy-mt1.5")
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        wait_ready(client)
        engine.calls = 0  # the warm-up's
        yield url, engine


def _run(tmp_path: Path, url: str, *extra: str) -> tuple[int, dict[str, str], dict[str, object]]:
    """The UI strings (English as their own value, as a source file has them) translated into zh."""
    src, dst, report = tmp_path / "ui.json", tmp_path / "zh.json", tmp_path / "report.json"
    src.write_text(json.dumps({key: key for key in UI}, ensure_ascii=False), encoding="utf-8")
    args = [
        "--url",
        url,
        "--to",
        "zh",
        "--from",
        "en",
        str(src),
        "-o",
        str(dst),
        "--no-cache",
        "--no-progress",
    ]
    code = main([*args, "--report", str(report), *extra])
    return code, json.loads(dst.read_text(encoding="utf-8")), json.loads(report.read_text())


def test_the_services_memory_answers_and_the_report_says_so(
    served: tuple[str, FakeEngine], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, engine = served
    pairs = "".join(f"{k}\t{v}\n" for k, v in list(UI.items())[:2])
    query = {"file": "half.tsv", "source_lang": "en", "target_lang": "zh"}
    assert httpx.post(url + "/memories", params=query, content=pairs.encode()).status_code == 201
    code, out, report = _run(tmp_path, url)
    assert code == 0 and engine.calls == 1  # the one string the memory lacks
    assert out["Batch count"] == "总批次数" and out["Sampling steps"] == "迭代步数"
    assert (report["memory"], report["translated"]) == (2, 1)
    assert "1 translated, 2 from the memory, 0 cached" in capsys.readouterr().err


def test_a_memory_file_answers_without_a_request(
    served: tuple[str, FakeEngine], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, engine = served
    tmx = tmp_path / "ui.tmx"
    tmx.write_bytes(write_tmx([Unit("en", "zh", k, v) for k, v in UI.items()] + [Unit("en", "de", "x", "y")]))
    code, out, report = _run(tmp_path, url, "--memory", str(tmx))
    assert code == 0 and engine.calls == 0 and out == UI
    assert (report["memory"], report["translated"], report["requests"]) == (3, 0, 0)


def test_a_malformed_memory_file_is_a_usage_error(
    served: tuple[str, FakeEngine], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = served
    bad = tmp_path / "bad.tmx"
    bad.write_text("<tmx version='1.4'>\n<header srclang='en'/>\n<body><tu>\n</tmx>", encoding="utf-8")
    src = tmp_path / "ui.json"
    src.write_text("{}", encoding="utf-8")
    code = main(["--url", url, "--to", "zh", str(src), "--memory", str(bad), "--no-progress"])
    assert code == 2 and "TMX line 4" in capsys.readouterr().err
