"""Python clients of the translation service and the `translate` command that localizes files."""

from __future__ import annotations

from hunyuan_serve.client.api import (
    AsyncTranslateClient,
    Language,
    TranslateClient,
    TranslateError,
    Translation,
)
from hunyuan_serve.client.settings import ClientSettings

__all__ = [
    "AsyncTranslateClient",
    "ClientSettings",
    "Language",
    "TranslateClient",
    "TranslateError",
    "Translation",
]
