"""`hunyuan-serve translate` with translation memories: the service's, and a file's (--memory)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import polib
import pytest

from hunyuan_serve.client.cli import main
from hunyuan_serve.memory.tmx import write_tmx
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.storage.memory import Unit
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready

UI = {"Batch count": "总批次数", "Sampling steps": "迭代步数", "Restore faces": "面部修复"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, FakeEngine]]:
    engine = FakeEngine()
    app = create_app(engine, make_config(store_path=str(tmp_path / "store.sqlite")), "hy-mt1.5")
    with serve_in_thread(app) as url, httpx.Client(base_url=url) as client:
        wait_ready(client)
        engine.calls = 0  # the warm-up's
        yield url, engine


def _args(url: str, src: Path, dst: Path) -> list[str]:
    return [
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


def _run(
    tmp_path: Path, url: str, *extra: str, strings: dict[str, str] = UI
) -> tuple[int, dict[str, str], dict[str, object]]:
    """The strings (English as their own value, as a source file has them) translated into zh."""
    src, dst, report = tmp_path / "ui.json", tmp_path / "zh.json", tmp_path / "report.json"
    src.write_text(json.dumps({key: key for key in strings}, ensure_ascii=False), encoding="utf-8")
    code = main([*_args(url, src, dst), "--report", str(report), *extra])
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


def test_a_memory_files_blank_targets_are_kept_only_when_asked(
    served: tuple[str, FakeEngine], tmp_path: Path
) -> None:
    # "Restore faces" has an empty target: not translated yet, or (asked) a translation that hides it.
    url, _ = served
    memory = tmp_path / "ui.csv"
    memory.write_text("Batch count,总批次数,en,zh\nRestore faces,,en,zh\n", encoding="utf-8")
    code, out, report = _run(tmp_path, url, "--memory", str(memory))
    assert code == 0 and out["Restore faces"] != ""
    assert (report["memory"], report["translated"]) == (1, 2)
    code, out, report = _run(tmp_path, url, "--memory", str(memory), "--memory-keep-blank")
    assert code == 0 and out["Restore faces"] == "" and out["Batch count"] == "总批次数"
    assert (report["memory"], report["translated"]) == (2, 1)


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


def test_a_file_with_its_own_translations_imported_comes_back_as_written(
    served: tuple[str, FakeEngine], tmp_path: Path
) -> None:
    url, engine = served
    # The SD WebUI file's hard cases: the same words with and without a trailing space translated
    # apart, a symbol alone, a placeholder-only string, a string hidden (blank), one kept as it is.
    human = {
        "Copy image to: ": "将图片发动到:",
        "Copy image to:": "将图片复制到:",
        "Tags: ": "标签：",
        "•": "・",
        "{2$$artist1|artist2}": "{2$$艺术家1|艺术家2}",
        "(brush color of inpaint mask)": "",
        "(shown only when searched)": " ",
        "Euler a": "Euler a",
    }
    rows = "".join(
        f"{json.dumps(k, ensure_ascii=False)},{json.dumps(v, ensure_ascii=False)}\n" for k, v in human.items()
    )
    query = {"file": "ui.csv", "source_lang": "en", "target_lang": "zh", "blank": "keep"}
    assert httpx.post(url + "/memories", params=query, content=rows.encode()).status_code == 201
    code, out, report = _run(tmp_path, url, strings=human)
    assert code == 0 and out == human and engine.calls == 0
    assert report["memory"] == len(human)  # every one answered from the memory, none skipped


PO = """msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"

#, fuzzy
msgid "Batch count"
msgstr "批次"

#, fuzzy, python-format
msgid "Sampling steps"
msgstr "步骤"

#, fuzzy
msgid "Restore faces"
msgstr "面部"
"""


def test_a_po_entry_the_memory_answers_leaves_fuzzy_and_the_models_stay_fuzzy(
    served: tuple[str, FakeEngine], tmp_path: Path
) -> None:
    url, engine = served
    pairs = "".join(f"{k}\t{v}\n" for k, v in list(UI.items())[:2])
    query = {"file": "half.tsv", "source_lang": "en", "target_lang": "zh"}
    assert httpx.post(url + "/memories", params=query, content=pairs.encode()).status_code == 201
    src, dst = tmp_path / "ui.po", tmp_path / "zh.po"
    src.write_text(PO, encoding="utf-8")
    assert main(_args(url, src, dst)) == 0 and engine.calls == 1
    entries = {e.msgid: e for e in polib.pofile(dst.read_text(encoding="utf-8"))}
    assert entries["Batch count"].msgstr == "总批次数" and entries["Batch count"].flags == []
    assert entries["Sampling steps"].flags == ["python-format"]  # the person's: reviewed, other flags kept
    assert entries["Restore faces"].flags == ["fuzzy"]  # the model's: still for a translator to review


@pytest.mark.parametrize("machine", [False, True])
def test_review_machine_writes_only_the_persons_translations_as_translated(
    served: tuple[str, FakeEngine], tmp_path: Path, machine: bool
) -> None:
    url, engine = served
    query = {"file": "one.tsv", "source_lang": "en", "target_lang": "zh"}
    assert (
        httpx.post(url + "/memories", params=query, content="Batch count\t总批次数\n".encode()).status_code
        == 201
    )
    src, dst = tmp_path / "ui.po", tmp_path / "zh.po"
    src.write_text('msgid "Batch count"\nmsgstr ""\n\nmsgid "Restore faces"\nmsgstr ""\n', encoding="utf-8")
    assert main([*_args(url, src, dst), *(["--review-machine"] if machine else [])]) == 0
    assert engine.calls == 1  # Restore faces: the model's
    entries = {e.msgid: e for e in polib.pofile(dst.read_text(encoding="utf-8"))}
    assert entries["Batch count"].msgstr == "总批次数" and entries["Batch count"].flags == []
    assert entries["Restore faces"].msgstr and entries["Restore faces"].flags == (
        ["fuzzy"] if machine else []
    )
