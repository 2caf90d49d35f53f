"""Weblate's own machinery classes against a stack, run in Weblate's Python 3.12 venv; JSON results out.

python weblate_driver.py URL KEY MODEL: for each backend (LibreTranslate, DeepL with a glossary, OpenAI)
its form check (validate_settings) and one automatic-translation batch of BATCH strings, as
download_multiple_translations sends it, over real HTTP; tmserver's language pairs and its lookups of
the MEMORY the test imported for the key (a stored string, a one-word variant). Weblate's database
is not built: units are absent (sources of (text, None), as validate_settings itself sends), so the
DeepL glossary is made with Weblate's own create_glossary and its id handed to the translation as
get_glossary_id would.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Any

BATCH = 20  # weblate/machinery/base.py: automatic translation's batch
SOURCE = "en"
TARGET = "de"
# The key's translation memory (imported by the test) and what tmserver is asked: one stored string,
# one that differs from a stored one by a word.
MEMORY = {"Batch count": "总批次数", "Open the settings of the current image now": "立即打开当前图像的设置"}
ASKED = ("Batch count", "Open the settings of the current picture now")


def configure() -> None:
    """Django with Weblate's example settings, an in-memory SQLite and a local-memory cache."""
    settings_dir = tempfile.mkdtemp()
    with open(os.path.join(settings_dir, "driver_settings.py"), "w", encoding="utf-8") as handle:
        handle.write(
            "import tempfile\n"
            "from weblate.settings_example import *  # noqa: F403\n"
            'DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}\n'
            'CACHES = {name: {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}'
            ' for name in ("default", "avatar")}\n'
            "DATA_DIR = tempfile.mkdtemp()\n"
            'CACHE_DIR = DATA_DIR + "/cache"\n'
            'SECRET_KEY = "weblate driver"\n'
            "CELERY_TASK_ALWAYS_EAGER = True\n"
            'CELERY_BROKER_URL = "memory://"\n'
        )
    sys.path.insert(0, settings_dir)
    os.environ["DJANGO_SETTINGS_MODULE"] = "driver_settings"
    import django

    django.setup()
    # Weblate's migrations need PostgreSQL (trigram indexes); the OpenAI backend reads only the
    # language tables, built here from Weblate's own models, as its tests' database would hold them.
    from django.db import connection
    from weblate.lang.models import Language, Plural

    with connection.schema_editor() as editor:
        editor.create_model(Language)
        editor.create_model(Plural)


def texts(placeholder: str) -> list[tuple[str, None]]:
    """BATCH strings, every fifth with a placeholder as the backend masks it."""
    out = []
    for index in range(BATCH):
        text = f"Open the file number {index}"
        out.append((f"{text} {placeholder} now" if index % 5 == 0 else text, None))
    return out


def batch(machine: Any, sources: list[tuple[str, None]]) -> dict[str, Any]:
    """One batch as automatic translation sends it; the answers per string, time and any error."""
    started = time.monotonic()
    try:
        found = machine.download_multiple_translations(SOURCE, TARGET, sources, None, 75)
    except Exception as error:  # the report names it; the test fails on it
        return {"error": f"{type(error).__name__}: {error}", "seconds": time.monotonic() - started}
    answers = {text: [item["text"] for item in found.get(text, [])] for text, _ in sources}
    return {
        "seconds": time.monotonic() - started,
        "filled": sum(1 for text, _ in sources if answers[text]),  # a tiny model's answer may be blank
        "answers": answers,
        "error": None,
    }


def validated(machine: Any) -> str | None:
    """Weblate's form check when the settings are saved: None, or what it said."""
    try:
        machine.validate_settings()
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    return None


def libretranslate(url: str, key: str) -> dict[str, Any]:
    from weblate.machinery.libretranslate import LibreTranslateTranslation

    machine = LibreTranslateTranslation({"url": f"{url}/libretranslate/", "key": key})
    return {"form": validated(machine), **batch(machine, texts("[X5X]"))}


def deepl(url: str, key: str) -> dict[str, Any]:
    from weblate.machinery.base import GlossaryDoesNotExistError
    from weblate.machinery.deepl import DeepLTranslation

    settings = {"url": f"{url}/", "key": key, "formality": "default", "context": ""}
    machine = DeepLTranslation(settings)
    form = validated(machine)
    pairs = sorted(machine.supported_languages)
    name = "weblate:1:EN:DE:driver"
    machine.create_glossary("EN", "DE", name, "file\tDatei\nnumber\tNummer")
    glossary_id = machine.get_glossaries(use_cache=False)[name]
    try:
        machine.update_glossary(glossary_id, "EN", "DE", name, "file\tDatei")
        update = "updated"
    except GlossaryDoesNotExistError:
        update = "recreate"  # what Weblate does on the 404: delete, then create anew
    machine.get_glossary_id = lambda *_args: glossary_id  # the lookup that needs Weblate's database
    result = batch(machine, texts('<x id="5"></x>'))
    machine.delete_glossary(glossary_id)
    return {"form": form, "pairs": len(pairs), "update": update, **result}


def openai(url: str, key: str, model: str) -> dict[str, Any]:
    from weblate.machinery.openai import OpenAITranslation

    settings = {"key": key, "base_url": f"{url}/v1", "model": "custom", "custom_model": model}
    machine = OpenAITranslation({**settings, "persona": "", "style": ""})
    return {"form": validated(machine), **batch(machine, texts("@@PH1@@"))}


def tmserver(url: str, key: str) -> dict[str, Any]:
    from weblate.machinery.base import MACHINERY_DEFAULT_THRESHOLD
    from weblate.machinery.tmserver import TMServerTranslation

    # Its settings take a URL only: the key rides in it, as the password of Basic authentication.
    machine = TMServerTranslation({"url": url.replace("://", f"://weblate:{key}@", 1) + "/tmserver/"})
    target = machine.map_language_code("zh_Hans")
    found = machine.download_multiple_translations(
        SOURCE, target, [(text, None) for text in ASKED], None, MACHINERY_DEFAULT_THRESHOLD
    )
    return {
        "form": validated(machine),
        "pairs": sorted(machine.download_languages()),
        "supported": machine.is_supported(SOURCE, target),
        "threshold": MACHINERY_DEFAULT_THRESHOLD,
        "found": {text: [dict(item) for item in found.get(text, [])] for text in ASKED},
    }


def main() -> None:
    url, key, model = sys.argv[1:4]
    configure()
    report = {
        "libretranslate": libretranslate(url, key),
        "deepl": deepl(url, key),
        "openai": openai(url, key, model),
        "tmserver": tmserver(url, key),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
