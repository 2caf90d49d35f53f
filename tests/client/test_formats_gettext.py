"""gettext through `translate`: Django's real catalog kept byte for byte, plurals, msgctxt, fuzzy, header."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import polib
import pytest

from hunyuan_serve.client.cli import main
from hunyuan_serve.localization.formats import FormatError, Options, parse
from tests.support import scripted_service
from tests.support.scripted_service import ScriptedService

DATA = Path(__file__).resolve().parents[1] / "data"
DJANGO_PO = DATA / "django" / "humanize-de.po"
MsgfmtCheck = Callable[[Path], None]  # the msgfmt_check fixture (conftest.py)


@pytest.fixture(autouse=True)
def _german(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stand-in service also offers German and Russian (the catalog's and a 3-plural language)."""
    extra = [{"code": "de", "name": "German"}, {"code": "ru", "name": "Russian"}]
    monkeypatch.setattr(scripted_service, "LANGUAGES", [*scripted_service.LANGUAGES, *extra])


def serve_family(monkeypatch: pytest.MonkeyPatch, family: str) -> None:
    """The stand-in's /health names a model family, as the replica's does (it decides context support)."""
    original = scripted_service._Handler.do_GET

    def do_get(self: scripted_service._Handler) -> None:
        if self.path.startswith("/health"):
            self._send(scripted_service.Reply(200, {"status": "ready", "family": family}))
        else:
            original(self)

    monkeypatch.setattr(scripted_service._Handler, "do_GET", do_get)


def identity(text: str, target: str) -> str:
    return text


def translate(service: ScriptedService, tmp_path: Path, src: Path, *args: str) -> tuple[int, Path, dict]:
    dst, report = tmp_path / f"out{src.suffix}", tmp_path / "report.json"
    flags = ["--no-cache", "--no-progress", "--report", str(report)]
    code = main(["--url", service.url, "--from", "en", *args, str(src), "-o", str(dst), *flags])
    return code, dst, json.loads(report.read_text()) if report.exists() else {}


def test_translated_catalog_comes_back_byte_identical(service: ScriptedService, tmp_path: Path) -> None:
    service.state.translate = identity
    code, dst, report = translate(service, tmp_path, DJANGO_PO, "--to", "de")
    assert code == 0 and report["total"] == 0  # every entry has a translation: kept, nothing sent
    assert dst.read_bytes() == DJANGO_PO.read_bytes()
    assert service.state.sent_texts() == []


def test_crlf_and_bom_survive(service: ScriptedService, tmp_path: Path) -> None:
    src = tmp_path / "crlf.po"
    src.write_bytes(b"\xef\xbb\xbf" + DJANGO_PO.read_bytes().replace(b"\n", b"\r\n"))
    service.state.translate = identity
    code, dst, _ = translate(service, tmp_path, src, "--to", "de")
    assert code == 0 and dst.read_bytes() == src.read_bytes()


def test_overwrite_through_identity_changes_only_msgstr(
    service: ScriptedService, tmp_path: Path, msgfmt_check: MsgfmtCheck
) -> None:
    service.state.translate = identity
    code, dst, report = translate(service, tmp_path, DJANGO_PO, "--to", "de", "--overwrite")
    assert code == 0 and report["failed"] == 0
    msgfmt_check(dst)
    before, after = polib.pofile(str(DJANGO_PO)), polib.pofile(str(dst))
    assert [(e.msgctxt, e.msgid, e.msgid_plural, e.flags, e.comment, e.tcomment) for e in after] == [
        (e.msgctxt, e.msgid, e.msgid_plural, e.flags, e.comment, e.tcomment) for e in before
    ]
    for entry in after:
        if entry.msgid_plural:
            assert entry.msgstr_plural == {0: entry.msgid, 1: entry.msgid_plural}
        else:
            assert entry.msgstr == entry.msgid
    # Outside the msgstr lines, not a byte moved.
    strip = [line for line in DJANGO_PO.read_text().splitlines() if not line.startswith("msgstr")]
    assert [line for line in dst.read_text().splitlines() if not line.startswith("msgstr")] == strip


def test_target_plurals_header_and_msgctxt_as_context(
    service: ScriptedService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, msgfmt_check: MsgfmtCheck
) -> None:
    serve_family(monkeypatch, "hy-mt1.5")  # a family with a contextual prompt
    code, dst, _ = translate(service, tmp_path, DJANGO_PO, "--to", "ru", "--overwrite")
    assert code == 0
    msgfmt_check(dst)
    po = polib.pofile(str(dst))
    assert po.metadata["Language"] == "ru"
    assert po.metadata["Plural-Forms"].startswith("nplurals=3;")
    day = po.find("%d day", msgctxt="naturaltime-past")
    assert day is not None
    assert day.msgstr_plural == {0: "[ru] %d day", 1: "[ru] %d days", 2: "[ru] %d days"}
    contexts = {(t, body.get("context")) for body in service.state.requests for t in body.get("texts", [])}
    assert ("%(delta)s ago", "naturaltime") in contexts
    assert ("now", None) in contexts


def test_format_entry_with_broken_placeholder_left_untranslated_and_fuzzy(
    service: ScriptedService, tmp_path: Path, msgfmt_check: MsgfmtCheck
) -> None:
    src = tmp_path / "django.pot"
    src.write_text(
        '#, fuzzy\nmsgid ""\nmsgstr ""\n"Language: \\n"\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        '#: a.py:1\n#, python-format\nmsgid "%(count)s files"\nmsgstr ""\n\n'
        '#: a.py:2\nmsgid "Open"\nmsgstr ""\n\n'
        'msgid "Saved"\nmsgstr "Gespeichert"\n',
        encoding="utf-8",
    )
    service.state.translate = lambda text, target: text.replace("%(count)s", "(count)")
    code, dst, report = translate(service, tmp_path, src, "--to", "de")
    assert code == 1 and report["failed"] == 1 and report["failures"][0]["label"] == "line 9"
    msgfmt_check(dst)
    po = polib.pofile(str(dst))
    files = po.find("%(count)s files")
    assert files is not None and files.msgstr == "" and files.flags == ["python-format", "fuzzy"]
    assert po.find("Open").msgstr == "Open"
    assert po.find("Saved").msgstr == "Gespeichert"  # kept: already translated
    assert po.metadata["Language"] == "de" and "Plural-Forms" in po.metadata


def test_a_rerun_on_its_own_output_sets_fuzzy_once(
    service: ScriptedService, tmp_path: Path, msgfmt_check: MsgfmtCheck
) -> None:
    """The entry left fuzzy by the first run is sent again by the second and fails again: one flag."""
    src = tmp_path / "first.po"
    src.write_text(
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        '#: a.py:1\n#, python-format\nmsgid "%(count)s files"\nmsgstr ""\n',
        encoding="utf-8",
    )
    service.state.translate = lambda text, target: text.replace("%(count)s", "(count)")
    outputs = [src]
    for run in ("second.po", "third.po"):
        dst = tmp_path / run
        flags = ["--no-cache", "--no-progress"]
        assert main(["--url", service.url, "--to", "de", str(outputs[-1]), "-o", str(dst), *flags]) == 1
        outputs.append(dst)
    for dst in outputs[1:]:
        msgfmt_check(dst)
        assert "#, python-format, fuzzy\n" in dst.read_text(encoding="utf-8")
        entry = polib.pofile(str(dst)).find("%(count)s files")
        assert entry is not None and entry.flags == ["python-format", "fuzzy"]
    assert len(service.state.sent_texts()) == 2  # the second run did send the fuzzy entry again


def test_malformed_catalog_names_file_and_line_and_writes_nothing(
    service: ScriptedService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "bad.po"
    src.write_text('msgid "a"\nmsgstr "b"\nnonsense here\n', encoding="utf-8")
    dst = tmp_path / "out.po"
    dst.write_text("keep me", encoding="utf-8")
    code = main(["--url", service.url, "--to", "de", str(src), "-o", str(dst), "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2 and f"{src}: line 3: " in err and "Syntax error" in err
    assert dst.read_text(encoding="utf-8") == "keep me" and service.state.requests == []


HEADER = 'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'


@pytest.mark.parametrize(
    ("body", "line", "problem"),
    [
        ('msgid "a"\nmsgstr "b\n\nmsgid "c"\nmsgstr ""\n', 6, "end-of-line within string"),
        ('msgid "a"\nmsgstr ""\n\nmsgid "a"\nmsgstr "b"\n', 8, 'duplicate message: msgid "a" defined twice'),
        (
            'msgctxt "menu"\nmsgid "Open"\nmsgstr ""\n\nmsgctxt "menu"\nmsgid "Open"\nmsgstr ""\n',
            9,
            'duplicate message: msgid "Open" with msgctxt "menu" defined twice (first at line 5)',
        ),
    ],
    ids=["unterminated", "duplicate", "duplicate-in-context"],
)
def test_what_msgfmt_refuses_is_refused_naming_file_line_and_problem(
    service: ScriptedService,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    body: str,
    line: int,
    problem: str,
) -> None:
    src = tmp_path / "bad.po"
    src.write_text(HEADER + body, encoding="utf-8")
    assert subprocess.run(["msgfmt", "--check", "-o", os.devnull, str(src)], capture_output=True).returncode
    kept, new = tmp_path / "kept.po", tmp_path / "new.po"
    kept.write_text("keep me", encoding="utf-8")
    for dst in (kept, new):
        code = main(["--url", service.url, "--to", "de", str(src), "-o", str(dst), "--no-cache"])
        assert code == 2 and f"{src}: line {line}: {problem}" in capsys.readouterr().err
    assert kept.read_text(encoding="utf-8") == "keep me" and not new.exists()
    assert service.state.requests == [] and sorted(tmp_path.iterdir()) == [src, kept]


# The PO grammar as msgfmt holds it: (catalog body, whether msgfmt --check takes it, whether the reader does).
GRAMMAR = [
    ('msgid "a"\n\nmsgstr "b"\n', True, True),  # line ends only separate tokens
    ('msgid "a"\nmsgstr "b\\\n"\n', True, True),  # a backslash continues a string on the next line
    ('msgid "\\x41\\101\\t\\"\\\\"\nmsgstr "\\x41\\101\\t\\"\\\\"\n', True, True),
    ('msgctxt ""\nmsgid "a"\nmsgstr ""\n\nmsgid "a"\nmsgstr ""\n', True, True),  # an empty context is one
    ('msgctxt "x"\nmsgid "a"\nmsgstr ""\n\nmsgctxt "y"\nmsgid "a"\nmsgstr ""\n', True, True),
    ('#| msgid "old"\nmsgid "a"\nmsgstr ""\n\n#~| msgid "o"\n#~ msgid "b"\n#~ msgstr "c"\n', True, True),
    # polib refuses two strings on one line and a comment after a string, which msgfmt takes: the
    # reader refuses them too (with the line), stricter than msgfmt but never laxer.
    ('msgid "a"\nmsgstr "b" "c"\n', True, False),
    ('msgid "a"\nmsgstr "b" # a comment\n', True, False),
    ('msgid "a"\nmsgstr "b\n', False, False),
    ('msgid "a"\nmsgstr ""\n"b\n', False, False),
    ('msgid "a\\q"\nmsgstr ""\n', False, False),
    ('msgid "a\\?"\nmsgstr ""\n', False, False),
    ('msgid "a"\nmsgstr "b"\nmsgstr "c"\n', False, False),
    ('msgid "a"\n', False, False),
    ('msgid "a"\n# between\nmsgstr "b"\n', False, False),
    ('msgid "a"\nmsgstr "b"junk\n', False, False),
    ('msgctxt "c"\nmsgstr "b"\n', False, False),
    ('msgid "a"\nmsgstr[0] "b"\n', False, False),
    ('msgid "a"\nmsgid_plural "as"\nmsgstr "b"\n', False, False),
    ('msgid "a"\nmsgid_plural "as"\nmsgstr[1] "b"\n', False, False),
    ('msgid "a"\nmsgid_plural "as"\nmsgstr[0] "b"\nmsgstr[2] "c"\n', False, False),
    ('#~ msgid "a"\nmsgstr "b"\n', False, False),
    ('#~ msgid "a"\n#~ msgstr "b"\n\nmsgid "a"\nmsgstr ""\n', False, False),  # obsolete or not, twice
]


@pytest.mark.parametrize(
    ("body", "msgfmt_takes", "valid"), GRAMMAR, ids=[str(i) for i in range(len(GRAMMAR))]
)
def test_the_reader_refuses_what_msgfmt_refuses(
    tmp_path: Path, body: str, msgfmt_takes: bool, valid: bool
) -> None:
    src = tmp_path / "grammar.po"
    src.write_text(HEADER + body, encoding="utf-8")
    done = subprocess.run(["msgfmt", "--check", "-o", os.devnull, str(src)], capture_output=True)
    assert (done.returncode == 0) == msgfmt_takes, done.stderr  # the table is msgfmt's verdict
    assert msgfmt_takes or not valid
    if valid:
        parse(HEADER + body, "po", Options(target="de"))
    else:
        with pytest.raises(FormatError) as caught:
            parse(HEADER + body, "po", Options(target="de"))
        assert caught.value.line is not None and caught.value.line > 4


def test_a_catalog_without_a_header_gets_one_and_keeps_the_rest(
    service: ScriptedService, tmp_path: Path, catalogs_checked: list[Path]
) -> None:
    """msgfmt --check refuses a catalog without a header: the output has one for the target."""
    src = tmp_path / "bare.po"
    body = (
        '# file comment\nmsgid "Open"\nmsgstr ""\n\nmsgid "%d file"\nmsgid_plural "%d files"\nmsgstr[0] ""\n'
    )
    src.write_text(body, encoding="utf-8")
    service.state.translate = identity
    code, dst, _ = translate(service, tmp_path, src, "--to", "ru")
    assert code == 0 and catalogs_checked == [dst]  # msgfmt --check passed it as it was written
    header, rest = dst.read_text(encoding="utf-8").split("\n\n", 1)
    assert rest == body.replace(
        'msgstr[0] ""', 'msgstr[0] "%d file"\nmsgstr[1] "%d files"\nmsgstr[2] "%d files"'
    ).replace('msgid "Open"\nmsgstr ""', 'msgid "Open"\nmsgstr "Open"')
    po = polib.pofile(str(dst))
    assert po.metadata["Language"] == "ru" and po.metadata["Plural-Forms"].startswith("nplurals=3;")
    assert "charset=UTF-8" in po.metadata["Content-Type"] and header.startswith('msgid ""\nmsgstr ""')


def test_an_output_msgfmt_refuses_is_not_written_and_the_run_fails(
    service: ScriptedService, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A kept translation whose placeholders differ from its msgid's is the grammar's to take and
    msgfmt --check's to refuse: nothing is written and the run fails naming msgfmt's problem."""
    src = tmp_path / "kept.po"
    src.write_text(
        HEADER + '#, python-format\nmsgid "%(n)s files"\nmsgstr "%(m)s Dateien"\n\nmsgid "Open"\nmsgstr ""\n',
        encoding="utf-8",
    )
    dst = tmp_path / "out.po"
    code = main(["--url", service.url, "--to", "de", str(src), "-o", str(dst), "--no-cache", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and not dst.exists() and len(service.state.requests) == 1
    assert f"{dst}: not written: the output fails its check: line " in err and "(msgfmt --check)" in err


def test_the_msgfmt_check_fails_on_what_msgfmt_refuses(tmp_path: Path, msgfmt_check: MsgfmtCheck) -> None:
    """The check every written catalog goes through can fail: the output the issue found (two msgstr)."""
    broken = tmp_path / "broken.po"
    broken.write_text(HEADER + 'msgid "a"\nmsgstr "[de] a"\nmsgstr "b\n', encoding="utf-8")
    with pytest.raises(AssertionError, match="msgfmt --check"):
        msgfmt_check(broken)


def test_parse_error_carries_the_line() -> None:
    with pytest.raises(FormatError) as caught:
        parse('msgid "a"\nmsgstr "b"\n\nmsgid "c"\nbad\n', "po", Options(target="de"))
    assert caught.value.line == 5


def test_copy_of_the_real_catalog_is_unchanged_by_a_run(service: ScriptedService, tmp_path: Path) -> None:
    src = tmp_path / "de.po"
    shutil.copy(DJANGO_PO, src)
    translate(service, tmp_path, src, "--to", "ru", "--overwrite")
    assert src.read_bytes() == DJANGO_PO.read_bytes()


def test_translation_with_control_characters_is_refused(
    service: ScriptedService, tmp_path: Path, msgfmt_check: MsgfmtCheck
) -> None:
    """The tiny model once returned U+0004, gettext's context separator: msgfmt rejected the file."""
    service.state.translate = lambda text, target: "x\x04" + text if text == "now" else text
    code, dst, report = translate(service, tmp_path, DJANGO_PO, "--to", "de", "--overwrite")
    assert (
        code == 1
        and report["failed"] == 1
        and report["failures"][0]["problem"] == "control characters U+0004"
    )
    msgfmt_check(dst)
    assert polib.pofile(str(dst)).find("now").msgstr == "jetzt"


def test_msgctxt_not_sent_to_a_model_without_context(
    service: ScriptedService,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    serve_family(monkeypatch, "hunyuan-mt")  # no contextual prompt: it would refuse every msgctxt entry
    code, _, report = translate(service, tmp_path, DJANGO_PO, "--to", "ru", "--overwrite")
    assert code == 0 and report["failed"] == 0
    assert not any("context" in body for body in service.state.requests)
    assert "msgctxt is not sent" in capsys.readouterr().err
