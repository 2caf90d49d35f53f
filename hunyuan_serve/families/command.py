"""`hunyuan-serve prompt`: print the exact messages a family sends for a text, and the chat-templated text."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from hunyuan_serve.families import CHIMERA, FAMILIES, chimera
from hunyuan_serve.families.base import Prompt, PromptInputError
from hunyuan_serve.families.build import build_prompt, canonical_family
from hunyuan_serve.families.detect import family_from_config, read_model_config
from hunyuan_serve.languages import UnknownLanguage, find_language


def rendered_chat(model: str, prompt: Prompt) -> str:
    """The text the engine tokenizes: the model's chat template applied as the replica applies it."""
    if not prompt.is_chat:
        return prompt.text
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)
    text = tokenizer.apply_chat_template(list(prompt.messages), tokenize=False, add_generation_prompt=True)
    return str(text)


def prompt_document(family: str, prompt: Prompt) -> dict[str, Any]:
    """The --json output: the family and its messages (a few-shot prompt: its completion text and stop)."""
    doc: dict[str, Any] = {"family": family, "messages": [dict(m) for m in prompt.messages]}
    if not prompt.is_chat:
        doc.update(text=prompt.text, stop=list(prompt.stop))
    return doc


def _glossary(path: str | None) -> dict[str, str] | None:
    if path is None:
        return None
    # The same file formats as `translate --glossary` (hunyuan_serve.localization.glossary owns the parser).
    from hunyuan_serve.localization.glossary import GlossaryError, parse_glossary

    try:
        return parse_glossary(Path(path).read_text(encoding="utf-8"), path)
    except OSError as err:
        raise PromptInputError(f"cannot read {path}: {err.strerror}") from None
    except GlossaryError as err:
        raise PromptInputError(str(err)) from None


def _build(args: argparse.Namespace) -> tuple[str, Prompt]:
    if args.family == "auto":
        if not args.model:
            raise PromptInputError("--family auto needs --model to detect the family from")
        family = family_from_config("auto", read_model_config(args.model), args.model)
    else:
        family = canonical_family(args.family)
    source, target = find_language(args.source), find_language(args.target)
    candidates = args.candidate or []
    if family == CHIMERA:
        if not candidates:
            raise PromptInputError(
                "family chimera fuses candidate translations of TEXT: give each with --candidate "
                f"({chimera.MIN_CANDIDATES} to {chimera.MAX_CANDIDATES})"
            )
        chimera.check_count(len(candidates), "--candidate")
        if args.glossary or args.context or args.style or args.preserve_format:
            raise PromptInputError(
                "family chimera's fusion prompt takes no glossary, context, style or format"
            )
        return family, chimera.fusion_prompt(source, target, args.text, candidates)
    if candidates:
        raise PromptInputError(f"--candidate is for family chimera; {family} translates TEXT alone")
    prompt = build_prompt(
        family,
        source,
        target,
        args.text,
        _glossary(args.glossary),
        args.context,
        args.style,
        args.preserve_format,
    )
    return family, prompt


def _run(args: argparse.Namespace) -> int:
    try:
        family, prompt = _build(args)
        chat_text = rendered_chat(args.model, prompt) if args.model else None
    except (PromptInputError, UnknownLanguage) as err:
        print(f"hunyuan-serve prompt: {err}", file=sys.stderr)
        return 2
    if args.json:
        doc = prompt_document(family, prompt)
        if chat_text is not None:
            doc["chat_text"] = chat_text
        print(json.dumps(doc, ensure_ascii=False, indent=2))
        return 0
    print(f"# family: {family}")
    for message in prompt.messages:
        print(f"# {message['role']}:\n{message['content']}")
    if not prompt.is_chat:
        print(f"# completion text (stop at {list(prompt.stop)!r}):\n{prompt.text}")
    if chat_text is not None:
        print(f"# after {args.model}'s chat template:\n{chat_text}")
    return 0


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "prompt",
        help="Print the exact prompt a model family gets for a text (and the chat-templated text).",
        description="Print the messages the service sends for TEXT; with --model also the text after that "
        "model's chat template. A feature the family has no prompt for exits 2 with the API's 400 message.",
    )
    parser.add_argument("text", metavar="TEXT", help="The text to translate.")
    parser.add_argument("--family", default="auto", help=f"{', '.join(FAMILIES)}, or auto (needs --model).")
    parser.add_argument("--from", dest="source", required=True, help="Source language code.")
    parser.add_argument("--to", dest="target", required=True, help="Target language code.")
    parser.add_argument("--glossary", metavar="FILE", help="Glossary file, as for `translate --glossary`.")
    parser.add_argument("--context", help="Text that precedes the segment (contextual/background prompt).")
    parser.add_argument("--style", help="Translation style (Hy-MT2).")
    parser.add_argument("--preserve-format", action="store_true", help="Formatted translation (<sn> tags).")
    parser.add_argument(
        "--candidate",
        action="append",
        metavar="TRANSLATION",
        help="A candidate translation of TEXT for --family chimera to fuse; repeat it for each (2 to 8).",
    )
    parser.add_argument("--json", action="store_true", help='Print {"family": ..., "messages": [...]}.')
    parser.add_argument("--model", metavar="DIR", help="A local checkpoint whose chat template to apply.")
    parser.set_defaults(func=_run)
