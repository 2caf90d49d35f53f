"""Apple String Catalogs through `translate`: Maccy's catalog as Xcode wrote it, plurals per target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hunyuan_serve.client.cli import main
from hunyuan_serve.localization.formats import FormatError, Options, detect_format, parse
from hunyuan_serve.localization.formats.xcstrings import dump_xcode
from tests.support import scripted_service
from tests.support.scripted_service import ScriptedService

MACCY = Path(__file__).resolve().parents[1] / "data" / "maccy" / "Localizable.xcstrings"
# The parts of the format Maccy's catalog lacks, as Apple documents them ("Localizing and varying text
# with a string catalog", developer.apple.com/documentation/xcode/localizing-and-varying-text-with-a-
# string-catalog): plural variations, shouldTranslate, a key that is its own source text (no "en"),
# an existing translation, and a substitution (left alone). Laid out as Xcode writes it.
CATALOG: dict[str, Any] = {
    "sourceLanguage": "en",
    "strings": {
        "%lld files": {
            "localizations": {
                "en": {
                    "variations": {
                        "plural": {
                            "one": {"stringUnit": {"state": "translated", "value": "%lld file"}},
                            "other": {"stringUnit": {"state": "translated", "value": "%lld files"}},
                        }
                    }
                }
            }
        },
        "Brand": {"shouldTranslate": False},
        "Open %@": {"comment": "Button", "extractionState": "manual"},
        "saved": {
            "localizations": {
                "en": {"stringUnit": {"state": "translated", "value": "Saved"}},
                "ru": {"stringUnit": {"state": "translated", "value": "Сохранено"}},
            }
        },
        "%#@apples@ left": {
            "localizations": {
                "en": {
                    "stringUnit": {"state": "translated", "value": "%#@apples@ left"},
                    "substitutions": {
                        "apples": {
                            "argNum": 1,
                            "formatSpecifier": "lld",
                            "variations": {
                                "plural": {"other": {"stringUnit": {"state": "translated", "value": "%arg"}}}
                            },
                        }
                    },
                }
            }
        },
    },
    "version": "1.0",
}


@pytest.fixture(autouse=True)
def _languages(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in service also offers the languages these catalogs need (Maccy's, and beyond it)."""
    extra = [{"code": code, "name": code} for code in ("de", "ru", "pl", "ar")]
    monkeypatch.setattr(scripted_service, "LANGUAGES", [*scripted_service.LANGUAGES, *extra])


def run(service: ScriptedService, tmp_path: Path, src: Path, *extra: str) -> tuple[int, Path, dict]:
    dst, report = tmp_path / "out.xcstrings", tmp_path / "report.json"
    flags = ["--no-cache", "--no-progress", "--report", str(report), *extra]
    code = main(["--url", service.url, "--from", "en", str(src), "-o", str(dst), *flags])
    return code, dst, json.loads(report.read_text()) if report.exists() else {}


def catalog(tmp_path: Path) -> Path:
    src = tmp_path / "Localizable.xcstrings"
    src.write_text(dump_xcode(CATALOG), encoding="utf-8")
    return src


def test_xcode_layout_is_reproduced_byte_for_byte() -> None:
    content = MACCY.read_text(encoding="utf-8")
    assert dump_xcode(json.loads(content)) == content and not content.endswith("\n")
    assert detect_format("Localizable.xcstrings", content) == "xcstrings"


def test_maccy_through_identity_only_adds_the_target(service: ScriptedService, tmp_path: Path) -> None:
    service.state.translate = lambda text, target: text
    code, dst, report = run(service, tmp_path, MACCY, "--to", "de")  # every key has German already
    assert code == 0 and report["total"] == 0 and dst.read_bytes() == MACCY.read_bytes()
    code, dst, report = run(service, tmp_path, MACCY, "--to", "pl")
    assert code == 0 and report["translated"] > 0 and report["failed"] == 0
    out = json.loads(dst.read_text(encoding="utf-8"))
    units = [entry["localizations"].pop("pl") for entry in out["strings"].values()]
    assert {u["stringUnit"]["state"] for u in units} == {"translated"} and len(units) == 34
    assert dump_xcode(out).encode("utf-8") == MACCY.read_bytes()  # all else as Xcode wrote it


def test_maccy_translated_keeps_keys_and_sorted_languages(service: ScriptedService, tmp_path: Path) -> None:
    code, dst, _ = run(service, tmp_path, MACCY, "--to", "ar")
    out, before = json.loads(dst.read_text(encoding="utf-8")), json.loads(MACCY.read_text(encoding="utf-8"))
    assert code == 0 and list(out["strings"]) == list(before["strings"])
    about = out["strings"]["about"]["localizations"]
    assert list(about) == sorted(about) and about["ar"]["stringUnit"]["value"] == "[ar] About"


def test_plurals_get_the_targets_categories(service: ScriptedService, tmp_path: Path) -> None:
    code, dst, report = run(service, tmp_path, catalog(tmp_path), "--to", "ru")
    strings = json.loads(dst.read_text(encoding="utf-8"))["strings"]
    plural = strings["%lld files"]["localizations"]["ru"]["variations"]["plural"]
    assert list(plural) == ["few", "many", "one", "other"]  # CLDR's Russian, keys sorted as Xcode does
    # Russian "one" also reads 21, 31...: "%lld file" has the same placeholders, so it serves.
    assert plural["one"]["stringUnit"] == {"state": "translated", "value": "[ru] %lld file"}
    assert plural["few"]["stringUnit"]["value"] == "[ru] %lld files"
    assert strings["Open %@"]["localizations"]["ru"]["stringUnit"]["value"] == "[ru] Open %@"
    assert "localizations" not in strings["Brand"]  # shouldTranslate: false
    assert strings["saved"]["localizations"]["ru"]["stringUnit"]["value"] == "Сохранено"  # kept
    assert "ru" not in strings["%#@apples@ left"]["localizations"]  # substitutions: left alone
    assert code == 0 and report["total"] == 3  # one, other and "Open %@"
    code, dst, _ = run(service, tmp_path, catalog(tmp_path), "--to", "ru", "--overwrite")
    saved = json.loads(dst.read_text(encoding="utf-8"))["strings"]["saved"]["localizations"]["ru"]
    assert saved["stringUnit"]["value"] == "[ru] Saved"


def test_chinese_has_one_form_and_apples_code(service: ScriptedService, tmp_path: Path) -> None:
    code, dst, _ = run(service, tmp_path, catalog(tmp_path), "--to", "zh")
    localizations = json.loads(dst.read_text(encoding="utf-8"))["strings"]["%lld files"]["localizations"]
    assert code == 0 and list(localizations["zh-Hans"]["variations"]["plural"]) == ["other"]


def test_lost_placeholder_is_marked_needs_review(service: ScriptedService, tmp_path: Path) -> None:
    service.state.translate = lambda text, target: text.replace("%@", "").replace("%lld", "N")
    code, dst, report = run(service, tmp_path, catalog(tmp_path), "--to", "de")
    strings = json.loads(dst.read_text(encoding="utf-8"))["strings"]
    unit = strings["Open %@"]["localizations"]["de"]["stringUnit"]
    assert code == 1 and report["failed"] == 3
    assert unit == {"state": "needs_review", "value": "Open %@"}  # the source, flagged for a translator


@pytest.mark.parametrize(
    ("content", "line", "problem"),
    [
        ('{\n  "sourceLanguage" : "en",\n  "strings" : {\n    "a" : \n  }\n}', 5, "not valid JSON"),
        ('{\n  "sourceLanguage" : "en"\n}', None, '"strings" object'),
        ('{"strings" : {"a" : "b"}}', None, "string 'a'"),
    ],
)
def test_malformed_catalog_names_file_and_line_and_writes_nothing(
    service: ScriptedService,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    line: int | None,
    problem: str,
) -> None:
    with pytest.raises(FormatError) as caught:
        parse(content, "xcstrings", Options(target="de"))
    assert caught.value.line == line and problem in str(caught.value)
    src, dst = tmp_path / "bad.xcstrings", tmp_path / "out.xcstrings"
    src.write_text(content, encoding="utf-8")
    dst.write_text("keep me", encoding="utf-8")
    code = main(["--url", service.url, "--to", "de", str(src), "-o", str(dst), "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2 and f"{src}: " in err and problem in err
    assert dst.read_text(encoding="utf-8") == "keep me" and service.state.requests == []
