"""Each sampling field's range, as the request parsers check it and the OpenAPI bodies declare it."""

from __future__ import annotations

# (JSON type, low, high, low bound open); max_tokens' high (None) is the context less one token.
SAMPLING_BOUNDS: dict[str, tuple[str, float, float | None, bool]] = {
    "temperature": ("number", 0.0, 2.0, False),
    "top_p": ("number", 0.0, 1.0, True),
    "top_k": ("integer", -1, 1000, False),
    "repetition_penalty": ("number", 0.0, 2.0, True),
    "max_tokens": ("integer", 1, None, False),
}
