"""`hunyuan-serve translate`: localize a file (text, JSON, gettext, subtitles, Markdown) via the service."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import textwrap
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

from hunyuan_serve.client.files import write_atomic
from hunyuan_serve.client.settings import DEFAULT_URL, ClientSettings, api_key_from

# Settings with a flag of their own elsewhere on this command.
_OWN_FLAGS = {"base_url"}
_SAMPLING = ("max_tokens", "temperature", "top_p", "top_k", "repetition_penalty")
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def add_parser(subparsers: Any) -> None:
    from hunyuan_serve.client.formats import describe_formats

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
    parser.add_argument(
        "--glossary", type=Path, help="Glossary: JSON object or 'term<TAB>translation' lines."
    )
    parser.add_argument("--keep", type=Path, help="Do-not-translate list: one term a line.")
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
    parser.add_argument("--report", type=Path, help="Write the summary and every failure as JSON here.")
    _add_option_groups(parser)
    parser.set_defaults(func=run)


def _add_format_arguments(parser: argparse.ArgumentParser) -> None:
    from hunyuan_serve.client.formats import FORMATS

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
        problems = "; ".join(f"--{'-'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors())
        raise ConfigError(f"invalid client option: {problems}".replace("_", "-")) from None


def run(args: argparse.Namespace) -> int:
    from hunyuan_serve.client.glossary import GlossaryError, load_glossary
    from hunyuan_serve.config import ConfigError

    try:
        settings = settings_from_args(args, os.environ)
    except ConfigError as err:
        return _usage(str(err))
    loaded = _load_document(args)
    if isinstance(loaded, str):
        return _usage(loaded)
    try:
        glossary = load_glossary(args.glossary, args.keep)
    except GlossaryError as err:
        return _usage(str(err))
    options = {key.split(".", 1)[1]: v for key, v in vars(args).items() if key.startswith("sampling.")}
    try:
        return asyncio.run(_until_interrupted(_translate(args, settings, loaded, glossary, options)))
    except KeyboardInterrupt:
        print(
            "\ninterrupted: finished batches are cached; run the same command again to resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED


def _load_document(args: argparse.Namespace) -> Any:
    """(document, encoding) of the input, or the usage error that names the file, line and problem."""
    from hunyuan_serve.client.formats import (
        FormatError,
        Options,
        decode,
        detect_format,
        fallback_encoding,
        parse,
    )

    name = "<stdin>" if args.input == "-" else args.input
    if args.input != "-" and args.output != "-" and _same_file(args.input, args.output):
        return f"{name}: the output would overwrite the input; name another file"
    try:
        data = _read_stdin() if args.input == "-" else Path(args.input).read_bytes()
    except OSError as err:
        return f"cannot read {name}: {err.strerror}"
    try:
        path = None if args.input == "-" else args.input
        content, encoding = decode(data, fallback_encoding(path, args.format))
        fmt = detect_format(path, content) if args.format == "auto" else args.format
        options = Options(target=args.target, source=args.source, overwrite=args.overwrite)
        return parse(content, fmt, options), encoding
    except FormatError as err:
        return f"{name}: {err}"


def _read_stdin() -> bytes:
    """stdin's bytes (a text stream stood in for it, as in tests, is encoded as UTF-8)."""
    buffer = getattr(sys.stdin, "buffer", None)
    return buffer.read() if buffer is not None else sys.stdin.read().encode("utf-8")


def _same_file(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


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


async def _translate(
    args: argparse.Namespace, settings: ClientSettings, loaded: Any, glossary: Any, options: dict[str, Any]
) -> int:
    from hunyuan_serve.client.api import AsyncTranslateClient, TranslateError
    from hunyuan_serve.client.localize import localize
    from hunyuan_serve.client.store import TranslationStore, default_cache_path

    def on_retry(attempt: int, delay: float, error: TranslateError) -> None:
        if attempt == 1 or attempt == settings.max_retries:
            print(f"{error}; retry {attempt} of {settings.max_retries} in {delay:.1f}s", file=sys.stderr)

    document, encoding = loaded
    store = None if args.no_cache else TranslationStore(args.cache or default_cache_path(os.environ))
    bar = _ProgressBar(enabled=not args.no_progress)
    try:
        async with AsyncTranslateClient(settings, on_retry=on_retry) as client:
            glossary, terms = await _split_glossary(client, args, glossary)
            problem = await _check_request(client, args, terms)
            if problem:
                return _usage(problem)
            contexts = await _segment_contexts(client, args, document)
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
                formatted=await _segment_formatting(client, document),
                on_total=bar.start,
                progress=bar.update,
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
    from hunyuan_serve.client.formats import FormatError

    text = document.render(texts, frozenset(summary.failed_at))
    try:
        document.check(text)
    except FormatError as err:
        name = "<stdout>" if args.output == "-" else args.output
        print(
            f"hunyuan-serve translate: {name}: not written: the output fails its check: {err}",
            file=sys.stderr,
        )
        _print_summary(summary, None)
        return EXIT_FAILED
    _write_output(args.output, text, encoding)
    _print_summary(summary, args.report)
    return EXIT_FAILED if summary.failed else EXIT_OK


async def _split_glossary(client: Any, args: argparse.Namespace, glossary: Any) -> tuple[Any, Any]:
    """The glossary applied here, and the terms sent as the request's `glossary` field (or None).

    When the service's model has a terminology prompt of its own (its /health names the family), the
    --glossary file's terms go to the model that way and only the --keep list is locked here; else
    both are substituted and checked here, as for any model.
    """
    from hunyuan_serve.client.glossary import load_glossary
    from hunyuan_serve.families.base import GLOSSARY

    if args.glossary is None or GLOSSARY not in await _service_features(client):
        return glossary, None
    return load_glossary(None, args.keep), dict(load_glossary(args.glossary).terms)


async def _service_features(client: Any) -> tuple[str, ...]:
    """The instruction fields the service's model takes (its /health names the family); none if unknown."""
    import httpx

    from hunyuan_serve.families.build import FAMILY_FEATURES, UnknownFamily, canonical_family

    try:
        _, body = await client.health()
    except (httpx.HTTPError, ValueError):
        return ()
    family = body.get("family") if isinstance(body, dict) else None
    try:
        return FAMILY_FEATURES[canonical_family(family)] if isinstance(family, str) else ()
    except UnknownFamily:
        return ()


async def _segment_contexts(client: Any, args: argparse.Namespace, document: Any) -> list[str | None] | None:
    """Each segment's own context (gettext msgctxt, else --context) when the model takes one.

    A model without a contextual prompt would refuse every such segment: its entries go without.
    """
    from hunyuan_serve.families.base import CONTEXT

    if not any(document.contexts):
        return None
    if CONTEXT not in await _service_features(client):
        print("note: the service's model has no contextual prompt; msgctxt is not sent", file=sys.stderr)
        return None
    return [c or args.context for c in document.contexts]


async def _segment_formatting(client: Any, document: Any) -> tuple[bool, ...] | None:
    """Which segments go through the family's formatted-translation prompt: those with inline markup,
    when the service's family has one (else the markup is checked as placeholders, as any)."""
    from hunyuan_serve.families.base import PRESERVE_FORMAT

    if not any(document.formatted) or PRESERVE_FORMAT not in await _service_features(client):
        return None
    return tuple(document.formatted)


async def _check_request(client: Any, args: argparse.Namespace, terms: Any = None) -> str | None:
    """A usage error when the service does not take the languages, context, style or glossary terms.

    Found before any batch is sent, or else every segment would be refused one by one.
    """
    from hunyuan_serve.client.api import TranslateError

    instructed = bool(args.context or args.style or terms)
    if not instructed and await _languages_known(client, args.target, args.source):
        return None
    # Maybe an alias the service knows (zh-CN, cantonese...), or fields it lacks (or a glossary over its
    # limits): one single-token request with everything the batches will carry settles it.
    try:
        await client.translate(
            "Hello",
            args.target,
            args.source,
            {"max_tokens": 1},
            glossary=terms,
            context=args.context,
            style=args.style,
        )
    except TranslateError as err:
        if err.status in (400, 422):
            return err.message
        raise
    return None


async def _languages_known(client: Any, target: str, source: str | None) -> bool:
    """Whether /languages lists both codes (or the service has no /languages: the first batch will tell)."""
    from hunyuan_serve.client.api import TranslateError

    try:
        languages = await client.languages()
    except TranslateError as err:
        if err.status is not None and err.status < 500:
            return True
        raise
    known = {_language_key(name) for lang in languages for name in (lang.code, lang.name)}
    return all(code is None or _language_key(code) in known for code in (target, source))


def _language_key(code: str) -> str:
    return code.strip().replace("_", "-").lower()


class _ProgressBar:
    """tqdm on stderr (rate and ETA), only when asked for and there is something to send."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._bar: Any = None

    def start(self, total: int) -> None:
        if self.enabled and total:
            from tqdm import tqdm

            self._bar = tqdm(
                total=total, unit="text", desc="translating", file=sys.stderr, dynamic_ncols=True
            )

    def update(self, done: int, total: int) -> None:
        if self._bar is not None:
            self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _write_output(output: str, text: str, encoding: str = "utf-8") -> None:
    if output == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    # Bytes: line endings and the BOM as the input had them. Latin-1 is only a .properties fallback:
    # characters beyond it become \\uXXXX, Java's escape.
    write_atomic(
        Path(output), text.encode(encoding, "backslashreplace" if encoding == "latin-1" else "strict")
    )


def _print_summary(summary: Any, report: Path | None, shown: int = 20) -> None:
    for failure in summary.failures[:shown]:
        print(f"failed {failure.label}: {failure.problem}: {failure.source[:80]!r}", file=sys.stderr)
    if len(summary.failures) > shown:
        print(f"... and {len(summary.failures) - shown} more failures", file=sys.stderr)
    if summary.aborted:
        print(f"stopped sending: {summary.aborted}", file=sys.stderr)
    print(summary.line(), file=sys.stderr)
    if report is not None:
        text = json.dumps(summary.as_dict(), ensure_ascii=False, indent=2) + "\n"
        write_atomic(report, text.encode("utf-8"))


def _usage(message: str) -> int:
    print(f"hunyuan-serve translate: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    """Entry for `python -m hunyuan_serve.client.command` (same as `hunyuan-serve translate`)."""
    parser = argparse.ArgumentParser(prog="hunyuan-serve")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["translate", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
