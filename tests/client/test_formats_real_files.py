"""Real ARB, i18next and Apple .strings files (tests/data, with LICENSE and ORIGIN) through `translate`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hunyuan_serve.client.cli import main
from hunyuan_serve.localization.formats import Options, parse
from tests.support import scripted_service
from tests.support.scripted_service import ScriptedService

DATA = Path(__file__).resolve().parents[1] / "data"
GALLERY = DATA / "flutter-gallery" / "intl_en.arb"
I18NEXT = DATA / "react-i18next" / "translation.json"
STRINGS = DATA / "maccy" / "Localizable.strings"
REAL_FILES = [(GALLERY, "arb"), (I18NEXT, "json"), (STRINGS, "strings")]


@pytest.fixture(autouse=True)
def _languages(monkeypatch: pytest.MonkeyPatch) -> None:
    """German has English's plural categories (an identity run changes nothing); Russian has four."""
    extra = [{"code": "de", "name": "German"}, {"code": "ru", "name": "Russian"}]
    monkeypatch.setattr(scripted_service, "LANGUAGES", [*scripted_service.LANGUAGES, *extra])


def run(service: ScriptedService, tmp_path: Path, src: Path, target: str) -> tuple[int, Path, dict]:
    dst, report = tmp_path / f"out-{src.name}", tmp_path / "report.json"
    flags = ["--no-cache", "--no-progress", "--report", str(report), "--batch-size", "64"]
    code = main(["--url", service.url, "--from", "en", "--to", target, str(src), "-o", str(dst), *flags])
    return code, dst, json.loads(report.read_text())


@pytest.mark.parametrize(("path", "fmt"), REAL_FILES, ids=lambda p: getattr(p, "name", p))
@pytest.mark.parametrize("crlf_bom", [False, True], ids=["as-is", "crlf-bom"])
def test_real_file_through_identity_is_byte_identical(
    service: ScriptedService, tmp_path: Path, path: Path, fmt: str, crlf_bom: bool
) -> None:
    src = tmp_path / path.name
    data = path.read_bytes()
    src.write_bytes(b"\xef\xbb\xbf" + data.replace(b"\n", b"\r\n") if crlf_bom else data)
    service.state.translate = lambda text, target: text
    code, dst, report = run(service, tmp_path, src, "de")
    assert code == 0 and report["translated"] > 0 and report["failed"] == 0  # the texts went out
    assert dst.read_bytes() == src.read_bytes()
    assert len(parse(path.read_text(encoding="utf-8"), fmt, Options()).segments) == report["total"]


def test_gallery_arb_translated_keeps_metadata_and_icu_plurals(
    service: ScriptedService, tmp_path: Path
) -> None:
    code, dst, report = run(service, tmp_path, GALLERY, "de")
    before, after = json.loads(GALLERY.read_text()), json.loads(dst.read_text(encoding="utf-8"))
    assert code == 0 and report["translated"] + report["skipped"] == 803 and list(after) == list(before)
    metadata = {k: v for k, v in before.items() if k.startswith("@")}
    assert metadata and all(after[k] == v for k, v in metadata.items())  # metadata untouched
    cart = "shrineScreenReaderCart"
    assert after[cart] == "[de] " + before[cart] and "{quantity, plural," in after[cart]


def test_react_i18next_plurals_for_russian(service: ScriptedService, tmp_path: Path) -> None:
    code, dst, _ = run(service, tmp_path, I18NEXT, "ru")
    out = json.loads(dst.read_text(encoding="utf-8"))
    keys = [k for k in out if k.startswith("userMessagesUnread_")]
    assert code == 0 and keys == [f"userMessagesUnread_{c}" for c in ("one", "other", "few", "many")]
    assert out["userMessagesUnread_few"] == "[ru] You have {{count}} unread messages."
    assert out["description"] == {"part1": "[ru] This is a simple example.", "part2": "😉"}


def test_maccy_strings_translated_values_only(service: ScriptedService, tmp_path: Path) -> None:
    code, dst, _ = run(service, tmp_path, STRINGS, "de")
    before = parse(STRINGS.read_text(encoding="utf-8"), "strings", Options())
    after = parse(dst.read_text(encoding="utf-8"), "strings", Options())
    assert code == 0 and after.labels == before.labels
    assert all(new == f"[de] {old}" for old, new in zip(before.segments, after.segments, strict=True))
