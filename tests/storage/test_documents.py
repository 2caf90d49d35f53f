"""Document jobs' pure parts: the upload's checks, the status a job shows, and the stores' leases (a
real SQLite file and a real redis-server, a fake clock): one holder at a time, a dead holder's job
retaken, one download."""

from __future__ import annotations

import codecs
import dataclasses
import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from hunyuan_serve.cache.redis_layer import RedisSettings
from hunyuan_serve.replica.documents import jobs as d
from hunyuan_serve.replica.documents.files import read
from hunyuan_serve.storage.jobs import Documents, Job
from hunyuan_serve.storage.jobs_redis import RedisDocumentJobs
from hunyuan_serve.storage.jobs_sqlite import DocumentJobs
from tests.support.redis_server import RedisServer

LEASE = 10.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["sqlite", "redis"])
def jobs(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> Iterator[Documents]:
    """The same table of cases for both stores: one host's SQLite file, and a real redis-server."""
    store: Documents
    if request.param == "sqlite":
        store = DocumentJobs(tmp_path / "store.sqlite", clock=clock)
    else:
        server: RedisServer = request.getfixturevalue("redis")
        server.command("FLUSHALL")
        store = RedisDocumentJobs(RedisSettings(server.url, "test:"), clock=clock)
    yield store
    store.close()


def job(job_id: str = "J1", owner: str = "alice", created: float = 1000.0, **changes: object) -> Job:
    base = Job(job_id, owner, d.key_hash("K"), d.QUEUED, "a.txt", "text", "en", "de", created, created)
    return dataclasses.replace(base, **changes)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("notes.txt", "text"),
        ("README.MD", "markdown"),
        ("app.po", "po"),
        ("res/values/strings.xml", "android"),
        ("letter.docx", "docx"),
        ("page.html", "html"),
        ("subs.srt", "srt"),
    ],
)
def test_a_known_extension_selects_its_format(name: str, expected: str) -> None:
    assert d.format_of(name) == expected


@pytest.mark.parametrize(
    ("name", "data", "status", "words"),
    [
        ("slides.pptx", b"x", 400, "'.pptx' is not supported"),
        ("Makefile", b"x", 400, "extension none is not supported"),
        ("empty.txt", b"", 400, "is empty"),
        ("big.txt", b"x" * 2049, 413, "2049 bytes; the limit is 2048"),
        (None, b"x", 400, "no file name"),
    ],
)
def test_a_refused_upload_says_why(name: str | None, data: bytes, status: int, words: str) -> None:
    with pytest.raises(d.UploadInvalid) as refused:
        d.check_upload(name, data, 2048)
    assert refused.value.status == status and words in refused.value.message


@pytest.mark.parametrize(
    ("state", "lease_until", "now", "expected"),
    [
        (d.QUEUED, 0.0, 5.0, True),
        (d.TRANSLATING, 10.0, 5.0, False),  # its holder is alive
        (d.TRANSLATING, 10.0, 10.5, True),  # its holder is taken for dead
        (d.DONE, 0.0, 5.0, False),
        (d.ERROR, 0.0, 5.0, False),
    ],
)
def test_which_jobs_a_worker_may_take(state: str, lease_until: float, now: float, expected: bool) -> None:
    assert d.claimable(job(state=state, lease_until=lease_until), now) is expected


@pytest.mark.parametrize(
    ("changes", "now", "expected"),
    [
        ({"state": d.TRANSLATING, "started": 100.0, "segments_total": 10, "segments_done": 2}, 110.0, 40),
        ({"state": d.TRANSLATING, "started": 100.0, "segments_total": 10, "segments_done": 0}, 110.0, None),
        ({"state": d.QUEUED}, 110.0, None),
        ({"state": d.TRANSLATING, "started": 100.0, "segments_total": 3, "segments_done": 3}, 101.0, 1),
    ],
)
def test_seconds_remaining_follows_the_pace_so_far(changes: dict, now: float, expected: int | None) -> None:
    assert d.seconds_remaining(job(**changes), now) == expected


def test_the_status_shows_what_deepl_shows_in_each_state() -> None:
    running = job(state=d.TRANSLATING, started=0.0, segments_total=4, segments_done=1)
    assert d.status_body(running, 10.0) == {
        "document_id": "J1",
        "status": "translating",
        "seconds_remaining": 30,
        "segments_total": 4,
        "segments_done": 1,
    }
    done = d.status_body(job(state=d.DONE, billed_characters=42), 10.0)
    assert done["billed_characters"] == 42 and "seconds_remaining" not in done
    assert d.status_body(job(state=d.ERROR, error="bad file"), 10.0)["error_message"] == "bad file"


def test_the_document_key_reads_the_job_and_nothing_else() -> None:
    assert d.job_key_matches(job(), "K")
    assert not d.job_key_matches(job(), "K2") and not d.job_key_matches(job(), None)


def test_one_holder_at_a_time_and_a_dead_ones_job_is_retaken(jobs: Documents, clock: Clock) -> None:
    jobs.add(job(), b"hello")
    first = jobs.claim("replica-a", LEASE, 5)
    assert first is not None and first[0].state == d.TRANSLATING and first[1] == b"hello"
    assert jobs.claim("replica-b", LEASE, 5) is None  # held
    assert jobs.progress("J1", "replica-a", LEASE, 1, 4, 0)
    clock.now += LEASE - 1
    assert jobs.claim("replica-b", LEASE, 5) is None  # renewed at +0, still held at +9
    clock.now += 2  # replica-a went quiet past its lease
    second = jobs.claim("replica-b", LEASE, 5)
    assert second is not None and second[0].attempts == 2 and second[0].segments_done == 1
    assert second[0].started == 1000.0  # the pace counts from the first start
    # replica-a comes back: nothing it writes lands any more.
    assert not jobs.progress("J1", "replica-a", LEASE, 2, 4, 0)
    assert not jobs.finish("J1", "replica-a", b"stale", 5)
    assert jobs.finish("J1", "replica-b", b"hallo", 5)
    done = jobs.get("alice", "J1")
    assert done is not None and (done.state, done.billed_characters, done.segments_done) == (d.DONE, 5, 4)


def test_a_job_that_kills_every_holder_ends_as_an_error(jobs: Documents, clock: Clock) -> None:
    jobs.add(job(), b"x")
    for _ in range(3):
        assert jobs.claim("r", LEASE, 3) is not None
        clock.now += LEASE + 1
    assert jobs.claim("r", LEASE, 3) is None
    failed = jobs.get("alice", "J1")
    assert failed is not None and failed.state == d.ERROR and "3 times" in (failed.error or "")


def test_jobs_are_taken_oldest_first_and_released_at_once(jobs: Documents) -> None:
    jobs.add(job("NEW", created=1001.0), b"n")
    jobs.add(job("OLD", created=999.0), b"o")
    taken = jobs.claim("r", LEASE, 5)
    assert taken is not None and taken[0].id == "OLD"
    assert jobs.release("OLD", "r")
    again = jobs.claim("s", LEASE, 5)
    assert again is not None and again[0].id == "OLD"  # no lease to wait out


def test_only_the_owner_reads_and_the_download_removes_it_once(jobs: Documents) -> None:
    jobs.add(job(), b"x")
    jobs.claim("r", LEASE, 5)
    assert jobs.result("alice", "J1", True) is None  # not done yet: nothing removed
    jobs.finish("J1", "r", b"result", 1)
    assert jobs.get("mallory", "J1") is None
    assert jobs.result("mallory", "J1", True) is None
    assert jobs.result("alice", "J1", False) == ("a.txt", b"result")  # LibreTranslate's: kept
    assert jobs.result("alice", "J1", True) == ("a.txt", b"result")
    assert jobs.result("alice", "J1", True) is None and jobs.get("alice", "J1") is None


def test_untouched_jobs_expire(jobs: Documents, clock: Clock) -> None:
    jobs.add(job("A"), b"x")
    clock.now += 50
    jobs.add(job("B", created=clock.now), b"y")
    assert jobs.expire(40) == 1
    assert jobs.get("alice", "A") is None and jobs.get("alice", "B") is not None


def test_a_text_file_is_read_and_written_back_in_its_encoding() -> None:
    parsed = read(codecs.BOM_UTF8 + "Hello\n\nWörld\n".encode(), "a.txt", "text", "de", "en")
    assert parsed.segments == ("Hello", "", "Wörld")  # a segment a line, as `translate` reads it
    out = parsed.render(["Hallo", "", "Welt"], frozenset())
    assert out == codecs.BOM_UTF8 + b"Hallo\n\nWelt\n"


def test_a_docx_keeps_its_paragraph_styles_and_tables() -> None:
    import docx

    word = docx.Document()
    word.add_heading("Title here", level=1)
    para = word.add_paragraph("Plain ")
    para.add_run("bold").bold = True
    word.add_paragraph("")
    word.add_table(rows=1, cols=1).cell(0, 0).text = "In a cell"
    out = io.BytesIO()
    word.save(out)
    parsed = read(out.getvalue(), "a.docx", "docx", "de", "en")
    assert parsed.segments == ("Title here", "Plain bold", "In a cell")
    back = docx.Document(io.BytesIO(parsed.render(["Titel", "Fett", "In einer Zelle"], frozenset())))
    assert [p.text for p in back.paragraphs] == ["Titel", "Fett", ""]
    assert back.paragraphs[0].style.name == "Heading 1"
    assert back.tables[0].cell(0, 0).text == "In einer Zelle"


def test_a_file_that_is_not_a_docx_is_a_format_error() -> None:
    from hunyuan_serve.localization.formats import FormatError

    with pytest.raises(FormatError, match=r"not a Word \.docx file"):
        read(b"PK\x03\x04 not really", "a.docx", "docx", "de", None)


def test_a_job_output_its_format_refuses_is_a_format_error() -> None:
    """A job's output goes through the same validator as the CLI's (msgfmt --check for gettext): a
    catalog msgfmt refuses fails the job instead of being handed back."""
    from hunyuan_serve.localization.formats import FormatError

    catalog = (
        'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        '#, python-format\nmsgid "%(n)s files"\nmsgstr ""\n'
    )
    parsed = read(catalog.encode(), "a.po", "po", "de", "en")
    assert parsed.render(["%(n)s Dateien"], frozenset()).decode().endswith('msgstr "%(n)s Dateien"\n')
    with pytest.raises(FormatError, match="msgfmt"):
        parsed.render(["%(m)s Dateien"], frozenset())
