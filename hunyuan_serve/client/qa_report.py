"""`translate --qa-report FILE`: every flagged translation with its reasons, as CSV or an HTML page."""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hunyuan_serve.client.files import write_atomic
from hunyuan_serve.localization.summary import Flagged

KINDS = {".csv": "csv", ".html": "html", ".htm": "html"}
COLUMNS = ("label", "checks", "reason", "source", "translation", "written as")


@dataclass(frozen=True)
class ReportContext:
    """What the page says around the rows: the file, the languages, and what became of a flagged string."""

    input: str
    source: str | None
    target: str
    written_as: str  # e.g. "#, fuzzy", or "the source (--flagged skip)"


def report_kind(path: Path) -> str | None:
    """csv or html, from the file's extension; None for any other."""
    return KINDS.get(path.suffix.lower())


def write_qa_report(path: Path, flagged: Sequence[Flagged], context: ReportContext) -> None:
    kind = report_kind(path)
    text = _csv(flagged, context) if kind == "csv" else _html(flagged, context)
    write_atomic(path, text.encode("utf-8"))


def _row(item: Flagged, context: ReportContext) -> tuple[str, ...]:
    checks = " ".join(flag.check for flag in item.checks)
    return (item.label, checks, item.reason(), item.source, item.translation, context.written_as)


def _csv(flagged: Sequence[Flagged], context: ReportContext) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    writer.writerows(_row(item, context) for item in flagged)
    return out.getvalue()


_STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse;width:100%}"
    "th,td{border:1px solid #ccc;padding:.4em .6em;vertical-align:top;text-align:left}"
    "th{background:#f4f4f4}td.text{white-space:pre-wrap}code{background:#f4f4f4;padding:0 .2em}"
)


def _html(flagged: Sequence[Flagged], context: ReportContext) -> str:
    """A page a reviewer can open: a table of the flagged strings, every value escaped."""
    esc = html.escape
    source_lang = f' lang="{esc(context.source)}"' if context.source else ""
    target_lang = f' lang="{esc(context.target)}"'
    rows = []
    for item in flagged:
        reasons = "".join(
            f"<li><code>{esc(flag.check)}</code>{': ' + esc(flag.detail) if flag.detail else ''}</li>"
            for flag in item.checks
        )
        rows.append(
            f"<tr><td>{esc(item.label)}</td><td><ul>{reasons}</ul></td>"
            f'<td class="text"{source_lang}>{esc(item.source)}</td>'
            f'<td class="text"{target_lang}>{esc(item.translation)}</td></tr>'
        )
    title = f"Flagged translations: {esc(context.input)}"
    summary = (
        f"{len(flagged)} translation{'s' if len(flagged) != 1 else ''} into {esc(context.target)} "
        f"failed the service's checks; written as {esc(context.written_as)}."
    )
    body = (
        "<table><thead><tr><th>Where</th><th>Why</th><th>Source</th><th>Translation</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        if rows
        else "<p>Nothing was flagged.</p>"
    )
    return (
        f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{title}</title>\n'
        f"<style>{_STYLE}</style>\n</head>\n<body>\n<h1>{title}</h1>\n<p>{summary}</p>\n{body}\n"
        "</body>\n</html>\n"
    )
