"""The answer checks on human translations and on faults planted in them: what they flag, what they miss.

    .venv/bin/python -m bench.qa_planted [CATALOG.po ...]

Human pairs: bench/data/sd-webui-zh_CN.json (en -> zh_CN), and each gettext catalog given (its msgid
-> msgstr, e.g. Django's django/conf/locale/zh_Hans/LC_MESSAGES/django.po; read with polib). Each human
translation is checked as if it were the model's answer (a flag is a false one), then two faults are
planted in code: an echo (the source sent back) for sources of 5 words or more, and a cut answer (the
first quarter of the human translation) for sources of 40 characters or more. Prints, per data set,
how many of each the checks flag.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from hunyuan_serve.config.qa import QaSettings
from hunyuan_serve.qa.check import Answer, check

SD = Path(__file__).resolve().parent / "data" / "sd-webui-zh_CN.json"
ECHO_MIN_WORDS = 5
CUT_MIN_CHARS = 40

Pairs = list[tuple[str, str]]
Plant = Callable[[str, str], str]


def sd_pairs() -> Pairs:
    """The SD WebUI strings that have a translation (12 have an empty value)."""
    data = json.loads(SD.read_text(encoding="utf-8"))
    return [(source, human) for source, human in data.items() if human.strip()]


def po_pairs(path: Path) -> Pairs:
    """A catalog's translated, not fuzzy, singular entries (plural forms left out)."""
    import polib

    entries = polib.pofile(str(path))
    return [
        (entry.msgid, entry.msgstr)
        for entry in entries
        if entry.msgstr.strip()
        and not entry.obsolete
        and "fuzzy" not in entry.flags
        and not entry.msgid_plural
    ]


def flagged(pairs: Iterable[tuple[str, str]], plant: Plant, cfg: QaSettings) -> tuple[int, int]:
    """(answers flagged, answers checked) with plant(source, human) as each answer."""
    checked = found = 0
    for source, human in pairs:
        checked += 1
        found += bool(check(Answer(source, plant(source, human), "en", "zh"), cfg))
    return found, checked


def report(name: str, pairs: Pairs, cfg: QaSettings) -> None:
    echoes = [pair for pair in pairs if len(pair[0].split()) >= ECHO_MIN_WORDS]
    cuts = [pair for pair in pairs if len(pair[0]) >= CUT_MIN_CHARS]
    rows = (
        ("human (false flags)", flagged(pairs, lambda source, human: human, cfg)),
        ("echo (the source)", flagged(echoes, lambda source, human: source, cfg)),
        ("cut (first quarter)", flagged(cuts, lambda source, human: human[: max(1, len(human) // 4)], cfg)),
    )
    print(f"{name}: {len(pairs)} pairs")
    for what, (found, checked) in rows:
        print(f"  {what:22s} {found:5d} / {checked:5d}  {found / max(1, checked):7.1%}")


def main(argv: list[str]) -> int:
    cfg = QaSettings()
    report("sd-webui zh_CN", sd_pairs(), cfg)
    for path in argv:
        report(Path(path).name, po_pairs(Path(path)), cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
