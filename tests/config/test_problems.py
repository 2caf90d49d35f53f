"""Config refusals a new user meets: Redis URLs, a relative run dir, YAML and validation errors, one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from hunyuan_serve.config import ConfigError, build_config, load_config_file, redis_url_problem

REDIS_URLS: list[tuple[str, str | None]] = [
    ("redis://10.0.0.9:6379/0", None),
    ("redis://:secret@10.0.0.9:6379/0", None),
    ("rediss://cache.internal", None),
    ("unix:///run/redis.sock", None),
    ("http://10.0.0.9:6379", "starts with redis://"),
    ("redis://", "names its host"),
    ("redis://:6379/0", "names its host"),
    ("redis://h:notaport/0", "port is not a number from 1 to 65535"),
    ("redis://h:99999/0", "port is not a number from 1 to 65535"),
    ("redis://h:0/0", "port is not a number from 1 to 65535"),
    ("redis://h:6379/abc", "database 'abc' is not a number"),
    ("unix://", "names its socket"),
]


@pytest.mark.parametrize(("url", "problem"), REDIS_URLS)
def test_a_redis_url_is_checked_before_every_request_would_miss(url: str, problem: str | None) -> None:
    found = redis_url_problem(url)
    assert (found is None) if problem is None else (problem in str(found)), found
    if problem is not None:
        with pytest.raises(ConfigError, match=r"replica\.cache_redis_url: ") as err:
            build_config({"replica": {"cache_redis_url": url}}, {})
        assert "Value error" not in str(err.value)


def test_a_password_in_a_bad_redis_url_is_not_quoted_back() -> None:
    assert "hunter2" not in str(redis_url_problem("redis://:hunter2@h:notaport/0"))


def test_a_check_across_keys_reads_as_its_section_without_pydantic_words() -> None:
    both = {"replica": {"cache_path": "/tmp/c.sqlite", "cache_redis_url": "redis://h:6379/0"}}
    with pytest.raises(ConfigError) as err:
        build_config(both, {})
    assert str(err.value) == (
        "invalid config: replica: set one shared cache: cache_path (one host) or cache_redis_url (all hosts)"
    )


def test_a_relative_run_dir_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Nginx reads `-p rel/nginx -c rel/nginx/nginx.conf` as rel/nginx/rel/nginx/nginx.conf and refuses it.
    monkeypatch.chdir(tmp_path)
    assert build_config({}, {"run_dir": "rel/dir"}).run_dir == str(tmp_path / "rel" / "dir")
    assert build_config({}, {}).run_dir == ""


def test_invalid_yaml_is_one_line_with_where(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("replica:\n  host: [a, b\n")
    with pytest.raises(ConfigError) as err:
        load_config_file(bad)
    assert "\n" not in str(err.value) and str(err.value).startswith(f"config {bad} is not valid YAML: ")
    assert "at line 3, column 1" in str(err.value)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"replica": {"max_token": 5}}, "replica.max_token: unknown key (did you mean max_tokens?)"),
        ({"nginx": {"prot": 8080}}, "nginx.prot: unknown key (did you mean port?)"),
        ({"auht": {}}, "auht: unknown key (did you mean auth?)"),
        ({"pools": [{"name": "a", "modle": "m"}]}, "pools[0].modle: unknown key (did you mean model?)"),
        (
            {"pools": [{"name": "a", "replica": {"max_tokns": 5}}]},
            "pools.a.replica.max_tokns: unknown key (did you mean max_tokens?)",
        ),
        ({"nginx": {"frobnicate": 1}}, "nginx.frobnicate: unknown key"),  # nothing close: no guess
        (
            {"replica": {"document_front_url": "http://127.0.0.1:8080"}},
            "replica.document_front_url: no longer a setting: a replica's document jobs call its translation "
            "core in-process, not a front over HTTP; delete this key",
        ),
    ],
)
def test_an_unknown_key_is_named_with_the_key_it_likely_meant(data: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_config(data, {})
    assert str(err.value).endswith(problem) and "Extra inputs" not in str(err.value)


def test_a_mistyped_flag_is_refused_with_the_flag_it_likely_meant(capsys: pytest.CaptureFixture[str]) -> None:
    from hunyuan_serve.cli import main

    for typed, meant in [
        ("--prot", "--port"),
        ("--replica-max-tokens", "--max-tokens"),
        ("--tls-hots", "--tls-host"),
    ]:
        with pytest.raises(SystemExit) as exited:
            main(["up", typed, "1"])
        assert exited.value.code == 2
        assert f"unrecognized arguments: {typed} 1; {typed}: did you mean {meant}?" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["config", "--frobnicate", "1"])
    assert capsys.readouterr().err.rstrip().endswith("unrecognized arguments: --frobnicate 1")
