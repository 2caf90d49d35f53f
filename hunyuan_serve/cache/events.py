"""What the translation cache tells its owner: errors by layer and op, a layer up or down."""

from __future__ import annotations

from typing import Protocol


class CacheEvents(Protocol):
    """What the cache tells its owner (the replica's metrics): errors by layer and op, a layer up or down."""

    def cache_error(self, layer: str, op: str) -> None: ...

    def cache_layer_up(self, layer: str, up: bool) -> None: ...


class NoEvents:
    """A cache nobody watches."""

    def cache_error(self, layer: str, op: str) -> None:
        pass

    def cache_layer_up(self, layer: str, up: bool) -> None:
        pass
