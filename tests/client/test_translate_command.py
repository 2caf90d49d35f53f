"""`hunyuan-serve translate` against a real local HTTP server: formats, cache, resume, glossary, errors."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from hunyuan_serve.client.cli import main
from hunyuan_serve.client.settings import API_KEY_ENV
from hunyuan_serve.config import ServeConfig
from hunyuan_serve.families import HUNYUAN_MT, HY_MT15
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.families.build import build_prompt
from hunyuan_serve.languages import find_language
from hunyuan_serve.replica.app import create_app
from hunyuan_serve.replica.engine.interface import Generation, Sampling
from tests.support.replica_fakes import FakeEngine, make_config, serve_in_thread, wait_ready
from tests.support.scripted_service import Reply, ScriptedService, requests_seen

UI = {
    "Loading...": "Loading...",
    "txt2img": "txt2img",
    "⤡": "⤡",
    "Save the token {prompt} here": "Save the token {prompt} here",
    "Override `Denoising strength` to 1?": "Override `Denoising strength` to 1?",
    "Model link - https://mega.nz/file/ptA2jSSB#G4IN": "Model link - https://mega.nz/file/ptA2jSSB#G4IN",
    "Train": "Train",
    "nested": {"Click <b>Apply</b>": "Click <b>Apply</b>", "count": 3, "list": ["Open", ""]},
}


def breaks_braces(text: str, target: str) -> str:
    """A 'model' that mangles {placeholders} and translates the rest."""
    return f"[{target}] " + text.replace("{", "(").replace("}", ")")


def run(args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str, dict]:
    report = tmp_path / "report.json"
    code = main([*args, "--cache", str(tmp_path / "cache.sqlite"), "--no-progress", "--report", str(report)])
    out, err = capsys.readouterr()
    return code, out, err, json.loads(report.read_text()) if report.exists() else {}


def test_json_file_localized_then_rerun_only_sends_changes(
    service: ScriptedService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src, dst = tmp_path / "ui.json", tmp_path / "zh.json"
    src.write_text(json.dumps(UI, ensure_ascii=False, indent=4) + "\n", encoding="utf-8")
    service.state.translate = breaks_braces
    code, _, err, report = run(
        ["--url", service.url, "--to", "zh", "--from", "en", str(src), "-o", str(dst)], tmp_path, capsys
    )

    out = json.loads(dst.read_text(encoding="utf-8"))
    assert code == 1  # one segment failed
    assert list(out) == list(UI) and list(out["nested"]) == list(UI["nested"])
    assert out["Loading..."] == "[zh] Loading..."
    assert out["⤡"] == "⤡"  # nothing to translate: skipped, not sent
    assert out["Save the token {prompt} here"] == "Save the token {prompt} here"  # broken: left as it was
    assert out["Override `Denoising strength` to 1?"] == "[zh] Override `Denoising strength` to 1?"
    assert out["nested"] == {
        "Click <b>Apply</b>": "[zh] Click <b>Apply</b>",
        "count": 3,
        "list": ["[zh] Open", ""],
    }
    assert (report["translated"], report["cached"], report["skipped"], report["failed"]) == (7, 0, 2, 1)
    assert report["failures"] == [
        {
            "label": "Save the token {prompt} here",
            "source": "Save the token {prompt} here",
            "problem": "missing '{prompt}'",
        }
    ]
    assert "10 segments: 7 translated, 0 cached, 2 skipped, 1 failed" in err
    assert "⤡" not in service.state.sent_texts() and "" not in service.state.sent_texts()
    assert all(body["source_lang"] == "en" and body["target_lang"] == "zh" for body in service.state.requests)

    # Second run: the model got better, one string changed: only it and the failed one are sent.
    service.state.requests.clear()
    service.state.translate = lambda text, target: f"[{target}] {text}"
    changed = dict(UI, txt2img="text to image")
    src.write_text(json.dumps(changed, ensure_ascii=False, indent=4) + "\n", encoding="utf-8")
    code, _, err, report = run(
        ["--url", service.url, "--to", "zh", "--from", "en", str(src), "-o", str(dst)], tmp_path, capsys
    )
    assert code == 0
    assert sorted(service.state.sent_texts()) == ["Save the token {prompt} here", "text to image"]
    assert (report["translated"], report["cached"], report["skipped"], report["failed"]) == (2, 6, 2, 0)
    assert (
        json.loads(dst.read_text(encoding="utf-8"))["Save the token {prompt} here"]
        == "[zh] Save the token {prompt} here"
    )


def test_cached_translations_are_reused_only_for_the_same_model_and_sampling(
    service: ScriptedService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in.txt").write_text("Hello\nWorld\n", encoding="utf-8")
    args = ["--url", service.url, "--to", "fr", str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt")]

    def sent(extra: list[str]) -> int:
        service.state.requests.clear()
        code, _, _, _ = run([*args, *extra], tmp_path, capsys)
        assert code == 0
        return len(service.state.sent_texts())

    service.state.model = "demo-270m"
    assert sent([]) == 2
    assert sent([]) == 0
    assert sent(["--temperature", "0"]) == 2  # other sampling: other translations
    assert sent(["--temperature", "0"]) == 0
    service.state.model = "tencent/Hunyuan-MT-7B"  # the service now serves another model
    assert sent([]) == 2
    assert sent([]) == 0
    service.state.model = "demo-270m"
    assert sent([]) == 0  # the first model's entries are still there


def test_a_cache_file_from_before_profiles_is_started_afresh(
    service: ScriptedService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with sqlite3.connect(tmp_path / "cache.sqlite") as db:
        db.execute(
            "CREATE TABLE translations (source_lang TEXT NOT NULL, target_lang TEXT NOT NULL,"
            " text TEXT NOT NULL, result TEXT NOT NULL, created REAL NOT NULL,"
            " PRIMARY KEY (source_lang, target_lang, text))"
        )
        db.execute("INSERT INTO translations VALUES ('en', 'fr', 'Hello', 'stale', 0)")
    (tmp_path / "in.txt").write_text("Hello\n", encoding="utf-8")
    code, _, _, report = run(
        ["--url", service.url, "--to", "fr", str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt")],
        tmp_path,
        capsys,
    )
    assert code == 0 and report["translated"] == 1
    assert (tmp_path / "out.txt").read_text(encoding="utf-8") == "[fr] Hello\n"


def test_text_via_stdin_and_stdout_keeps_blank_lines(
    service: ScriptedService,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("Hello\n\n  World\n"))
    code, out, _, report = run(["--url", service.url, "--to", "fr", "-"], tmp_path, capsys)
    assert code == 0
    assert out == "[fr] Hello\n\n  [fr] World\n"
    assert report["translated"] == 2 and report["skipped"] == 1
    assert service.state.requests[0]["source_lang"] == "en"  # the default of --from


def test_glossary_and_keep_list(
    service: ScriptedService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in.txt").write_text("Train\nTrain the model\nUse Dreambooth\nDreambooth\n", encoding="utf-8")
    (tmp_path / "glossary.tsv").write_text("Train\t训练\n", encoding="utf-8")
    (tmp_path / "keep.txt").write_text("Dreambooth\n", encoding="utf-8")
    args = ["--url", service.url, "--to", "zh", str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt")]
    code, _, _, report = run(
        [*args, "--glossary", str(tmp_path / "glossary.tsv"), "--keep", str(tmp_path / "keep.txt")],
        tmp_path,
        capsys,
    )
    assert code == 0
    assert (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines() == [
        "训练",
        "[zh] 训练 the model",
        "[zh] Use Dreambooth",
        "Dreambooth",
    ]
    assert service.state.sent_texts() == ["训练 the model", "Use Dreambooth"]
    assert report["skipped"] == 2


def test_unsupported_language_is_a_usage_error(
    service: ScriptedService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in.txt").write_text("Hello\n", encoding="utf-8")
    code, _, err, _ = run(["--url", service.url, "--to", "xx", str(tmp_path / "in.txt")], tmp_path, capsys)
    assert code == 2
    assert "unsupported language 'xx'; supported: en, zh, fr" in err
    # Only the one-token probe went out, no batch.
    assert service.state.requests == [
        {"text": "Hello", "target_lang": "xx", "source_lang": "en", "max_tokens": 1}
    ]


def test_bad_inputs_are_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.json").write_text("[1, 2]", encoding="utf-8")
    assert run(["--to", "zh", str(tmp_path / "bad.json")], tmp_path, capsys)[0] == 2
    assert run(["--to", "zh", str(tmp_path / "missing.txt")], tmp_path, capsys)[0] == 2
    code, _, err, _ = run(["--to", "zh", "--concurrency", "0", str(tmp_path / "bad.json")], tmp_path, capsys)
    assert code == 2 and "--concurrency" in err


def test_one_refused_text_in_a_batch_fails_alone(
    service: ScriptedService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in.txt").write_text("a\nb\nc\n", encoding="utf-8")
    service.state.script.append(Reply(413, {"error": {"code": "too_long", "message": "text too long"}}))
    service.state.script.append(Reply(200, {"results": ["[zh] a"]}))
    service.state.script.append(Reply(413, {"error": {"code": "too_long", "message": "text too long"}}))
    args = ["--url", service.url, "--to", "zh", str(tmp_path / "in.txt"), "-o", str(tmp_path / "o.txt")]
    code, _, _, report = run(args, tmp_path, capsys)
    assert code == 1
    assert (tmp_path / "o.txt").read_text() == "[zh] a\nb\n[zh] c\n"
    assert report["failures"] == [
        {"label": "line 2", "source": "b", "problem": "refused: too_long: text too long"}
    ]


def test_interrupted_run_resumes(service: ScriptedService, tmp_path: Path) -> None:
    # 20 batches at 0.3 s each: after the fifth is sent, seconds are left to interrupt in, even on a
    # loaded machine (with 10 batches the run could end before the SIGINT reached it).
    lines = [f"sentence number {i}" for i in range(40)]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "hunyuan_serve.client.cli", "--url", service.url, "--to", "zh"]
    cmd += ["--batch-size", "2", "--concurrency", "1", "--cache", str(tmp_path / "c.sqlite"), "--no-progress"]
    cmd += [str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt"), "--report", str(tmp_path / "r.json")]
    service.state.delay_s = 0.3
    proc = subprocess.Popen(
        cmd, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )
    try:
        deadline = time.monotonic() + 60
        while len(service.state.requests) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "command again to resume" in err
    assert not (tmp_path / "out.txt").exists()

    done_before = len(service.state.sent_texts())
    service.state.reset()
    rerun = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["cached"] >= 8  # at least the four batches answered before the interrupt
    assert report["cached"] + report["translated"] == 40
    assert len(service.state.sent_texts()) == report["translated"] <= 40 - 8
    assert done_before >= 10
    assert (tmp_path / "out.txt").read_text().splitlines() == [f"[zh] {line}" for line in lines]


def test_service_gone_stops_sending(
    service: ScriptedService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in.txt").write_text("".join(f"line {i}\n" for i in range(12)), encoding="utf-8")
    service.state.script.extend([Reply(503, {"error": {"code": "unavailable", "message": "no replica"}})] * 2)
    args = ["--url", service.url, "--to", "zh", str(tmp_path / "in.txt"), "-o", str(tmp_path / "o.txt")]
    args += ["--batch-size", "3", "--concurrency", "1", "--max-retries", "1", "--backoff-base-s", "0.01"]
    code, _, err, report = run(args, tmp_path, capsys)
    assert code == 1
    assert len(service.state.requests) == 2  # the first batch and its one retry; the other three never sent
    assert report["failed"] == 12 and report["aborted"].startswith("service error: 503 unavailable")
    assert "stopped sending: service error" in err
    assert (tmp_path / "o.txt").read_text() == (tmp_path / "in.txt").read_text()


def test_an_exhausted_quota_stops_the_run_at_once_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real replica with a keys file: the key's 5 characters are spent by the first batch's 12, and
    its 429 quota_exceeded is final (waiting does not relieve a quota), though 429s are retried."""
    keys = tmp_path / "keys.txt"
    keys.write_text("sk-tiny-quota-a1b2 limit=5\n", encoding="utf-8")
    cfg = ServeConfig.model_validate(
        {"auth": {"keys_file": str(keys)}, "replica": {"cache_entries": 100}, "run_dir": str(tmp_path)}
    )
    app = create_app(FakeEngine(), cfg, HY_MT15)
    sent = requests_seen(app)

    (tmp_path / "in.txt").write_text("line 1\nline 2\nline 3\nline 4\n", encoding="utf-8")
    monkeypatch.setenv(API_KEY_ENV, "sk-tiny-quota-a1b2")
    with serve_in_thread(app) as url:
        with httpx.Client(base_url=url) as client:
            wait_ready(client)
        files = [str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt"), "--no-cache"]
        args = ["--url", url, "--to", "zh", *files, "--batch-size", "2", "--concurrency", "1"]
        sent.clear()
        code, _, err, report = run(args, tmp_path, capsys)  # the default --max-retries (6)
    assert code == 1 and sent.count("POST /translate") == 1  # the first batch, once; no retry, no other
    assert "429 quota_exceeded: Quota exceeded" in report["aborted"] and "retry" not in err
    assert "stopped sending: service error: 429 quota_exceeded" in err and report["failed"] == 4


def test_context_and_style_go_with_every_batch_and_into_the_cache_key(
    service: ScriptedService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in.txt").write_text("Open\nSave\nQuit\n", encoding="utf-8")
    args = ["--url", service.url, "--to", "zh", str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt")]
    args += ["--batch-size", "2", "--concurrency", "1"]  # one batch at a time: the requests in order

    def sent(extra: list[str]) -> list[dict]:
        service.state.requests.clear()
        code, _, _, _ = run([*args, *extra], tmp_path, capsys)
        assert code == 0
        return list(service.state.requests)

    menu = ["--context", "A file menu.", "--style", "formal"]
    first = sent(menu)
    # The probe that checks the service takes the fields, then the two batches, all carrying them.
    assert [body.get("texts", body.get("text")) for body in first] == ["Hello", ["Open", "Save"], ["Quit"]]
    assert all((body["context"], body["style"]) == ("A file menu.", "formal") for body in first)
    assert len(sent(menu)) == 1  # all cached: only the probe
    assert len(sent(["--context", "A game menu.", "--style", "formal"])) == 3  # other context: other key
    plain = sent([])
    assert len(plain) == 2 and not any("context" in body or "style" in body for body in plain)


def test_a_service_without_context_is_a_usage_error_before_any_batch(
    service: ScriptedService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "in.txt").write_text("Open\nSave\n", encoding="utf-8")
    service.state.script.append(
        Reply(422, {"error": {"code": "unknown_field", "message": "unknown field(s): context"}})
    )
    args = ["--url", service.url, "--to", "zh", "--context", "A file menu.", str(tmp_path / "in.txt")]
    code, _, err, _ = run(args, tmp_path, capsys)
    assert code == 2
    assert "hunyuan-serve translate: unknown field(s): context" in err
    assert service.state.requests == [
        {
            "text": "Hello",
            "target_lang": "zh",
            "source_lang": "en",
            "context": "A file menu.",
            "max_tokens": 1,
        }
    ]


class _EchoEngine(FakeEngine):
    """A scripted engine that keeps every prompt and answers with its last line (the text to translate)."""

    def __init__(self) -> None:
        super().__init__()
        self.prompts: list[Prompt] = []

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation:
        self.prompts.append(prompt)
        done = await super().generate(prompt, sampling, request_id, priority)
        return dataclasses.replace(done, text=prompt.messages[0]["content"].rsplit("\n", 1)[-1])


@pytest.mark.parametrize(
    ("family", "sent"),
    [
        # HY-MT1.5 has a terminology prompt: the file's terms go to it as the glossary field, text as written.
        (HY_MT15, {"text": "Train the model", "glossary": {"Train": "训练"}}),
        # Hunyuan-MT-7B has none: the term is substituted here, as before, and the plain prompt sent.
        (HUNYUAN_MT, {"text": "训练 the model"}),
    ],
)
def test_glossary_goes_to_the_models_terminology_prompt_when_its_family_has_one(
    family: str, sent: dict, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = _EchoEngine()
    (tmp_path / "in.txt").write_text("Train the model\nUse Dreambooth\n", encoding="utf-8")
    (tmp_path / "glossary.tsv").write_text("Train\t训练\n", encoding="utf-8")
    (tmp_path / "keep.txt").write_text("Dreambooth\n", encoding="utf-8")
    with serve_in_thread(create_app(engine, make_config(), family)) as url:
        with httpx.Client(base_url=url) as client:
            wait_ready(client)
        files = [str(tmp_path / "in.txt"), "-o", str(tmp_path / "out.txt")]
        lists = ["--glossary", str(tmp_path / "glossary.tsv"), "--keep", str(tmp_path / "keep.txt")]
        code, _, err, _ = run(["--url", url, "--to", "zh", *files, *lists], tmp_path, capsys)
    assert code == 0, err
    en, zh = find_language("en"), find_language("zh")
    assert build_prompt(family, en, zh, **sent) in engine.prompts
    # The keep-list is still locked here either way: the text goes as written, and the check passed.
    assert build_prompt(family, en, zh, "Use Dreambooth") in engine.prompts


def test_ctrl_c_stops_work_that_swallows_a_cancellation() -> None:
    from hunyuan_serve.client.cli import _until_interrupted

    swallowed = []

    async def stubborn() -> int:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            swallowed.append("first")  # as a cancellation lost in an inner await would be
        await asyncio.sleep(30)
        return 0

    async def main() -> int:
        asyncio.get_running_loop().call_later(0.2, os.kill, os.getpid(), signal.SIGINT)
        return await _until_interrupted(stubborn(), retry_s=0.05)

    with pytest.raises(KeyboardInterrupt):  # without the repeated cancel: 0, a minute later
        asyncio.run(main())
    assert swallowed == ["first"]
