"""The answer checks on human translations and on faults planted in them: what they flag, what they miss.

    .venv/bin/python -m bench.qa_planted [--django WHEEL|DIR] [--out REPORT.md] [CATALOG.po|.mo ...]

Human pairs: bench/data/sd-webui-zh_CN.json (en -> zh_CN); Django's zh_Hans catalogs, all of them as
one set, from its wheel (`pip download django --no-deps`) or an installed `django` folder; and each
gettext catalog given (msgid -> msgstr, .po or .mo, read with polib: e.g. Weblate's own zh_Hans
django.mo, pairs no threshold was tuned on). Each human translation is checked as if it were the
model's answer (a flag is a false one), then two faults are planted in code: an echo (the source sent
back) for sources of 2 words or more (placeholders, tags and code not counted: "Add %s" is one word,
which no check can tell from a name kept as it is) that their translator did not keep as they are,
and a cut answer (the first quarter of the human translation) for sources of 40 characters or more.
Prints, per set, how many of each the checks flag, and the human flags per check; --out writes it as
Markdown and the figures as JSON beside it.
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # `python bench/qa_planted.py` as well as `python -m bench.qa_planted`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hunyuan_serve.config.qa import QaSettings
from hunyuan_serve.qa.check import Answer, check
from hunyuan_serve.qa.echo import words
from hunyuan_serve.qa.tokens import prose

SD = Path(__file__).resolve().parent / "data" / "sd-webui-zh_CN.json"
ECHO_MIN_WORDS = 2
CUT_MIN_CHARS = 40
TARGET = "echo and cut flagged >= 95% on the Django pairs; human pairs flagged <= 1%"

Pairs = list[tuple[str, str]]
Plant = Callable[[str, str], str]


def sd_pairs() -> Pairs:
    """The SD WebUI strings that have a translation (12 have an empty value)."""
    data = json.loads(SD.read_text(encoding="utf-8"))
    return [(source, human) for source, human in data.items() if human.strip()]


def catalog_pairs(catalog: Any) -> Pairs:
    """A polib catalog's translated, not fuzzy, singular entries (plural forms left out)."""
    return [
        (entry.msgid, entry.msgstr)
        for entry in catalog
        if entry.msgstr.strip()
        and not entry.obsolete
        and "fuzzy" not in entry.flags
        and not entry.msgid_plural
    ]


def file_pairs(path: Path) -> Pairs:
    import polib

    return catalog_pairs(polib.mofile(str(path)) if path.suffix == ".mo" else polib.pofile(str(path)))


def catalog_name(path: Path) -> str:
    """weblate zh_Hans django.mo for .../weblate/locale/zh_Hans/LC_MESSAGES/django.mo."""
    parts = path.parts
    if "locale" in parts[1:-2]:
        at = parts.index("locale", 1)
        return f"{parts[at - 1]} {parts[at + 1]} {path.name}"
    return str(path)


def django_pairs(where: Path) -> Pairs:
    """Every zh_Hans django.po of Django's wheel, or of a `django` folder, as one set of pairs."""
    import polib

    suffix = "zh_Hans/LC_MESSAGES/django.po"
    if where.is_dir():
        return [pair for path in sorted(where.rglob(suffix)) for pair in file_pairs(path)]
    with zipfile.ZipFile(where) as archive:
        names = sorted(name for name in archive.namelist() if name.endswith(suffix))
        texts = [archive.read(name).decode("utf-8") for name in names]
    return [pair for text in texts for pair in catalog_pairs(polib.pofile(text))]


def flagged(pairs: Iterable[tuple[str, str]], plant: Plant, cfg: QaSettings) -> tuple[int, int, Counter[str]]:
    """(answers flagged, answers checked, flags per check) with plant(source, human) as each answer."""
    checked = found = 0
    per_check: Counter[str] = Counter()
    for source, human in pairs:
        checked += 1
        flags = check(Answer(source, plant(source, human), "en", "zh"), cfg)
        found += bool(flags)
        per_check.update(flag.check for flag in flags)
    return found, checked, per_check


def measure(pairs: Pairs, cfg: QaSettings) -> dict[str, Any]:
    """One set's figures: human pairs, planted echoes and cut answers, each flagged of checked."""
    echoes = [pair for pair in pairs if len(words(prose(pair[0]))) >= ECHO_MIN_WORDS and pair[0] != pair[1]]
    cuts = [pair for pair in pairs if len(pair[0]) >= CUT_MIN_CHARS]
    human, checked, per_check = flagged(pairs, lambda source, human: human, cfg)
    echo = flagged(echoes, lambda source, human: source, cfg)
    cut = flagged(cuts, lambda source, human: human[: max(1, len(human) // 4)], cfg)
    return {
        "pairs": checked,
        "human": [human, checked],
        "human_per_check": dict(per_check.most_common()),
        "echo": list(echo[:2]),
        "cut": list(cut[:2]),
    }


def headline(name: str, figures: dict[str, Any]) -> str:
    (human, pairs), (echo, echoes), (cut, cuts) = figures["human"], figures["echo"], figures["cut"]
    return (
        f"- {name}: echo flagged {echo}/{echoes} ({echo / max(1, echoes):.1%}), cut {cut}/{cuts} "
        f"({cut / max(1, cuts):.1%}), human pairs {human}/{pairs} ({human / max(1, pairs):.2%})"
    )


def lines_of(name: str, figures: dict[str, Any]) -> list[str]:
    rows = [("human (false flags)", "human"), ("echo (the source)", "echo"), ("cut (first quarter)", "cut")]
    out = [f"## {name}: {figures['pairs']} pairs", ""]
    out += ["| answer | flagged | of | rate |", "| --- | ---: | ---: | ---: |"]
    for what, key in rows:
        found, checked = figures[key]
        out.append(f"| {what} | {found} | {checked} | {found / max(1, checked):.1%} |")
    per_check = ", ".join(f"{check} {count}" for check, count in figures["human_per_check"].items())
    return [*out, "", f"Human pairs flagged per check: {per_check or 'none'}.", ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--django", type=Path, help="Django's wheel, or its installed `django` folder.")
    parser.add_argument("--out", type=Path, help="Write the Markdown here and its figures beside it (.json).")
    parser.add_argument("catalogs", nargs="*", type=Path, help="More gettext catalogs (.po, .mo).")
    args = parser.parse_args(argv)
    cfg = QaSettings()
    sets = {"sd-webui zh_CN": sd_pairs()}
    if args.django:
        sets[f"Django zh_Hans ({args.django.name})"] = django_pairs(args.django)
    sets |= {catalog_name(path): file_pairs(path) for path in args.catalogs}
    figures = {name: measure(pairs, cfg) for name, pairs in sets.items()}
    text = [f"# qa-planted: {TARGET}", "", "## Headline", ""]
    text += [headline(name, each) for name, each in figures.items()] + [""]
    for name, each in figures.items():
        text += lines_of(name, each)
    print("\n".join(text))
    if args.out:
        args.out.write_text("\n".join(text), encoding="utf-8")
        args.out.with_suffix(".json").write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
