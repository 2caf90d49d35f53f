"""Document jobs as data: their states, what a status shows, and which file names a job takes."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid

from hunyuan_serve.localization.formats import FORMATS
from hunyuan_serve.storage.jobs import Job

# DeepL's states (developers.deepl.com api-reference/document "Check document status": queued,
# translating, done, error; the deepl client's DocumentStatus.Status adds "downloaded", which our
# jobs never show: a downloaded document is gone).
QUEUED = "queued"
TRANSLATING = "translating"
DONE = "done"
ERROR = "error"
STATES = (QUEUED, TRANSLATING, DONE, ERROR)
DOCX = "docx"
# Every name ending a job takes, from the one table of formats (the client's, and .docx): an extension
# (".po"), or a whole name's end ("strings.xml", Android's resources, whose ".xml" alone says nothing).
_ENDINGS = {ending: info.name for info in FORMATS.values() for ending in info.extensions}
_ENDINGS[".docx"] = DOCX


class UploadInvalid(ValueError):
    """An upload no job is made for: the message names the problem (status: 400, 413)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def new_ids() -> tuple[str, str]:
    """A job's id and its document_key (DeepL's pair: both are needed to read the job)."""
    return uuid.uuid4().hex.upper(), secrets.token_hex(32).upper()


def key_hash(document_key: str) -> str:
    return hashlib.sha256(document_key.encode()).hexdigest()


def job_key_matches(job: Job, document_key: str | None) -> bool:
    return document_key is not None and hmac.compare_digest(job.key_hash, key_hash(document_key))


def format_of(filename: str) -> str:
    """The format the file's name selects, or a 400 naming its extension and the ones taken."""
    lower = filename.lower()
    for ending, fmt in _ENDINGS.items():
        if not ending.startswith(".") and lower.endswith(ending):
            return fmt
    dot = lower.rfind(".")
    extension = lower[dot:] if dot > 0 else ""
    if extension in _ENDINGS:
        return _ENDINGS[extension]
    taken = " ".join(sorted(_ENDINGS))
    named = f"'{extension}'" if extension else "none"
    raise UploadInvalid(400, f"File extension {named} is not supported (supported: {taken}).")


def check_upload(filename: str | None, data: bytes, limit: int) -> str:
    """The upload's format, once it has a name, is not empty and not over the limit."""
    if not filename:
        raise UploadInvalid(400, "Parameter 'file' has no file name: send it as a file part with one.")
    fmt = format_of(filename)
    if not data:
        raise UploadInvalid(400, f"The file {filename[:100]!r} is empty.")
    if len(data) > limit:
        raise UploadInvalid(413, f"The file is {len(data)} bytes; the limit is {limit} bytes.")
    return fmt


def claimable(job: Job, now: float) -> bool:
    """Queued, or translating under a lease that ran out (its replica died or hangs)."""
    return job.state == QUEUED or (job.state == TRANSLATING and job.lease_until < now)


def seconds_remaining(job: Job, now: float) -> int | None:
    """The time left at the pace so far (segments done since the job started); None before a pace."""
    if job.state != TRANSLATING or job.started is None or job.segments_total <= 0:
        return None
    done = job.segments_done
    if done <= 0:
        return None
    pace = (now - job.started) / done
    return max(1, round(pace * (job.segments_total - done)))


def status_body(job: Job, now: float) -> dict[str, object]:
    """DeepL's status answer (document_id, status, seconds_remaining while translating,
    billed_characters once done, error_message on error: the OpenAPI GetDocumentStatus200Response),
    plus the segment counts the web page draws its progress from (clients ignore fields they do not know)."""
    body: dict[str, object] = {"document_id": job.id, "status": job.state}
    remaining = seconds_remaining(job, now)
    if job.state == TRANSLATING and remaining is not None:
        body["seconds_remaining"] = remaining
    if job.state == DONE:
        body["billed_characters"] = job.billed_characters
    if job.state == ERROR:
        body["error_message"] = job.error or "unknown error"
    body["segments_total"] = job.segments_total
    body["segments_done"] = job.segments_done
    return body
