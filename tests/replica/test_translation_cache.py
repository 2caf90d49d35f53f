"""The translation cache: key, LRU bound, and the SQLite file two caches share."""

from __future__ import annotations

from pathlib import Path

from hunyuan_serve.cache import LruCache, TranslationCache, cache_key

SAMPLING = {"temperature": 0.7, "top_p": 0.6, "top_k": 20, "repetition_penalty": 1.05, "max_tokens": 64}


def test_key_depends_on_every_part() -> None:
    base = cache_key("m", "en", "zh", "Hi", SAMPLING)
    assert base == cache_key("m", "en", "zh", "Hi", dict(reversed(list(SAMPLING.items()))))
    assert base != cache_key("m2", "en", "zh", "Hi", SAMPLING)
    assert base != cache_key("m", "en", "ja", "Hi", SAMPLING)
    assert base != cache_key("m", "fr", "zh", "Hi", SAMPLING)
    assert base != cache_key("m", "en", "zh", "Hi ", SAMPLING)
    assert base != cache_key("m", "en", "zh", "Hi", {**SAMPLING, "temperature": 0.0})


def test_lru_evicts_least_recently_used() -> None:
    lru = LruCache(2)
    lru.put("a", "1")
    lru.put("b", "2")
    assert lru.get("a") == "1"
    lru.put("c", "3")
    assert lru.get("b") is None
    assert (lru.get("a"), lru.get("c"), len(lru)) == ("1", "3", 2)


def test_lru_of_zero_stores_nothing() -> None:
    lru = LruCache(0)
    lru.put("a", "1")
    assert lru.get("a") is None


def test_sqlite_file_is_shared_between_caches(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "translations.sqlite"
    first = TranslationCache(10, path)
    second = TranslationCache(10, path)
    try:
        assert first.file is not None and first.file.journal_mode() == "wal"
        first.put("k", "你好")
        assert second.get("k") == ("你好", "sqlite")
        assert second.get("k") == ("你好", "memory")
        assert second.get("missing") is None
    finally:
        first.close()
        second.close()
