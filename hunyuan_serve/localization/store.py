"""A local SQLite cache of accepted translations, so re-runs and resumed runs send only what is new."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from hunyuan_serve.sqlite_in import in_slices

_SCHEMA = """
CREATE TABLE IF NOT EXISTS translations (
    profile TEXT NOT NULL,
    source_lang TEXT NOT NULL,
    target_lang TEXT NOT NULL,
    text TEXT NOT NULL,
    result TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (profile, source_lang, target_lang, text)
)
"""


def cache_profile(model: str | None, fields: Mapping[str, Any] | None) -> str:
    """What besides the languages and the text decides a translation: the model and the request fields.

    Fields are the sampling options, context and style sent; one not given (None or "") leaves the key
    as it was, so adding a field keeps the entries made without it.
    """
    given = {key: value for key, value in (fields or {}).items() if value is not None and value != ""}
    return json.dumps({"model": model or "", **given}, sort_keys=True, separators=(",", ":"))


def default_cache_path(environ: Mapping[str, str]) -> Path:
    """$XDG_CACHE_HOME/hunyuan-serve/translations.sqlite, or under ~/.cache."""
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hunyuan-serve" / "translations.sqlite"


class TranslationStore:
    """Accepted translations keyed by (profile, source language, target language, sent text).

    The profile (see cache_profile) keeps a run with another model or other sampling options
    from being answered with translations made under the old ones.
    """

    def __init__(self, path: Path, busy_timeout_s: float = 10.0) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(str(path), timeout=busy_timeout_s)
        # WAL: a reader (another run) never blocks the writer, and a killed run loses no commits.
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(translations)")}
        if columns and "profile" not in columns:
            # A cache file from before profiles: nothing says which model made its entries.
            self._db.execute("DROP TABLE translations")
        self._db.execute(_SCHEMA)
        self._db.commit()

    def get_many(
        self, profile: str, source_lang: str | None, target_lang: str, texts: Iterable[str]
    ) -> dict[str, str]:
        """The cached results among texts."""
        keys = list(dict.fromkeys(texts))
        found: dict[str, str] = {}
        for chunk, marks in in_slices(keys):
            rows = self._db.execute(
                "SELECT text, result FROM translations"
                f" WHERE profile=? AND source_lang=? AND target_lang=? AND text IN ({marks})",
                (profile, source_lang or "", target_lang, *chunk),
            )
            found.update(rows)
        return found

    def put_many(
        self, profile: str, source_lang: str | None, target_lang: str, results: Mapping[str, str]
    ) -> None:
        """Store results and commit at once, so an interrupted run keeps everything finished so far."""
        now = time.time()
        rows = [
            (profile, source_lang or "", target_lang, text, result, now) for text, result in results.items()
        ]
        with self._db:
            self._db.executemany("INSERT OR REPLACE INTO translations VALUES (?, ?, ?, ?, ?, ?)", rows)

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM translations").fetchone()[0])

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> TranslationStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
