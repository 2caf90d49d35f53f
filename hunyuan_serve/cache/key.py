"""The translation cache's key: a stable digest of everything that decides an answer."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any


def cache_key(
    model: str,
    source: str,
    target: str,
    text: str,
    sampling: Mapping[str, Any],
    instructions: Mapping[str, Any] | None = None,
    ensemble: int = 0,
) -> str:
    """A stable digest of everything that decides the output: model, languages, text, sampling, the
    prompt's instructions (its family, the glossary terms sent, context, style, preserve_format), and an
    ensemble's candidate count (its entry holds that many candidates, never a plain answer)."""
    return keyed_text(key_prefix(model, source, target, sampling, instructions, ensemble), text)


def key_prefix(
    model: str,
    source: str,
    target: str,
    sampling: Mapping[str, Any],
    instructions: Mapping[str, Any] | None = None,
    ensemble: int = 0,
) -> str:
    """cache_key's JSON payload up to its last field, the text: shared by every text of a batch.

    The payload is json.dumps of the fields with sort_keys, and "text" sorts last among them, so the
    text's field is appended (keyed_text) to the same bytes as one dump of all of them gives.
    """
    fields: dict[str, Any] = {"model": model, "source": source, "target": target, "sampling": dict(sampling)}
    if instructions:
        fields["instructions"] = dict(instructions)
    if ensemble:  # absent for plain requests, so their keys (and caches already filled) stay as they were
        fields["ensemble"] = {"candidates": ensemble}
    return json.dumps(fields, sort_keys=True, ensure_ascii=False)[:-1]


def keyed_text(prefix: str, text: str) -> str:
    """The cache key of `text` under a key_prefix."""
    payload = f"{prefix}, {json.dumps('text')}: {json.dumps(text, ensure_ascii=False)}}}"
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
