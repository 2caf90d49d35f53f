"""The answer checks end to end: the tiny model's random output, through Nginx and a real replica, is
flagged in native /translate's `qa` and in another dialect's X-Hunyuan-QA, and counted in /metrics.

The shared stack ignores EOS, so every answer is max_tokens tokens of noise: cut off at max_tokens
(truncated) at the least, whatever the noise decodes to.
"""

from __future__ import annotations

import httpx
import pytest

from hunyuan_serve.qa.flags import CHECKS, HEADER
from tests.support.shared_stack import SharedStack

pytestmark = [pytest.mark.engine, pytest.mark.nginx]

TEXT = "Delete 3 files from the archive folder, then close the window."


def test_random_output_is_flagged_in_native_translate_and_in_the_deepl_header(
    shared_stack: SharedStack,
) -> None:
    with httpx.Client(base_url=shared_stack.url, timeout=120) as client:
        native = client.post("/translate", json={"text": TEXT, "source_lang": "en", "target_lang": "zh"})
        assert native.status_code == 200, native.text
        flagged = [flag["check"] for flag in native.json()["qa"]]
        assert "truncated" in flagged and set(flagged) <= set(CHECKS), native.json()
        # Nginx passes the replica's header on, in each dialect; DeepL's body keeps its one field.
        assert native.headers[HEADER].startswith("flagged 1/1: 0=")
        deepl = client.post("/v2/translate", json={"text": [TEXT, "Open the file."], "target_lang": "ZH"})
        assert deepl.status_code == 200 and set(deepl.json()) == {"translations"}
        assert deepl.headers[HEADER].startswith("flagged 2/2: 0=") and "truncated" in deepl.headers[HEADER]
        off = client.post(
            "/translate", json={"text": TEXT, "source_lang": "en", "target_lang": "zh", "qa": "off"}
        )
        assert "qa" not in off.json() and HEADER not in off.headers
    replica = httpx.get(f"http://127.0.0.1:{shared_stack.base_port}/metrics", timeout=10).text
    # Labelled with the replica's pool: the shared stack has no pools section, so its one pool, default.
    assert 'hunyuan_qa_flags_total{check="truncated",pool="default"}' in replica
