"""The Chimera's fusion prompt, byte for byte, and `hunyuan-serve prompt --family chimera --candidate ...`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hunyuan_serve.cli import main
from hunyuan_serve.families import sampling_defaults
from hunyuan_serve.families.base import PromptInputError
from hunyuan_serve.families.build import build_prompt, probe_prompt
from hunyuan_serve.families.chimera import FusionOnly, fusion_prompt
from hunyuan_serve.languages import find_language

# Written out from Tencent-Hunyuan/Hunyuan-MT, README.md, "Prompt Template for Hunyuan-MT-Chimera-7B"
# (commit 23380076a4e52ec332a75bb215db70928a8ed89d): English language names in every direction, the
# source and each candidate in triple backticks, candidates numbered from 1, nothing after the last.
EN_ZH = (
    "Analyze the following multiple Chinese translations of the English segment surrounded in triple "
    "backticks and generate a single refined Chinese translation. Only output the refined translation, "
    "do not explain.\n"
    "\n"
    "The English segment:\n"
    "```It’s on the house.```\n"
    "\n"
    "The multiple Chinese translations:\n"
    "1. ```这是免费的。```\n"
    "2. ```本店请客。```"
)
ZH_EN = (
    "Analyze the following multiple English translations of the Chinese segment surrounded in triple "
    "backticks and generate a single refined English translation. Only output the refined translation, "
    "do not explain.\n"
    "\n"
    "The Chinese segment:\n"
    "```今天天气很好。```\n"
    "\n"
    "The multiple English translations:\n"
    "1. ```The weather is nice today.```\n"
    "2. ```It's a fine day today.```\n"
    "3. ```Today the weather is good.```"
)
DE_FR = (
    "Analyze the following multiple French translations of the German segment surrounded in triple "
    "backticks and generate a single refined French translation. Only output the refined translation, "
    "do not explain.\n"
    "\n"
    "The German segment:\n"
    "```Guten Morgen\nbis bald```\n"
    "\n"
    "The multiple French translations:\n"
    "1. ```Bonjour\nà bientôt```\n"
    "2. ```Bon matin\nà plus```"
)


@pytest.mark.parametrize(
    ("source", "target", "text", "candidates", "expected"),
    [
        ("en", "zh", "It’s on the house.", ["这是免费的。", "本店请客。"], EN_ZH),
        ("zh", "en", "今天天气很好。", ["The weather is nice today.", "It's a fine day today.",
                                       "Today the weather is good."], ZH_EN),
        ("de", "fr", "Guten Morgen\nbis bald", ["Bonjour\nà bientôt", "Bon matin\nà plus"], DE_FR),
    ],
)  # fmt: skip
def test_fusion_prompt_is_the_readme_template(
    source: str, target: str, text: str, candidates: list[str], expected: str
) -> None:
    prompt = fusion_prompt(find_language(source), find_language(target), text, candidates)
    assert prompt.messages == ({"role": "user", "content": expected},)
    assert prompt.text == "" and prompt.stop == ()


def test_six_candidates_make_the_readme_block() -> None:
    # The README's own example has six lines <translated_text1> .. <translated_text6>.
    candidates = [f"<translated_text{n}>" for n in range(1, 7)]
    content = fusion_prompt(find_language("en"), find_language("ja"), "<source_text>", candidates).messages[0]
    assert content["content"].endswith(
        "The multiple Japanese translations:\n"
        + "\n".join(f"{n}. ```<translated_text{n}>```" for n in range(1, 7))
    )
    traditional = fusion_prompt(find_language("en"), find_language("zh-Hant"), "x", ["a", "b"])
    assert "multiple Traditional Chinese translations" in traditional.messages[0]["content"]


@pytest.mark.parametrize("count", [0, 1, 9])
def test_candidate_count_outside_2_to_8_is_refused(count: int) -> None:
    with pytest.raises(
        PromptInputError, match=f"candidates must be 2 to 8 candidate translations, got {count}"
    ):
        fusion_prompt(find_language("en"), find_language("zh"), "Hi", ["c"] * count)


def test_the_family_has_no_plain_translation_prompt() -> None:
    with pytest.raises(FusionOnly, match=r"fuses candidate translations .* POST /fuse"):
        build_prompt("chimera", find_language("en"), find_language("zh"), "Hi")
    probe = probe_prompt("chimera", "Hello, world.")
    assert probe.messages[0]["content"].startswith("Analyze the following multiple Chinese translations")
    assert "1. ```你好，世界。```\n2. ```世界，你好。```" in probe.messages[0]["content"]
    assert probe_prompt("hunyuan-mt", "Hi") == build_prompt(
        "hunyuan-mt", find_language("en"), find_language("zh"), "Hi"
    )
    # The Chimera's README recommends the same sampling as Hunyuan-MT-7B's ("Inference" section).
    assert sampling_defaults("chimera") == sampling_defaults("hunyuan-mt")


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["prompt", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_prompt_command_prints_the_fusion_messages(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--family", "chimera", "--from", "en", "--to", "zh"]
    code, out, _ = _run(
        capsys, *args, "--candidate", "这是免费的。", "--candidate", "本店请客。", "It’s on the house."
    )
    assert code == 0
    assert out == f"# family: chimera\n# user:\n{EN_ZH}\n"
    code, out, _ = _run(capsys, *args, "--json", "--candidate", "这是免费的。", "--candidate", "本店请客。",
                        "It’s on the house.")  # fmt: skip
    assert code == 0 and json.loads(out) == {
        "family": "chimera",
        "messages": [{"role": "user", "content": EN_ZH}],
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--family", "chimera"], "family chimera fuses candidate translations of TEXT: give each with "
         "--candidate (2 to 8)"),
        (["--family", "chimera", "--candidate", "a"], "--candidate must be 2 to 8 candidate translations, "
         "got 1"),
        (["--family", "chimera", *["--candidate", "a"] * 9], "got 9"),
        (["--family", "chimera", "--candidate", "a", "--candidate", "b", "--style", "formal"],
         "takes no glossary, context, style or format"),
        (["--family", "hunyuan-mt", "--candidate", "a"], "--candidate is for family chimera; hunyuan-mt "
         "translates TEXT alone"),
        (["--family", "hy-mt2", "--candidate", "a", "--candidate", "b"], "--candidate is for family chimera"),
    ],
)  # fmt: skip
def test_candidates_required_for_chimera_and_refused_elsewhere(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, *args, "--from", "en", "--to", "zh", "Hi")
    assert code == 2 and out == ""
    assert err.startswith("hunyuan-serve prompt: ") and message in err


def test_a_tiny_chimera_is_detected_and_templated(
    tiny_family_dirs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tiny_family_dirs["chimera"])
    candidates = ["--candidate", "这是免费的。", "--candidate", "本店请客。"]
    code, out, _ = _run(capsys, "--model", path, "--from", "en", "--to", "zh", "--json", *candidates,
                        "It’s on the house.")  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    assert doc["family"] == "chimera"  # from its directory's name (tiny-chimera-N)
    assert doc["chat_text"] == f"<|startoftext|>{EN_ZH}<|extra_0|>"


def test_tiny_model_command_builds_a_chimera(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "Hunyuan-MT-Chimera-7B-tiny"
    assert main(["tiny-model", str(target), "--family", "chimera"]) == 0
    assert "places it in prompt family chimera" in capsys.readouterr().out
    config = json.loads((target / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["HunYuanDenseV1ForCausalLM"]
    assert "Hunyuan-MT-Chimera-7B" in (target / "README.md").read_text(encoding="utf-8")
