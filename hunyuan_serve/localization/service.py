"""What the localization pipeline asks of a translation service: the HTTP client, or a replica's core."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from hunyuan_serve.localization.answers import Translation
from hunyuan_serve.localization.batches import Progress

T = TypeVar("T")


class Service(Protocol):
    """A service's batch translation, its batching, its memory's exact matches and its model's name.

    The `translate` command's is the HTTP client (client/api.py); a replica's document jobs call its
    translation core in-process (replica/documents/core.py): one pipeline, the same answers.
    """

    async def translate_texts(
        self,
        texts: Sequence[str],
        target: str,
        source: str | None = ...,
        options: Mapping[str, Any] | None = ...,
        *,
        glossary: Mapping[str, str] | None = ...,
        context: str | None = ...,
        style: str | None = ...,
    ) -> list[Translation]:
        """One batch; a refusal or failure is a TranslateError with the status the HTTP API answers."""
        ...

    async def map_batches(
        self, texts: Sequence[str], work: Callable[[list[str]], Awaitable[T]], progress: Progress | None = ...
    ) -> list[T]:
        """work(batch) for each of the service's batches of texts, as many at once as it takes."""
        ...

    async def memory_lookup(self, texts: Sequence[str], target: str, source: str) -> dict[str, str]:
        """The translation memory's target of each text it holds whole ({}: none, or no memory)."""
        ...

    async def served_model(self) -> str | None:
        """The model that answers (the cache profile's), or None when the service does not say."""
        ...
