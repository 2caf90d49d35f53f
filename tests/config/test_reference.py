"""Table tests of the settings reference's pieces: types, bounds and defaults as a reader reads them,
the flags read from the real parser, and a table's rows."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import BaseModel, Field

from hunyuan_serve.config import Section, ServeConfig, default_run_dir
from hunyuan_serve.config.reference import (
    ENV_VARS,
    Part,
    bounds_text,
    config_flags,
    default_text,
    parts,
    render,
    rows,
    section_parts,
    type_text,
)


class Example(BaseModel):
    """A model of every kind of field the reference writes."""

    port: int = Field(8080, ge=1, le=65535, description="A port | with a bar.")
    share: float = Field(0.25, gt=0, lt=1, description="A share.")
    mode: Literal["auto", "cpu"] = Field("auto", description="A mode.")
    name: str | None = Field(None, description="Unset means none.")
    on: bool = Field(False, description="A switch.")
    empty: str = Field("", description="Empty.")
    items: tuple[str, ...] = Field(("a", "b"), description="A list.")
    extra: dict[str, int] = Field(default_factory=dict, description="A mapping.")
    needed: str = Field(description="Required.")


FIELDS = Example.model_fields


@pytest.mark.parametrize(
    ("name", "kind", "bounds", "default"),
    [
        ("port", "int", "≥ 1, ≤ 65535", "8080"),
        ("share", "float", "> 0, < 1", "0.25"),
        ("mode", "auto | cpu", "", "auto"),
        ("name", "str | None", "", "unset"),
        ("on", "bool", "", "false"),
        ("empty", "str", "", '""'),
        ("items", "list[str]", "", "[a, b]"),
        ("extra", "mapping", "", "{}"),
        ("needed", "str", "", "required"),
    ],
)
def test_a_field_reads_as_its_type_bounds_and_default(
    name: str, kind: str, bounds: str, default: str
) -> None:
    info = FIELDS[name]
    assert (type_text(info.annotation), bounds_text(info), default_text(info)) == (kind, bounds, default)


def test_a_row_holds_the_key_flag_and_escaped_description() -> None:
    table = list(rows(Part("Example", "", Example, "x.", {"x.port": "--x-port"})))
    assert table[:2] == ["| Key | Type | Default | Flag | Description |", "|---|---|---|---|---|"]
    assert table[2] == r"| `x.port` | int (≥ 1, ≤ 65535) | `8080` | `--x-port` | A port \| with a bar. |"
    assert table[3].startswith("| `x.share` | float (> 0, < 1) | `0.25` |  | ")
    assert len(table) == 2 + len(FIELDS)


@pytest.mark.parametrize(
    ("key", "flag"),
    [
        ("engine.model", "--model"),
        ("nginx.port", "--nginx-port"),
        ("replica.port", "--replica-port"),
        ("nginx.read_timeout_s", "--read-timeout-s"),
        ("base_port", "--base-port"),
        ("pools", "--pool NAME=MODEL[:replicas=N][:gpus=0,1]"),
    ],
)
def test_the_flags_are_those_the_parser_takes(key: str, flag: str) -> None:
    assert config_flags()[key] == flag


def _keys(model: type[BaseModel], prefix: str) -> list[tuple[str, bool]]:
    """(dotted key, whether it is a section of its own) of every field under model, sections opened."""
    out = []
    for name, info in model.model_fields.items():
        inner = info.annotation
        nested = isinstance(inner, type) and issubclass(inner, BaseModel)
        out.append((prefix + name, nested))
        if nested:
            out += _keys(inner, f"{prefix}{name}.")
    return out


def test_every_field_of_every_section_has_a_row_and_each_flag_is_named() -> None:
    page, flags = render(parts()), config_flags()
    for key, nested in _keys(ServeConfig, ""):
        if nested:
            assert f"## {key} section" in page
            continue
        assert f"| `{key}` |" in page
        # up's parser takes a flag for every key of the top level and its sections (one level down).
        if key.count(".") <= 1:
            assert f"`{flags[key]}`" in page


def test_a_section_inside_a_section_gets_a_table_of_its_own() -> None:
    class Inner(Section):
        """The inner one."""

        depth: int = Field(1, description="How deep.")

    class Outer(Section):
        inner: Inner = Field(default_factory=Inner)
        width: int = Field(2, description="How wide.")

    (part,) = section_parts(Outer, "outer.", {})
    assert (part.title, part.intro, part.prefix) == ("outer.inner section", "The inner one.", "outer.inner.")
    assert list(rows(part))[2].startswith("| `outer.inner.depth` | int | `1` |")
    assert not any("`outer.inner`" in row for row in rows(Part("Outer", "", Outer, "outer.")))


def test_each_environment_variable_named_is_read_for_its_setting() -> None:
    # The reference says run_dir falls back to the variable: default_run_dir must read it.
    assert ENV_VARS == {"run_dir": "HUNYUAN_SERVE_RUN_DIR"}
    assert str(default_run_dir({"HUNYUAN_SERVE_RUN_DIR": "/srv/x", "XDG_RUNTIME_DIR": "/run"})) == "/srv/x"


def test_the_page_has_a_contents_line_linking_each_table() -> None:
    page = render([Part("Example one", "Intro.", Example)], header="# T\n")
    assert page.startswith("# T\n\n[Example one](#example-one)\n\n## Example one\n\nIntro.\n\n| Key |")
