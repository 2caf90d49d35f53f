"""No page repeats a default by hand: a YAML example sets no key to its default, and no prose writes a
key's default beside it; both belong to docs/settings.md, which is generated from the config."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from hunyuan_serve.config import GatewayConfig, ServeConfig
from hunyuan_serve.config.reference import default_text
from tests.support.readme_examples import PAGES, REPO

YAML_FENCE = re.compile(r"^```yaml\n(.*?)^```", re.M | re.S)
# `replica.max_in_flight` (256 …, `nginx.port`, 8080 …: a key and the value written right after it.
PROSE = re.compile(r"`([a-z_]+(?:\.[a-z_]+)+)`,? \(?([^\s),;]+)")
# A backticked span, and a dotted key inside it (`Retry-After: auth.bad_key_retry_after_s` names one).
SPAN = re.compile(r"`([^`\n]+)`")
NAMED_KEY = re.compile(r"(?<![\w.])((?:[a-z_]+\.)+[a-z_]+)(?![\w.])")
# How far past a key its default is looked for; the next backticked span, a sentence's or a
# paragraph's end stop it sooner.
NEAR_CHARS = 80
NEAR_END = re.compile(r"`|\.\s|\n\s*\n")
# A figure written as a key's default: (20), (60 s), (default 20), default: 20, defaults to 20,
# 20 by default.
NEAR_DEFAULT = (
    re.compile(r"\(\s*(?:default:?\s+|the default,?\s+)?(`?[\w.\-\"']+`?)(?:\s*[a-zA-Z%]{1,3})?\s*\)"),
    re.compile(r"\bdefaults?(?:\s+to|\s+is|:)?\s+(`?[\w.\-\"']+`?)"),
    re.compile(r"(`?[\w.\-\"']+`?)(?:\s*[a-zA-Z%]{1,3})?\s+by default\b"),
)
# A backticked value the prose calls the default: `flag` is the default, `flag` (default),
# `flag`, the default.
CALLED_DEFAULT = re.compile(r"`([^`\n]+)`\s*(?:\((?:the )?default\)|,? is the default\b|, the default\b)")
SECTIONS: dict[str, type[BaseModel]] = {
    name: info.annotation
    for name, info in ServeConfig.model_fields.items()
    if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel)
} | {"gateway": GatewayConfig}


def _field(key: str) -> Any:
    section, _, name = key.rpartition(".")
    model: type[BaseModel] | None = SECTIONS.get(section) if section else ServeConfig
    return model.model_fields.get(name) if model is not None else None


def _is_default(key: str, value: Any) -> bool:
    info = _field(key)
    return (
        info is not None and not info.is_required() and value == info.get_default(call_default_factory=True)
    )


def restated(data: Any, where: str) -> Iterator[str]:
    """The keys of a parsed YAML example (a config or an inventory) set to their defaults."""
    for key, value in (data or {}).items() if isinstance(data, dict) else ():
        if key in SECTIONS and isinstance(value, dict):
            pairs = [(f"{key}.{name}", inner) for name, inner in value.items()]
        else:
            pairs = [(key, value)]
        yield from (f"{where}: {dotted}: {inner!r}" for dotted, inner in pairs if _is_default(dotted, inner))


def restated_in_prose(text: str, where: str) -> Iterator[str]:
    """The keys the prose writes with their default value right after them, e.g. `nginx.port` (8080)."""
    for key, value in PROSE.findall(YAML_FENCE.sub("", text)):
        info = _field(key)
        if info is not None and not info.is_required() and value.strip("`") == default_text(info):
            yield f"{where}: `{key}` {value}"


def _same(written: str, info: Any) -> bool:
    """Whether a figure the prose writes is the field's default: 60 and 60.0 alike, text as YAML has it."""
    default = default_text(info)
    written = written.strip("`'\"")
    try:
        return float(written) == float(default)
    except ValueError:
        return written == default


def _line(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def restated_near_a_key(text: str, where: str) -> Iterator[str]:
    """A key's default written a few words after the key, in its sentence and before the next backticked
    span: `auth.bad_key_limit` wrong keys (default 20), `auth.bad_key_window_s` (60 s)."""
    prose = YAML_FENCE.sub(lambda block: "\n" * block.group(0).count("\n"), text)
    for m in SPAN.finditer(prose):
        near = NEAR_END.split(prose[m.end() : m.end() + NEAR_CHARS], 1)[0]
        for key in NAMED_KEY.findall(m.group(1)):
            info = _field(key)
            if info is None or info.is_required():
                continue
            said = next(
                (v for pattern in NEAR_DEFAULT for v in pattern.findall(near) if _same(v, info)), None
            )
            if said is not None:
                yield f"{where}:{_line(prose, m.start())}: `{key}` ... {said}"


def value_called_the_default(text: str, where: str) -> Iterator[str]:
    """A value the prose calls the default (`flag` is the default) of a key the page names."""
    prose = YAML_FENCE.sub(lambda block: "\n" * block.group(0).count("\n"), text)
    named = {key for span in SPAN.findall(prose) for key in NAMED_KEY.findall(span) if _field(key)}
    for m in CALLED_DEFAULT.finditer(prose):
        keys = sorted(
            key for key in named if not _field(key).is_required() and _same(m.group(1), _field(key))
        )
        if keys:
            yield f"{where}:{_line(prose, m.start())}: `{m.group(1)}` called the default of {', '.join(keys)}"


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(REPO).as_posix() for p in PAGES])
def test_no_page_repeats_a_default_by_hand(page: Path) -> None:
    if page.name == "settings.md":
        pytest.skip("the generated reference is where the defaults are")
    text = page.read_text(encoding="utf-8")
    found = [gap for block in YAML_FENCE.findall(text) for gap in restated(yaml.safe_load(block), page.name)]
    found += restated_in_prose(text, page.name)
    found += restated_near_a_key(text, page.name)
    found += value_called_the_default(text, page.name)
    assert found == [], "link docs/settings.md instead"


def test_a_restated_default_is_found_in_an_example_and_in_prose() -> None:
    data = yaml.safe_load("nginx: {port: 8080, listen: 0.0.0.0}\nreplicas: 2\nengine: {model: m}\n")
    assert list(restated(data, "x")) == ["x: nginx.port: 8080"]
    assert list(restated({"replicas": 1, "base_port": 9000}, "x")) == ["x: replicas: 1"]
    text = "Nginx listens on `nginx.port` (8080), `nginx.listen` (the loopback) and `engine.model` m."
    assert list(restated_in_prose(text, "x")) == ["x: `nginx.port` 8080"]


def test_a_default_is_found_a_few_words_past_its_key_and_where_a_value_is_called_it() -> None:
    text = (
        "After `auth.bad_key_limit` wrong keys (default\n20) from one address in `auth.bad_key_window_s`\n"
        "(60 s), a `429` with `Retry-After: auth.bad_key_retry_after_s` (60 s) for that long.\n\n"
        "`nginx.port` (9000) is an example; `nginx.port`, set to 8080 by default.\n\n"
        "The pool's `replica.qa` decides.\n\n`flag` is the default; `retry` is not.\n"
    )
    assert list(restated_near_a_key(text, "x")) == [
        "x:1: `auth.bad_key_limit` ... 20",
        "x:2: `auth.bad_key_window_s` ... 60",
        "x:3: `auth.bad_key_retry_after_s` ... 60",
        "x:5: `nginx.port` ... 8080",
    ]
    assert list(value_called_the_default(text, "x")) == ["x:9: `flag` called the default of replica.qa"]
    assert list(value_called_the_default("`flag` is the default of nothing named here.", "x")) == []
