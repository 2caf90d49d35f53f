"""`hunyuan-serve prompt`: the exact messages, --json, --model's chat text, and the 400 message on exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hunyuan_serve.cli import main


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["prompt", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_prints_family_and_messages(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--family", "hy-mt1.5", "--from", "en", "--to", "zh", "--json", "Hi")
    assert code == 0
    assert json.loads(out) == {
        "family": "hy-mt1.5",
        "messages": [
            {
                "role": "user",
                "content": "将以下文本翻译为中文，注意只需要输出翻译后的结果，不要额外解释：\n\nHi",
            }
        ],
    }


def test_glossary_file_takes_the_translate_formats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tsv = tmp_path / "terms.tsv"
    tsv.write_text("# product terms\nGPU\t显卡\nCPU = 处理器\n", encoding="utf-8")
    as_json = tmp_path / "terms.json"
    as_json.write_text(json.dumps({"GPU": "显卡", "CPU": "处理器"}), encoding="utf-8")
    outputs = []
    for path in (tsv, as_json):
        code, out, _ = _run(capsys, "--family", "hy-mt2", "--from", "en", "--to", "zh", "--json",
                            "--glossary", str(path), "The GPU is fast")  # fmt: skip
        assert code == 0
        outputs.append(json.loads(out)["messages"][0]["content"])
    assert outputs[0] == outputs[1]
    assert outputs[0].startswith(
        "参考下面的翻译：\nGPU 翻译成 显卡\n将以下文本翻译为中文"
    )  # CPU not in the text


def test_plain_output_shows_each_message(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "--family", "hy-mt2", "--from", "en", "--to", "de", "--style", "casual", "Hi")
    assert code == 0
    assert out.startswith("# family: hy-mt2\n# user:\nPlease translate the following text into German.")
    code, out, _ = _run(capsys, "--family", "few-shot", "--from", "en", "--to", "fr", "Save")
    assert "# completion text (stop at ['\\n']):\n" in out and out.endswith("English: Save\nFrench:\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--family", "hunyuan-mt", "--style", "formal"], "prompt family hunyuan-mt has no official prompt "
         "for style; families that have one: hy-mt2"),
        (["--family", "hy-mt2", "--preserve-format"], "has no official prompt for preserve_format; "
         "families that have one: hy-mt1.5"),
        (["--family", "qwen"], "unknown prompt family 'qwen'"),
        (["--family", "auto"], "--family auto needs --model"),
        (["--family", "hy-mt2", "--glossary", "/nonexistent/g.tsv"], "cannot read /nonexistent/g.tsv"),
    ],
)  # fmt: skip
def test_errors_exit_2_with_the_api_message(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, *args, "--from", "en", "--to", "zh", "Hi")
    assert code == 2 and out == ""
    assert err.startswith("hunyuan-serve prompt: ") and message in err


def test_model_adds_the_chat_templated_text(
    tiny_family_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    moe = str(tiny_family_dirs["hy-mt2-moe"])
    code, out, _ = _run(capsys, "--model", moe, "--from", "en", "--to", "zh", "--json", "Hi")  # auto: hy-mt2
    assert code == 0
    doc = json.loads(out)
    assert doc["family"] == "hy-mt2"
    assert doc["chat_text"] == (
        "<｜hy_begin▁of▁sentence｜><｜hy_User｜>将以下文本翻译为中文，注意只需要输出翻译后的结果，不要额外解释："
        "\n\nHi<｜hy_Assistant｜><think></think>"
    )
