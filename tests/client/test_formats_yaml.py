"""Rails YAML through `translate`: Active Model's en.yml byte-identical via identity, locale key renamed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from hunyuan_serve.client.cli import main
from hunyuan_serve.localization.formats import FormatError, Options, parse
from tests.support.scripted_service import ScriptedService

RAILS = Path(__file__).resolve().parents[1] / "data" / "rails" / "en.yml"
ANCHORS = "en:\n  greet: &g Hi %{name}\n  again: *g\n  long: |\n    Line one.\n    Line two.\n  n: 3\n"


def run(service: ScriptedService, tmp_path: Path, src: Path) -> tuple[int, Path, dict]:
    dst, report = tmp_path / "zh.yml", tmp_path / "report.json"
    flags = ["--no-cache", "--no-progress", "--report", str(report)]
    code = main(["--url", service.url, "--from", "en", "--to", "zh", str(src), "-o", str(dst), *flags])
    return code, dst, json.loads(report.read_text()) if report.exists() else {}


def shape(node: object) -> object:
    if isinstance(node, dict):
        return {key: shape(value) for key, value in node.items()}
    return "" if isinstance(node, str) else node


def test_rails_locale_through_identity_is_byte_identical(service: ScriptedService, tmp_path: Path) -> None:
    service.state.translate = lambda text, target: text
    code, dst, report = run(service, tmp_path, RAILS)
    assert code == 0 and report["total"] == 28 and dst.read_bytes() == RAILS.read_bytes()


def test_rails_locale_translated_keeps_keys_comments_and_renames_root(
    service: ScriptedService, tmp_path: Path
) -> None:
    code, dst, _ = run(service, tmp_path, RAILS)
    source, out = yaml.safe_load(RAILS.read_text()), yaml.safe_load(dst.read_text())
    assert code == 0 and shape(out) == {"zh": shape(source)["en"]}  # type: ignore[index]
    assert (
        out["zh"]["errors"]["messages"]["too_long"]["other"]
        == "[zh] is too long (maximum is %{count} characters)"
    )
    assert "    # The default format to use in full error messages.\n" in dst.read_text()


def test_anchors_block_scalars_and_numbers() -> None:
    doc = parse(ANCHORS, "yaml", Options(target="fr", source="en"))
    assert doc.segments == ("Hi %{name}", "Line one.\nLine two.\n")  # the alias is its anchor's text
    out = doc.render(["Salut %{name}", "Ligne un.\nLigne deux.\n"])
    assert (
        out == 'fr:\n  greet: &g "Salut %{name}"\n  again: *g\n  long: "Ligne un.\\nLigne deux.\\n"\n  n: 3\n'
    )
    assert yaml.safe_load(out)["fr"]["again"] == "Salut %{name}"


def test_malformed_yaml_names_the_line() -> None:
    with pytest.raises(FormatError) as caught:
        parse("en:\n  a: b\n  c: [d\n", "yaml", Options())
    assert caught.value.line == 4
