"""Python clients of the translation service and the `translate` command that localizes files."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hunyuan_serve.client.api import AsyncTranslateClient, TranslateClient
    from hunyuan_serve.client.settings import ClientSettings
    from hunyuan_serve.client.wire import ServedLanguage
    from hunyuan_serve.localization.answers import TranslateError, Translation

# Loaded on first use, so `hunyuan-serve --help` does not pay for httpx.
_EXPORTS = {
    "AsyncTranslateClient": "hunyuan_serve.client.api",
    "ServedLanguage": "hunyuan_serve.client.wire",
    "TranslateClient": "hunyuan_serve.client.api",
    "TranslateError": "hunyuan_serve.localization.answers",
    "Translation": "hunyuan_serve.localization.answers",
    "ClientSettings": "hunyuan_serve.client.settings",
}

__all__ = [
    "AsyncTranslateClient",
    "ClientSettings",
    "ServedLanguage",
    "TranslateClient",
    "TranslateError",
    "Translation",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
