"""Java .properties through `translate`: Spring PetClinic's messages byte-identical, escapes kept."""

from __future__ import annotations

import json
from pathlib import Path

from hunyuan_serve.client.cli import main
from hunyuan_serve.localization.formats import Options, parse
from tests.support.scripted_service import ScriptedService

PETCLINIC = Path(__file__).resolve().parents[1] / "data" / "spring-petclinic" / "messages.properties"
TRICKY = (
    "# comment\n! bang\nkey1 = Hello world\nkey2:multi \\\n    line value\nkey\\ 3 value three\r\n"
    "empty=\n  x.y=caf\\u00e9\n"
)


def run(service: ScriptedService, tmp_path: Path, src: Path) -> tuple[int, Path, dict]:
    dst, report = tmp_path / "messages_zh.properties", tmp_path / "report.json"
    flags = ["--no-cache", "--no-progress", "--report", str(report)]
    code = main(["--url", service.url, "--from", "en", "--to", "zh", str(src), "-o", str(dst), *flags])
    return code, dst, json.loads(report.read_text()) if report.exists() else {}


def load(text: str) -> dict[str, str]:
    doc = parse(text, "properties", Options())
    return dict(zip(doc.labels, doc.segments, strict=True))


def test_petclinic_through_identity_is_byte_identical(service: ScriptedService, tmp_path: Path) -> None:
    service.state.translate = lambda text, target: text
    code, dst, report = run(service, tmp_path, PETCLINIC)
    assert code == 0 and report["translated"] >= 50 and dst.read_bytes() == PETCLINIC.read_bytes()


def test_petclinic_translated_keys_kept_non_ascii_escaped(service: ScriptedService, tmp_path: Path) -> None:
    service.state.translate = lambda text, target: "欢迎" if text == "Welcome" else f"[zh] {text}"
    code, dst, _ = run(service, tmp_path, PETCLINIC)
    source, out = load(PETCLINIC.read_text()), load(dst.read_text(encoding="latin-1"))
    assert code == 0 and list(out) == list(source)
    assert dst.read_bytes().isascii()  # an ASCII file gets \\uXXXX escapes, as native2ascii writes them
    assert dst.read_text().startswith("welcome=\\u6b22\\u8fce\n") and out["welcome"] == "欢迎"


def test_continuations_escaped_keys_and_crlf() -> None:
    doc = parse(TRICKY, "properties", Options())
    assert dict(zip(doc.labels, doc.segments, strict=True)) == {
        "key1": "Hello world", "key2": "multi line value", "key 3": "value three", "x.y": "café"
    }  # fmt: skip
    out = doc.render(["Hallo Welt", "mehrere Zeilen", " drei\tvier", "café ☃"])
    assert out == (
        "# comment\n! bang\nkey1 = Hallo Welt\nkey2:mehrere Zeilen\nkey\\ 3 \\ drei\\tvier\r\nempty=\n"
        "  x.y=caf\\u00e9 \\u2603\n"
    )


def test_latin1_file_stays_latin1(service: ScriptedService, tmp_path: Path) -> None:
    src = tmp_path / "messages_de.properties"
    src.write_bytes("gruss=Grüße\nname=Name\n".encode("latin-1"))
    service.state.translate = lambda text, target: "问候" if text == "Grüße" else text
    code, dst, _ = run(service, tmp_path, src)
    assert code == 0 and dst.read_bytes() == b"gruss=\\u95ee\\u5019\nname=Name\n"
