"""What the service's model takes, asked before any segment is sent: languages, context, style, terms."""

from __future__ import annotations

import argparse
import sys
from typing import Any


async def split_glossary(client: Any, args: argparse.Namespace, glossary: Any) -> tuple[Any, Any]:
    """The glossary applied here, and the terms sent as the request's `glossary` field (or None).

    When the service's model has a terminology prompt of its own (its /health names the family), the
    --glossary file's terms go to the model that way and only the --keep list is locked here; else
    both are substituted and checked here, as for any model.
    """
    from hunyuan_serve.families.base import GLOSSARY
    from hunyuan_serve.localization.glossary import load_glossary

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


async def segment_contexts(client: Any, args: argparse.Namespace, document: Any) -> list[str | None] | None:
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


async def segment_formatting(client: Any, document: Any) -> tuple[bool, ...] | None:
    """Which segments go through the family's formatted-translation prompt: those with inline markup,
    when the service's family has one (else the markup is checked as placeholders, as any)."""
    from hunyuan_serve.families.base import PRESERVE_FORMAT

    if not any(document.formatted) or PRESERVE_FORMAT not in await _service_features(client):
        return None
    return tuple(document.formatted)


async def check_request(client: Any, args: argparse.Namespace, terms: Any = None) -> str | None:
    """A usage error when the service does not take the languages, context, style or glossary terms.

    Found before any batch is sent, or else every segment would be refused one by one.
    """
    from hunyuan_serve.localization.answers import TranslateError

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
    from hunyuan_serve.localization.answers import TranslateError

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
