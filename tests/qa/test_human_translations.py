"""The checks on 5,556 human en -> zh_CN WebUI translations, as if each were the model's answer."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from hunyuan_serve.config.qa import QaSettings
from hunyuan_serve.qa.check import Answer, check
from hunyuan_serve.qa.flags import CHECKS

# The project's own copy (bench/data/README.md: origin and MIT license), so a fresh clone has it.
DATA = Path(__file__).resolve().parents[2] / "bench" / "data" / "sd-webui-zh_CN.json"
MOST_FLAGGED = 0.01  # of these human translations, the share all checks together may flag


def test_the_checks_flag_at_most_one_percent_of_human_translations() -> None:
    every = json.loads(DATA.read_text(encoding="utf-8"))
    assert len(every) == 5568
    # 12 strings have no translation at all (an empty value): the `empty` check is right to flag them,
    # and they are no human translation to measure false flags on.
    pairs = {source: human for source, human in every.items() if human.strip()}
    assert len(pairs) == 5556
    cfg = QaSettings()
    per_check: Counter[str] = Counter()
    flagged = 0
    for source, human in pairs.items():
        found = check(Answer(source, human, "en", "zh"), cfg)
        flagged += bool(found)
        per_check.update(flag.check for flag in found)
    # The rate of each check, for the record (pytest -s shows it; docs/qa.md quotes it).
    for name in CHECKS:
        print(f"{name:15s} {per_check[name]:5d} {per_check[name] / len(pairs):7.2%}")
    print(f"{'any':15s} {flagged:5d} {flagged / len(pairs):7.2%}")
    assert set(per_check) <= set(CHECKS)
    assert flagged / len(pairs) <= MOST_FLAGGED, per_check
    # The data is not so clean that nothing flags: it holds untranslated entries.
    assert per_check["length_ratio"] and per_check["echo"]
