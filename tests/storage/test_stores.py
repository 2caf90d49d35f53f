"""The per-key store on a real SQLite file and a real redis-server; glossary entries, keys-file parsing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hunyuan_serve import auth
from hunyuan_serve.cache.redis_layer import RedisSettings
from hunyuan_serve.config import ConfigError, ServeConfig
from hunyuan_serve.replica import glossaries as g
from hunyuan_serve.storage.backend import StoreUnavailable
from hunyuan_serve.storage.from_config import store_from_config, store_path
from hunyuan_serve.storage.glossary import Dictionary
from hunyuan_serve.storage.per_key import RedisStore, SqliteStore, Store
from tests.support.redis_server import RedisServer

PAIR = ("en", "de")


@pytest.fixture(params=["sqlite", "redis"])
async def stores(
    request: pytest.FixtureRequest, tmp_path: Path, redis: RedisServer
) -> AsyncIterator[tuple[Store, Store]]:
    """Two stores on the same backend, as two replicas (or hosts) see it."""
    if request.param == "sqlite":
        pair: tuple[Store, Store] = (SqliteStore(tmp_path / "s.sqlite"), SqliteStore(tmp_path / "s.sqlite"))
    else:
        prefix = f"t{tmp_path.name}:"
        settings = RedisSettings(redis.url, prefix, 0, 1.0, 1.0)
        pair = (RedisStore(settings), RedisStore(settings))
    yield pair
    for store in pair:
        await store.aclose()


def _glossary(owner: str, name: str = "terms") -> g.Glossary:
    return g.new_glossary(owner, name, [Dictionary("en", "de", (("cat", "Katze"), ("dog", "Hund")))])


async def test_a_glossary_is_its_owners_alone_on_every_replica(stores: tuple[Store, Store]) -> None:
    one, two = stores
    made = _glossary("key-a")
    await one.create_glossary(made)
    assert await two.glossary("key-a", made.id) == made  # the other replica reads what the first wrote
    assert await two.glossary("key-b", made.id) is None
    assert [x.id for x in await two.glossaries("key-a")] == [made.id]
    assert await two.glossaries("key-b") == []
    assert not await two.delete_glossary("key-b", made.id)  # another key cannot delete it either
    assert await one.glossary("key-a", made.id) == made
    assert await two.delete_glossary("key-a", made.id)
    assert await one.glossary("key-a", made.id) is None and await one.glossaries("key-a") == []
    assert not await one.delete_glossary("key-a", made.id)


async def test_characters_add_up_across_replicas_and_keys_stay_apart(stores: tuple[Store, Store]) -> None:
    one, two = stores
    assert await one.characters("key-a") == 0
    totals = await asyncio.gather(*(s.add_characters("key-a", 5) for s in (one, two) for _ in range(10)))
    assert sorted(totals) == list(range(5, 105, 5))  # each add saw its own new total: none was lost
    assert await two.characters("key-a") == 100 and await one.characters("key-b") == 0


def test_the_sqlite_store_is_opened_at_first_use_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "store.sqlite"
    store = SqliteStore(path)
    assert not path.exists()
    assert asyncio.run(store.add_characters("k", 3)) == 3
    assert store.journal_mode() == "wal"
    asyncio.run(store.aclose())


async def test_a_store_that_cannot_answer_says_so(tmp_path: Path, redis: RedisServer) -> None:
    (tmp_path / "file").write_text("not a directory")
    broken = SqliteStore(tmp_path / "file" / "store.sqlite")
    with pytest.raises(StoreUnavailable, match="store file"):
        await broken.characters("k")
    await broken.aclose()
    nothing = RedisStore(RedisSettings("redis://:secret@127.0.0.1:1/0", connect_timeout_s=0.2, timeout_s=0.2))
    with pytest.raises(StoreUnavailable, match="redis") as err:
        await nothing.create_glossary(_glossary("k"))
    assert "secret" not in str(err.value)
    await nothing.aclose()
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreUnavailable):
        await SqliteStore(garbage).glossaries("k")


def test_the_store_follows_the_cache_settings(tmp_path: Path) -> None:
    default = ServeConfig.model_validate({"run_dir": str(tmp_path)})
    assert store_path(default) == tmp_path / "store.sqlite"
    assert isinstance(store_from_config(default), SqliteStore)
    shared = ServeConfig.model_validate({"replica": {"cache_redis_url": "redis://10.0.0.9:6379/0"}})
    assert isinstance(store_from_config(shared), RedisStore)
    with pytest.raises(ValueError, match="one shared store"):
        ServeConfig.model_validate({"replica": {"cache_redis_url": "redis://h:1/0", "store_path": "/x"}})


def _parse(text: str, fmt: str | None = "tsv", **limits: int) -> g.Terms:
    bounds = {"max_entries": 100, "max_bytes": 10_000, "max_term_chars": 50, **limits}
    return g.parse_entries(
        text, fmt, PAIR, bounds["max_entries"], bounds["max_bytes"], bounds["max_term_chars"]
    )


def test_entries_in_tsv_and_csv() -> None:
    assert _parse("cat\tKatze\n\n dog \t Hund \n") == (("cat", "Katze"), ("dog", "Hund"))
    assert _parse("cat\tKatze", None) == (("cat", "Katze"),)  # tsv is DeepL's default format
    csv_text = 'cat,Katze\n"a, b","x ""y"""\ndog,Hund,EN,de\n'
    assert _parse(csv_text, "csv") == (("cat", "Katze"), ("a, b", 'x "y"'), ("dog", "Hund"))


@pytest.mark.parametrize(
    ("text", "fmt", "problem"),
    [
        ("cat\tKatze\ncat\tMieze\n", "tsv", 'entry 2 duplicates the source term "cat" of entry 1'),
        ("cat\t\n", "tsv", "the target term of entry 1 is empty"),
        ("\tKatze\n", "tsv", "the source term of entry 1 is empty"),
        ("cat,\n", "csv", "the target term of entry 1 is empty"),
        ("cat Katze\n", "tsv", "entry 1 is not source<TAB>target"),
        ("a\tb\tc\n", "tsv", "entry 1 is not"),
        ("cat,Katze,en\n", "csv", "entry 1 is not source,target[,source_lang,target_lang]"),
        ("cat,Katze,en,fr\n", "csv", "entry 1 is for en->fr, not the glossary's en->de"),
        ("cat,Katze,en,xx\n", "csv", "'target_lang' not supported"),
        ("c\x07t\tKatze\n", "tsv", "control character"),
        ("cat\tKatze", "xml", "'entries_format' not supported"),
        ("   \n", "tsv", "'entries' not specified"),
        ("x" * 51 + "\ty", "tsv", "longer than 50 characters"),
    ],
)
def test_bad_entries_are_refused_naming_the_entry(text: str, fmt: str, problem: str) -> None:
    with pytest.raises(g.EntriesInvalid, match=problem.replace("[", r"\[").replace("(", r"\(")):
        _parse(text, fmt)


def test_entries_over_the_limits_are_refused() -> None:
    with pytest.raises(g.EntriesInvalid, match="more than 2 entries"):
        _parse("a\t1\nb\t2\nc\t3\n", max_entries=2)
    with pytest.raises(g.EntriesInvalid, match="the limit is 20 bytes"):
        _parse("a\t1\n" * 6, max_bytes=20)


def test_glossary_languages_are_base_codes() -> None:
    assert g.glossary_language("EN-US", "target_lang") == "en"
    assert g.glossary_language("zh-hant", "target_lang") == "zh"
    with pytest.raises(g.EntriesInvalid, match="'source_lang' not specified"):
        g.glossary_language("", "source_lang")
    pairs = g.language_pairs()
    assert {"source_lang": "en", "target_lang": "de"} in pairs
    assert all(p["source_lang"] != p["target_lang"] for p in pairs)
    assert len(pairs) == len({(p["source_lang"], p["target_lang"]) for p in pairs})


def test_keys_file_limits(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("# team\nkey-one limit=500_000  # ci\nkey-two\nkey-two\n")
    specs = auth.load_key_specs(str(path))
    assert specs == {"key-one": auth.KeySpec("key-one", 500_000), "key-two": auth.KeySpec("key-two")}
    assert auth.load_keys(str(path)) == {"key-one", "key-two"}
    cfg = ServeConfig.model_validate({"auth": {"keys_file": str(path)}})
    assert auth.key_limits(cfg.auth) == {auth.key_id("key-one"): 500_000, auth.key_id("key-two"): None}
    assert auth.key_id("key-one") != auth.key_id("key-two") and len(auth.key_id("x")) == 64


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("key-one limit=lots\n", "line 1: limit= takes a whole number"),
        ("key-one quota=5\n", "line 1: a key holds a space, or an option"),
        ("key-one\nkey-one limit=5\n", "line 2: a key listed before with other options"),
    ],
)
def test_bad_key_options_name_the_line_not_the_key(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "keys"
    path.write_text(text)
    with pytest.raises(ConfigError, match=problem) as err:
        auth.load_key_specs(str(path))
    assert "key-one" not in str(err.value)


def test_a_glossary_round_trips_through_json() -> None:
    made = _glossary("k", name='quote " and 中文')
    assert g.Glossary.from_json(made.to_json()) == made
