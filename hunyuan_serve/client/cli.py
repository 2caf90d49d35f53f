"""`hunyuan-serve translate`: its flags, its settings, and its entry (the run under Ctrl-C)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import textwrap
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

from hunyuan_serve.client.output import EXIT_INTERRUPTED, usage_error
from hunyuan_serve.client.run import load_document, run_translate
from hunyuan_serve.client.settings import DEFAULT_URL, ClientSettings, api_key_from

# Settings with a flag of their own elsewhere on this command.
_OWN_FLAGS = {"base_url"}
_SAMPLING = ("max_tokens", "temperature", "top_p", "top_k", "repetition_penalty")


def add_parser(subparsers: Any) -> None:
    from hunyuan_serve.localization.formats import describe_formats

    parser = subparsers.add_parser(
        "translate",
        help="Translate a localization file or document through the service.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="formats (--format, or from the extension):\n" + describe_formats(),
        description=textwrap.fill(
            "Translate INPUT ('-' for stdin) in one of the formats listed below: only the translatable "
            "text changes, everything else is written back as it was. The input file is never modified; "
            "a malformed one is reported with its line and nothing is written. Placeholders must survive; "
            "segments whose placeholders come back changed are reported and left untranslated. "
            "A service that does not take --context or --style (its model has no such prompt) says so "
            "before any segment is sent. Exit 0 when every segment was translated, cached or skipped, "
            "1 when some failed (output still written) or the output failed its format's check "
            "(msgfmt --check for gettext; nothing written), "
            "2 on bad usage, 130 when interrupted.",
            width=100,
        ),
    )
    parser.add_argument("input", metavar="INPUT", help="File to translate, or '-' for stdin.")
    parser.add_argument("-o", "--output", default="-", help="Where to write the result ('-': stdout).")
    parser.add_argument("--to", dest="target", required=True, help="Target language code, e.g. zh.")
    parser.add_argument("--from", dest="source", default="en", help="Source language code (default en).")
    parser.add_argument("--url", default=DEFAULT_URL, help=f"Service URL (default {DEFAULT_URL}).")
    _add_format_arguments(parser)
    _add_term_arguments(parser)
    parser.add_argument(
        "--context",
        metavar="TEXT",
        help="Text that comes before the input (what the page or app is about), sent with every segment "
        "for the model's contextual-translation prompt.",
    )
    parser.add_argument(
        "--style",
        metavar="TEXT",
        help="Style the translation should take (e.g. 'formal'), for models with a style prompt (Hy-MT2).",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        help="SQLite cache file (default under ~/.cache/hunyuan-serve), kept per model, sampling options, "
        "context and style.",
    )
    parser.add_argument("--no-cache", action="store_true", help="Neither read nor write the cache.")
    parser.add_argument("--no-progress", action="store_true", help="No progress bar.")
    parser.add_argument(
        "--report",
        type=Path,
        help="Write the summary, every failure and every flagged translation (with its reasons) as JSON "
        "here.",
    )
    _add_qa_arguments(parser)
    _add_option_groups(parser)
    parser.set_defaults(func=run)


def _add_format_arguments(parser: argparse.ArgumentParser) -> None:
    from hunyuan_serve.localization.formats import FORMATS

    parser.add_argument(
        "--format",
        choices=("auto", *FORMATS),
        default="auto",
        help="Input format (default: from the extension).",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="Translate entries that already have a translation (gettext).",
    )


def _add_qa_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("answer checks (the service's QA)")
    # retry by default: a file is bulk work, where a second try costs seconds the team does not wait
    # on, and only for the strings that failed a check; each it fixes is one fewer string to review.
    group.add_argument(
        "--qa",
        choices=("off", "flag", "retry"),
        default="retry",
        help="What the service does with a translation that fails its checks: retry (default: generate "
        "it once more, keep the better answer), flag (return it with the checks it failed), off (no "
        "checks). A flagged translation is written in the file's review state (gettext '#, fuzzy', "
        "XLIFF 1.2 needs-review-translation, XLIFF 2.0 initial, String Catalog needs_review), listed in "
        "--report and --qa-report, and never cached.",
    )
    group.add_argument(
        "--flagged",
        choices=("keep", "skip"),
        default="keep",
        help="In a format without a review state: keep (default: write the flagged translation and "
        "list it) or skip (leave the string untranslated, and list it).",
    )
    group.add_argument(
        "--review-machine",
        action="store_true",
        help="Write every model translation in the file's review state (gettext '#, fuzzy', XLIFF "
        "needs-review, a catalog's needs_review), so that only a translation memory's (a person's) is "
        "written as translated. Formats without a review state are written as without it.",
    )
    group.add_argument(
        "--qa-report",
        type=Path,
        metavar="FILE",
        help="Write every flagged translation with its reasons for a reviewer: FILE.csv or FILE.html.",
    )


def _add_option_groups(parser: argparse.ArgumentParser) -> None:
    """The sampling flags, and one flag per ClientSettings field (the settings are the one source)."""
    sampling = parser.add_argument_group("sampling (default: the service's)")
    for name in _SAMPLING:
        kind = int if name in ("max_tokens", "top_k") else float
        sampling.add_argument("--" + name.replace("_", "-"), dest=f"sampling.{name}", type=kind)
    group = parser.add_argument_group("client options")
    for name, info in ClientSettings.model_fields.items():
        if name in _OWN_FLAGS:
            continue
        kwargs: dict[str, Any] = {"dest": f"client.{name}", "default": argparse.SUPPRESS}
        if name == "retry_statuses":
            kwargs["type"] = _int_list
        group.add_argument(
            "--" + name.replace("_", "-"), help=f"{info.description} (default {info.default})", **kwargs
        )


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def settings_from_args(args: argparse.Namespace, environ: Mapping[str, str]) -> ClientSettings:
    """ClientSettings from --url and the client option flags given (pydantic checks and coerces).

    The API key may come from the environment instead: a flag's value is in `ps` for every user to read.
    """
    from pydantic import ValidationError

    from hunyuan_serve.config import ConfigError

    values = {key.split(".", 1)[1]: value for key, value in vars(args).items() if key.startswith("client.")}
    values["base_url"] = args.url
    if "api_key" not in values and (key := api_key_from(environ)) is not None:
        values["api_key"] = key
    try:
        return ClientSettings.model_validate(values)
    except ValidationError as err:
        # The flag's name as typed; the message as pydantic wrote it (a path in it keeps its '_').
        problems = "; ".join(
            f"--{'-'.join(map(str, e['loc'])).replace('_', '-')}: {e['msg']}" for e in err.errors()
        )
        raise ConfigError(f"invalid client option: {problems}") from None


def _add_term_arguments(parser: argparse.ArgumentParser) -> None:
    """What the run knows of the project's words: a glossary, words to keep, a translation memory."""
    parser.add_argument(
        "--glossary", type=Path, help="Glossary: JSON object or 'term<TAB>translation' lines."
    )
    parser.add_argument("--keep", type=Path, help="Do-not-translate list: one term a line.")
    parser.add_argument(
        "--memory",
        type=Path,
        help="Translation memory (TMX 1.4b, or CSV/TSV of source,target[,source_lang,target_lang]): a "
        "segment whose exact source it holds takes its translation, without a request.",
    )
    parser.add_argument(
        "--memory-keep-blank",
        action="store_true",
        help="--memory's units whose target is empty are translations that leave the text out (as "
        "`memory import --keep-blank`; default: left out, as not translated yet).",
    )


def run(args: argparse.Namespace) -> int:
    from hunyuan_serve.client.memory_file import MemoryFileInvalid, load_memory
    from hunyuan_serve.client.qa_report import KINDS, report_kind
    from hunyuan_serve.config import ConfigError
    from hunyuan_serve.localization.glossary import GlossaryError, load_glossary

    try:
        settings = settings_from_args(args, os.environ)
    except ConfigError as err:
        return usage_error(str(err))
    if args.qa_report is not None and report_kind(args.qa_report) is None:
        return usage_error(f"--qa-report {args.qa_report}: name a {' or '.join(KINDS)} file")
    loaded = load_document(args)
    if isinstance(loaded, str):
        return usage_error(loaded)
    try:
        glossary = load_glossary(args.glossary, args.keep)
        memory = (
            load_memory(args.memory, args.source, args.target, args.memory_keep_blank)
            if args.memory
            else None
        )
    except (GlossaryError, MemoryFileInvalid, OSError) as err:
        return usage_error(
            f"--memory {args.memory}: {err}" if isinstance(err, MemoryFileInvalid) else str(err)
        )
    options = {key.split(".", 1)[1]: v for key, v in vars(args).items() if key.startswith("sampling.")}
    try:
        work = run_translate(args, settings, loaded, glossary, options, memory)
        return asyncio.run(_until_interrupted(work))
    except KeyboardInterrupt:
        print(
            "\ninterrupted: finished batches are cached; run the same command again to resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED


async def _until_interrupted(work: Coroutine[Any, Any, int], retry_s: float = 0.1) -> int:
    """work's exit code, or KeyboardInterrupt at the first Ctrl-C with work cancelled.

    asyncio.run's own Ctrl-C only cancels the main task once, and a cancellation that lands while an
    inner await completes can be lost (then the run went on to the end and exited 0, output written);
    here the interrupt is our own event, and the cancel is repeated until the work has stopped.
    """
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(work)
    interrupted = asyncio.Event()
    try:
        loop.add_signal_handler(signal.SIGINT, interrupted.set)
    except (NotImplementedError, RuntimeError, ValueError):  # no signals here, or not the main thread
        return await task
    waiter = asyncio.ensure_future(interrupted.wait())
    try:
        await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
        if not interrupted.is_set():
            return task.result()
        while not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=retry_s)
    finally:
        loop.remove_signal_handler(signal.SIGINT)
        waiter.cancel()
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Entry for `python -m hunyuan_serve.client.cli` (same as `hunyuan-serve translate`)."""
    parser = argparse.ArgumentParser(prog="hunyuan-serve")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["translate", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
