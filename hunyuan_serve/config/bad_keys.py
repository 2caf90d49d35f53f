"""How wrong API keys from one client address are slowed: the count, its window, the pause after."""

from __future__ import annotations

from pydantic import Field

from hunyuan_serve.config.base import Section


class BadKeyFields(Section):
    """Composed into the auth section: each replica counts the wrong keys it sees per client address."""

    bad_key_limit: int = Field(
        20,
        ge=0,
        description="Wrong API keys one client address may send within bad_key_window_s; past it its "
        "wrong keys get a 429 with Retry-After (a right key still passes). 0: never slowed.",
    )
    bad_key_window_s: float = Field(60.0, gt=0, description="The window bad_key_limit counts over.")
    bad_key_retry_after_s: int = Field(
        60,
        ge=1,
        description="How long an address past bad_key_limit gets 429s for wrong keys (its Retry-After).",
    )
