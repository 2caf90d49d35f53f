"""One `translate` run: read and parse the input, check the service, localize, write what passes."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from hunyuan_serve.client.capabilities import (
    check_request,
    segment_contexts,
    segment_formatting,
    split_glossary,
)
from hunyuan_serve.client.output import (
    EXIT_FAILED,
    EXIT_OK,
    ProgressBar,
    print_summary,
    usage_error,
    write_output,
)
from hunyuan_serve.client.settings import ClientSettings


def load_document(args: argparse.Namespace) -> Any:
    """(document, encoding) of the input, or the usage error that names the file, line and problem."""
    from hunyuan_serve.localization.formats import FormatError, Options, read_file

    name = "<stdin>" if args.input == "-" else args.input
    if args.input != "-" and args.output != "-" and _same_file(args.input, args.output):
        return f"{name}: the output would overwrite the input; name another file"
    try:
        data = _read_stdin() if args.input == "-" else Path(args.input).read_bytes()
    except OSError as err:
        return f"cannot read {name}: {err.strerror}"
    try:
        options = Options(target=args.target, source=args.source, overwrite=args.overwrite)
        document, encoding = read_file(data, None if args.input == "-" else args.input, args.format, options)
    except FormatError as err:
        return f"{name}: {err}"
    if not encoding and args.output == "-" and sys.stdout.isatty():
        return f"{name}: the output of a {document.format} file is binary: name a file with -o"
    return document, encoding


def _read_stdin() -> bytes:
    """stdin's bytes (a text stream stood in for it, as in tests, is encoded as UTF-8)."""
    buffer = getattr(sys.stdin, "buffer", None)
    return buffer.read() if buffer is not None else sys.stdin.read().encode("utf-8")


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


async def run_translate(
    args: argparse.Namespace,
    settings: ClientSettings,
    loaded: Any,
    glossary: Any,
    options: dict[str, Any],
    memory: dict[str, str] | None = None,
) -> int:
    from hunyuan_serve.client.api import AsyncTranslateClient
    from hunyuan_serve.localization.answers import TranslateError
    from hunyuan_serve.localization.localize import localize
    from hunyuan_serve.localization.store import TranslationStore, default_cache_path

    def on_retry(attempt: int, delay: float, error: TranslateError) -> None:
        if attempt == 1 or attempt == settings.max_retries:
            print(f"{error}; retry {attempt} of {settings.max_retries} in {delay:.1f}s", file=sys.stderr)

    document, encoding = loaded
    store = None if args.no_cache else TranslationStore(args.cache or default_cache_path(os.environ))
    bar = ProgressBar(enabled=not args.no_progress)
    try:
        async with AsyncTranslateClient(settings, on_retry=on_retry) as client:
            glossary, terms = await split_glossary(client, args, glossary)
            problem = await check_request(client, args, terms)
            if problem:
                return usage_error(problem)
            contexts = await segment_contexts(client, args, document)
            texts, summary = await localize(
                document.segments,
                document.labels,
                client,
                args.target,
                args.source,
                glossary=glossary,
                terms=terms,
                store=store,
                options=options,
                context=args.context,
                contexts=contexts,
                style=args.style,
                formatted=await segment_formatting(client, document),
                qa=args.qa,
                on_total=bar.start,
                progress=bar.update,
                memory=memory,
            )
            if client.qa_refused and args.qa != "off":
                print(
                    "note: the service predates answer checks (--qa): only line counts were checked",
                    file=sys.stderr,
                )
    except TranslateError as err:
        print(f"hunyuan-serve translate: {settings.base_url}: {err}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        bar.close()
        if store is not None:
            store.close()
    return _finish(args, document, texts, summary, encoding)


def _finish(args: argparse.Namespace, document: Any, texts: list[str], summary: Any, encoding: str) -> int:
    """The output written, if it passes its format's validator (msgfmt --check for gettext), and the
    summary; an output that fails is not written, and the run fails naming why."""
    from hunyuan_serve.localization.formats import FormatError

    failed, flagged = frozenset(summary.failed_at), frozenset(f.index for f in summary.flagged)
    if args.review_machine and document.review is not None:  # only a person's is written as translated
        flagged |= frozenset(summary.machine_at)
    if document.review is None and args.flagged == "skip":
        # No review state to write them in: the flagged strings stay as the source has them.
        texts = [document.segments[i] if i in flagged else t for i, t in enumerate(texts)]
        failed, flagged = failed | flagged, frozenset()
    text = document.render(texts, failed, flagged, frozenset(summary.memory_at))
    try:
        document.check(text)
    except FormatError as err:
        name = "<stdout>" if args.output == "-" else args.output
        print(
            f"hunyuan-serve translate: {name}: not written: the output fails its check: {err}",
            file=sys.stderr,
        )
        print_summary(summary, None)
        return EXIT_FAILED
    write_output(args.output, text, encoding)
    print_summary(summary, args.report)
    if args.qa_report is not None:
        _write_qa_report(args, document, summary)
    return EXIT_FAILED if summary.failed else EXIT_OK


def _write_qa_report(args: argparse.Namespace, document: Any, summary: Any) -> None:
    from hunyuan_serve.client.qa_report import ReportContext, write_qa_report

    if document.review is not None:
        written_as = document.review_state
    elif args.flagged == "skip":
        written_as = "the source, untranslated (--flagged skip)"
    else:
        written_as = "the translation (this format has no review state)"
    name = "<stdin>" if args.input == "-" else args.input
    write_qa_report(
        args.qa_report, summary.flagged, ReportContext(name, args.source, args.target, written_as)
    )
