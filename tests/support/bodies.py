"""Malformed /translate bodies for property tests, and the check that none gets a 5xx."""

from __future__ import annotations

import json
from typing import Any

import httpx
from hypothesis import strategies as st

from hunyuan_serve.replica.schema import _KNOWN_KEYS

# The request keys the server knows, plus one it must refuse.
KEYS = [*sorted(_KNOWN_KEYS), "extra"]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(["en", "zh", "ZH-tw", "yue", "xx", "", " ", "zh_Hant"]),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
bodies = st.dictionaries(st.sampled_from(KEYS), values, max_size=7)


def encode(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=False, allow_nan=True).encode("utf-8", "surrogatepass")


raw_bytes = st.one_of(
    st.binary(max_size=200),
    bodies.map(encode),
    bodies.map(lambda b: encode(b)[: max(1, len(encode(b)) // 2)]),
    st.lists(values, max_size=3).map(encode),
)


def check(response: httpx.Response) -> None:
    """No 5xx; every 4xx is the JSON error shape with a code and a message."""
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        error = response.json()["error"]
        assert isinstance(error["code"], str) and isinstance(error["message"], str) and error["message"]
