"""The pure parts of the key check: the keys file, where a key comes from, dialects, up's open-listen rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from hunyuan_serve import auth
from hunyuan_serve.config import ConfigError, build_config
from hunyuan_serve.edge import dialects


def test_keys_file_skips_comments_and_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    path.write_text("# team keys\nkey-one\n\n  key-two  # ci\n#key-off\n")
    assert auth.load_keys(str(path)) == {"key-one", "key-two"}


@pytest.mark.parametrize(("text", "problem"), [("# none\n\n", "holds no key"), ("a b\n", "holds a space")])
def test_unusable_keys_file_is_a_config_error(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "keys"
    path.write_text(text)
    with pytest.raises(ConfigError, match=problem):
        auth.load_keys(str(path))
    with pytest.raises(ConfigError, match="cannot read"):
        auth.load_keys(str(tmp_path / "missing"))


def test_key_matches_only_a_whole_key() -> None:
    keys = frozenset({"abc123", "zzz"})
    assert auth.key_matches("abc123", keys) and auth.key_matches("zzz", keys)
    assert not any(auth.key_matches(k, keys) for k in ("abc12", "abc1234", "", "ABC123"))


@pytest.mark.parametrize(
    ("header", "key"),
    [
        ("Bearer k1", "k1"),
        ("bearer  k1 ", "k1"),
        ("DeepL-Auth-Key k2", "k2"),
        ("deepl-auth-key k2", "k2"),
        ("Basic abc", None),  # not base64 of name:password
        ("Basic d2VibGF0ZTprMw==", "k3"),  # weblate:k3, as a URL's userinfo is sent
        ("Basic d2VibGF0ZTo=", None),  # weblate: with no password
        ("Bearer", None),
        ("", None),
    ],
)
def test_header_key(header: str, key: str | None) -> None:
    assert auth.header_key(header) == key


@pytest.mark.parametrize(
    ("body", "content_type", "key"),
    [
        (b'{"q": "x", "api_key": "k"}', "application/json", "k"),
        (b'{"q": "x", "api_key": 5}', "application/json", None),
        (b"[1]", "application/json", None),
        (b"{bad", "application/json", None),
        (b"q=x&api_key=k%20", "application/x-www-form-urlencoded", "k "),
        (b"q=x", "application/x-www-form-urlencoded", None),
        (b"\xff", "application/x-www-form-urlencoded", None),
    ],
)
def test_body_key(body: bytes, content_type: str, key: str | None) -> None:
    assert auth.body_key(body, content_type) == key


@pytest.mark.parametrize(
    ("path", "dialect"),
    [
        ("/translate", "native"),
        ("/languages", "native"),
        ("/v1/chat/completions", "openai"),
        ("/v1", "openai"),
        ("/libretranslate/translate", "libretranslate"),
        ("/v2/translate", "deepl"),
        ("/immersive/translate", "immersive"),
        ("/elsewhere", "native"),
    ],
)
def test_dialect_of(path: str, dialect: str) -> None:
    assert dialects.dialect_of(path).name == dialect


def test_each_dialect_renders_its_own_error_shape() -> None:
    shapes = {d.name: d.error("rate_limited", "slow down") for d in dialects.DIALECTS}
    assert (
        shapes["native"] == shapes["immersive"] == {"error": {"code": "rate_limited", "message": "slow down"}}
    )
    assert shapes["openai"] == {
        "error": {"message": "slow down", "type": "rate_limit_error", "param": None, "code": "rate_limited"}
    }
    assert shapes["libretranslate"] == {"error": "slow down"}
    assert shapes["deepl"] == {"message": "slow down"}


def test_up_refuses_an_open_public_listen(tmp_path: Path) -> None:
    def problem(**sections: dict[str, object]) -> str | None:
        return auth.open_listen_problem(build_config(dict(sections), {}))

    assert problem() is None
    assert problem(nginx={"listen": "::1"}) is None
    assert "not loopback" in str(problem(nginx={"listen": "0.0.0.0"}))
    assert problem(nginx={"listen": "0.0.0.0"}, auth={"allow_open": True}) is None
    keys = tmp_path / "keys"
    assert "cannot read" in str(problem(nginx={"listen": "0.0.0.0"}, auth={"keys_file": str(keys)}))
    keys.write_text("k\n")
    assert problem(nginx={"listen": "0.0.0.0"}, auth={"keys_file": str(keys)}) is None


def test_keys_file_is_made_absolute_for_the_replicas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert build_config({"auth": {"keys_file": "keys.txt"}}, {}).auth.keys_file == str(tmp_path / "keys.txt")
