"""cache_key built from a shared prefix gives the bytes, and so the keys, of one dump of every field."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hunyuan_serve.cache.key import cache_key, key_prefix, keyed_text


def one_dump(
    model: str, source: str, target: str, text: str, sampling: dict[str, Any], instructions: dict[str, Any]
) -> str:
    """The key as it was computed before the prefix (the keys in caches already written)."""
    fields: dict[str, Any] = {"model": model, "source": source, "target": target, "text": text}
    fields["sampling"] = dict(sampling)
    if instructions:
        fields["instructions"] = dict(instructions)
    payload = json.dumps(fields, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


SAMPLING = st.fixed_dictionaries({"temperature": st.floats(0, 2), "top_k": st.integers(-1, 100)})
INSTRUCTIONS = st.one_of(
    st.just({}),
    st.fixed_dictionaries(
        {
            "family": st.text(max_size=8),
            "terms": st.lists(st.lists(st.text(max_size=6), min_size=2, max_size=2)),
        }
    ),
)


@given(st.text(max_size=10), st.text(max_size=4), st.text(max_size=40), SAMPLING, INSTRUCTIONS)
def test_prefix_keys_equal_one_dump(
    model: str, lang: str, text: str, sampling: Any, instructions: Any
) -> None:
    expected = one_dump(model, lang, "zh", text, sampling, instructions)
    assert cache_key(model, lang, "zh", text, sampling, instructions) == expected
    assert keyed_text(key_prefix(model, lang, "zh", sampling, instructions), text) == expected
