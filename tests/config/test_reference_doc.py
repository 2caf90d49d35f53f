"""docs/settings.md is what `make settings-doc` writes from the config today: it fails when stale."""

from __future__ import annotations

import re
from pathlib import Path

from hunyuan_serve.config.reference import parts, render

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "settings.md"


def test_the_settings_reference_matches_the_config() -> None:
    assert DOC.read_text(encoding="utf-8") == render(parts()), (
        "docs/settings.md is stale: run `make settings-doc` and commit it"
    )


def test_make_settings_doc_writes_the_reference() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    rule = re.search(r"^settings-doc:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert rule and "hunyuan_serve.config.reference" in rule.group(1) and "docs/settings.md" in rule.group(1)
