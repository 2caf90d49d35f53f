"""Documents as jobs against the real stack (`up`: Nginx + vLLM replicas on a tiny hy-mt1.5 checkpoint,
the keyed shared stack of tests/support/shared_stack.py) with two keys of its keys file: the deepl
client's translate_document_from_filepath end to end (the other key cannot read the job),
LibreTranslate's /translate_file in its documented HTTP shape, the page's drop-a-file flow in headless
chromium, and the refusals (nothing stored for any of them)."""

from __future__ import annotations

import io
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import deepl
import httpx
import pytest

from tests.support.shared_stack import DOCUMENT_MAX_BYTES, KEYS, SharedStack

pytestmark = [pytest.mark.engine, pytest.mark.nginx]

OWNER = KEYS["documents-owner"].secret
OTHER = KEYS["documents-other"].secret  # its quota (20 characters) is what a document is checked against
LINES = ["Hello world.", "", "The printer is out of paper.", "Good morning."]
MAX_DOCUMENT_BYTES = DOCUMENT_MAX_BYTES


@dataclass
class Stack:
    url: str
    run: Path

    def client(self, key: str) -> deepl.Translator:
        return deepl.Translator(key, server_url=self.url, send_platform_info=False)

    def http(self, key: str | None) -> httpx.Client:
        headers = {"Authorization": f"DeepL-Auth-Key {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, trust_env=False, timeout=120)

    def job_count(self) -> int:
        path = self.run / "store.sqlite"
        if not path.exists():
            return 0
        with sqlite3.connect(path) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
            return db.execute("SELECT COUNT(*) FROM documents").fetchone()[0] if "documents" in tables else 0


@pytest.fixture(scope="module")
def stack(keyed_stack: SharedStack) -> Stack:
    return Stack(keyed_stack.url, keyed_stack.run_dir)


def test_the_deepl_client_translates_a_file_and_only_its_key_reads_the_job(
    stack: Stack, tmp_path: Path
) -> None:
    source = tmp_path / "notes.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    out = tmp_path / "notes.de.txt"
    status = stack.client(OWNER).translate_document_from_filepath(source, out, target_lang="DE")
    assert status.done and status.billed_characters == sum(len(line) for line in LINES)
    translated = out.read_text(encoding="utf-8").split("\n")
    assert len(translated) == len(LINES) + 1 and translated[1] == "" and translated[-1] == ""
    assert all(line.strip() for i, line in enumerate(translated[:-1]) if LINES[i])
    # The other key: the job is not found, its status neither, and it cannot download it.
    owner = stack.client(OWNER)
    handle = owner.translate_document_upload(b"Good night.\n", target_lang="DE", filename="a.txt")
    other = stack.client(OTHER)
    with pytest.raises(deepl.DeepLException, match="Document not found") as refused:
        other.translate_document_get_status(handle)
    assert refused.value.http_status_code == 404
    with pytest.raises(deepl.DeepLException) as not_theirs:
        other.translate_document_download(handle)
    assert not_theirs.value.http_status_code == 404
    assert owner.translate_document_wait_until_done(handle).done
    result = io.BytesIO()
    owner.translate_document_download(handle, result)
    assert result.getvalue().endswith(b"\n") and result.getvalue().strip()
    # One download: then the document is gone, as at DeepL.
    with pytest.raises(deepl.DeepLException) as gone:
        owner.translate_document_download(handle, io.BytesIO())
    assert gone.value.http_status_code == 404


def test_a_docx_comes_back_as_a_docx_with_its_structure(stack: Stack, tmp_path: Path) -> None:
    import docx

    word = docx.Document()
    word.add_heading("Quarterly report", level=1)
    word.add_paragraph("Sales went up.")
    source = tmp_path / "report.docx"
    word.save(source)
    out = tmp_path / "report.de.docx"
    stack.client(OWNER).translate_document_from_filepath(source, out, source_lang="EN", target_lang="DE")
    back = docx.Document(out)
    assert len(back.paragraphs) == 2 and back.paragraphs[0].style.name == "Heading 1"
    assert all(p.text.strip() for p in back.paragraphs)


def test_libretranslate_translate_file_in_its_documented_shape(stack: Stack) -> None:
    form = {"source": "en", "target": "de", "api_key": OWNER}
    files = {"file": ("notes.md", b"# Title\n\nSome prose here.\n", "text/markdown")}
    with httpx.Client(base_url=stack.url, trust_env=False, timeout=300) as client:
        answer = client.post("/libretranslate/translate_file", data=form, files=files)
        assert answer.status_code == 200, answer.text
        url = answer.json()["translatedFileUrl"]
        assert url.startswith(stack.url + "/libretranslate/download_file/") and url.endswith(".notes.md")
        assert client.get(url).status_code == 403  # no key: LibreTranslate's refusal
        assert client.get(url, params={"api_key": OTHER}).status_code == 404  # not the other key's
        got = client.get(url, params={"api_key": OWNER})
    assert got.status_code == 200 and got.content.startswith(b"# ")
    assert "attachment" in got.headers["content-disposition"]


def _post_raw(stack: Stack, path: str, body: bytes, content_type: str, key: str = OWNER) -> httpx.Response:
    with stack.http(key) as client:
        return client.post(path, content=body, headers={"Content-Type": content_type})


def _form(name: str, data: bytes, fields: dict[str, str]) -> tuple[bytes, str]:
    request = httpx.Request("POST", "http://x/", data=fields, files={"file": (name, data)})
    return request.read(), request.headers["content-type"]


@pytest.mark.parametrize(
    ("path", "fields"),
    [
        ("/v2/document", {"target_lang": "DE"}),
        ("/libretranslate/translate_file", {"source": "en", "target": "de"}),
    ],
)
def test_refused_uploads_are_clear_and_store_nothing(stack: Stack, path: str, fields: dict[str, str]) -> None:
    libre = path.startswith("/libre")
    message = "error" if libre else "message"
    before = stack.job_count()
    cases: list[tuple[bytes, str, int, str]] = [
        (*_form("slides.pptx", b"x", fields), 400, "'.pptx' is not supported"),
        (*_form("empty.txt", b"", fields), 400, "is empty"),
        (*_form("broken.docx", b"PK\x03\x04 no zip", fields), 400, "cannot be read as docx"),
        (*_form("bad.json", b"[1, 2", fields), 400, "cannot be read as json"),
        (*_form("big.txt", b"x" * (MAX_DOCUMENT_BYTES + 1), fields), 413, f"limit is {MAX_DOCUMENT_BYTES}"),
        (b"--nope\r\nnot a form", "multipart/form-data; boundary=zzz", 400, "malformed"),
        (b'{"target_lang": "DE"}', "application/json", 400, "multipart/form-data"),
    ]
    for body, kind, status, words in cases:
        answer = _post_raw(stack, path, body, kind)
        assert answer.status_code == status, (words, answer.text)
        assert words in answer.json()[message], answer.text
    # 50 MB: Nginx refuses it at the edge (client_max_body_size) in the API's own shape.
    body, kind = _form("huge.txt", b"x" * (50 * 1024 * 1024), fields)
    answer = _post_raw(stack, path, body, kind)
    assert answer.status_code == 413 and message in answer.json()
    assert stack.job_count() == before


def test_a_document_over_the_keys_quota_is_refused_at_upload(stack: Stack) -> None:
    before = stack.job_count()
    text = b"This sentence alone is longer than the quota.\n"
    with pytest.raises(deepl.QuotaExceededException):
        stack.client(OTHER).translate_document_upload(text, target_lang="DE", filename="q.txt")
    form = {"source": "en", "target": "de", "api_key": OTHER}
    with httpx.Client(base_url=stack.url, trust_env=False, timeout=60) as client:
        answer = client.post("/libretranslate/translate_file", data=form, files={"file": ("q.txt", text)})
    assert answer.status_code == 403 and "Quota exceeded" in answer.json()["error"]
    assert stack.job_count() == before


def test_the_page_translates_a_dropped_file_with_progress_and_a_download(
    stack: Stack, browser: Any, tmp_path: Path
) -> None:
    source = tmp_path / "page.txt"
    source.write_text("Hello.\nGoodbye.\n", encoding="utf-8")
    context = browser.new_context(accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(120_000)
    try:
        page.goto(f"{stack.url}/?token={OWNER}")
        page.wait_for_function("document.querySelectorAll('#target option').length > 0")
        page.select_option("#source", "en")
        page.select_option("#target", "de")
        page.set_input_files("#file", str(source))
        page.wait_for_selector("#doc-download:not([hidden])")
        assert page.text_content("#doc-status") == f"Done: {len('Hello.Goodbye.')} characters translated."
        assert page.get_attribute("#doc-progress", "value") == page.get_attribute("#doc-progress", "max")
        with page.expect_download() as download:
            page.click("#doc-download")
        saved = tmp_path / "saved.txt"
        download.value.save_as(saved)
        assert download.value.suggested_filename == "page.txt"
        assert len(saved.read_text(encoding="utf-8").split("\n")) == 3
        page.set_input_files("#file", {"name": "deck.pptx", "mimeType": "text/plain", "buffer": b"x"})
        page.wait_for_selector("#doc-error:not([hidden])")
        assert "'.pptx' is not supported" in page.text_content("#doc-error")
    finally:
        context.close()
