"""Apple .strings (UTF-16 with a BOM too) and .stringsdict through `translate`: values only change."""

from __future__ import annotations

import json
import plistlib
from pathlib import Path

import pytest

from hunyuan_serve.client.cli import main
from hunyuan_serve.localization.formats import FormatError, Options, parse
from tests.support.scripted_service import ScriptedService

STRINGS = (
    '/* Title of the welcome screen */\n"welcome" = "Welcome \\"friend\\"";\n// a line comment\n'
    'bare_key = "Open %@";\n"multi" = "Line\\nTwo";\n'
)
STRINGSDICT = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
\t<key>files_count</key>
\t<dict>
\t\t<key>NSStringLocalizedFormatKey</key>
\t\t<string>%#@files@</string>
\t\t<key>files</key>
\t\t<dict>
\t\t\t<key>NSStringFormatSpecTypeKey</key>
\t\t\t<string>NSStringPluralRuleType</string>
\t\t\t<key>NSStringFormatValueTypeKey</key>
\t\t\t<string>d</string>
\t\t\t<key>one</key>
\t\t\t<string>%d file &amp; folder</string>
\t\t\t<key>other</key>
\t\t\t<string>%d files</string>
\t\t</dict>
\t</dict>
</dict>
</plist>
"""


def run(service: ScriptedService, tmp_path: Path, src: Path) -> tuple[int, Path, dict]:
    dst, report = tmp_path / f"out{src.suffix}", tmp_path / "report.json"
    flags = ["--no-cache", "--no-progress", "--report", str(report)]
    code = main(["--url", service.url, "--from", "en", "--to", "zh", str(src), "-o", str(dst), *flags])
    return code, dst, json.loads(report.read_text()) if report.exists() else {}


def test_utf16_strings_round_trip_and_translate(service: ScriptedService, tmp_path: Path) -> None:
    src = tmp_path / "Localizable.strings"
    src.write_bytes(STRINGS.encode("utf-16"))  # Xcode's classic encoding, with its BOM
    service.state.translate = lambda text, target: text
    code, dst, _ = run(service, tmp_path, src)
    assert code == 0 and dst.read_bytes() == src.read_bytes()
    service.state.translate = lambda text, target: '欢迎 "朋友"' if text.startswith("Welcome") else text
    code, dst, _ = run(service, tmp_path, src)
    assert code == 0 and dst.read_bytes().startswith(b"\xff\xfe")
    assert dst.read_text(encoding="utf-16") == STRINGS.replace('Welcome \\"friend\\"', '欢迎 \\"朋友\\"')
    assert 'Welcome "friend"' in service.state.sent_texts() and "Line\nTwo" in service.state.sent_texts()


def test_stringsdict_plural_forms_only(service: ScriptedService, tmp_path: Path) -> None:
    src = tmp_path / "Localizable.stringsdict"
    src.write_text(STRINGSDICT, encoding="utf-8")
    code, dst, report = run(service, tmp_path, src)
    assert code == 0 and report["total"] == 2  # %#@files@ names a variable: nothing to translate
    files = plistlib.loads(dst.read_bytes())["files_count"]["files"]
    assert files["one"] == "[zh] %d file & folder" and files["NSStringFormatValueTypeKey"] == "d"
    assert dst.read_text().replace("[zh] ", "") == STRINGSDICT


def test_malformed_strings_name_the_line() -> None:
    with pytest.raises(FormatError) as caught:
        parse('"a" = "b";\n"c" "d";\n', "strings", Options())
    assert caught.value.line == 2 and "expected '='" in str(caught.value)
