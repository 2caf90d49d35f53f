"""Table tests of the config model: merging, CLI flags, and errors that name the bad key."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from hunyuan_serve.config import (
    ConfigError,
    ServeConfig,
    add_config_flags,
    build_config,
    config_from_args,
    config_to_yaml,
    load_config_file,
    parse_gpus,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0,1,2", (0, 1, 2)), (" 3 ", (3,)), ("", None), ("all", None), ("0, 1", (0, 1))],
)
def test_parse_gpus(text: str, expected: tuple[int, ...] | None) -> None:
    assert parse_gpus(text) == expected


@pytest.mark.parametrize("text", ["a,b", "0,0", "-1", "1;2"])
def test_parse_gpus_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="gpus"):
        parse_gpus(text)


@pytest.mark.parametrize(
    ("data", "overrides", "fragment"),
    [
        ({"nginx": {"prot": 1}}, {}, "nginx.prot"),
        ({"supervisor": {"probe_timeout_s": -1}}, {}, "supervisor.probe_timeout_s"),
        ({}, {"engine.quantization": "experts_int8"}, "experts_int8"),
        ({"gpus": "0,1,2"}, {"engine.tensor_parallel_size": 2}, "groups of 2"),
        ({"gpus": "0,1"}, {"engine.device": "cpu"}, "with engine.device: cpu"),
        ({"replicas": 0}, {}, "replicas"),
    ],
)
def test_errors_name_the_key(data: dict[str, object], overrides: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError, match="invalid config") as info:
        build_config(data, overrides)
    assert fragment in str(info.value)


def test_overrides_win_over_file_and_keep_siblings() -> None:
    cfg = build_config({"nginx": {"port": 9000, "keepalive": 8}}, {"nginx.port": "9100", "gpus": "0,1"})
    assert cfg.nginx.port == 9100
    assert cfg.nginx.keepalive == 8
    assert cfg.gpus == (0, 1)


def test_flags_are_generated_from_the_model(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_config_flags(parser, ["top", "engine", "nginx", "supervisor"])
    config_file = tmp_path / "serve.yaml"
    config_file.write_text("engine:\n  dtype: float32\nsupervisor:\n  unhealthy_threshold: 7\n")
    args = parser.parse_args(
        [
            "--config",
            str(config_file),
            "--nginx-port",
            "9200",
            "--enforce-eager",
            "--probe-interval-s",
            "0.25",
        ]
    )
    cfg = config_from_args(args)
    assert (cfg.nginx.port, cfg.engine.enforce_eager, cfg.engine.dtype) == (9200, True, "float32")
    assert (cfg.supervisor.probe_interval_s, cfg.supervisor.unhealthy_threshold) == (0.25, 7)


def test_yaml_round_trip(tmp_path: Path) -> None:
    cfg = build_config({"gpus": [0, 1], "engine": {"model": "/models/x"}}, {})
    path = tmp_path / "effective.yaml"
    path.write_text(config_to_yaml(cfg))
    assert build_config(load_config_file(path), {}) == cfg


@pytest.mark.parametrize(("content", "fragment"), [("- a\n- b\n", "mapping"), ("a: [\n", "not valid YAML")])
def test_bad_files(tmp_path: Path, content: str, fragment: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=fragment):
        load_config_file(path)


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.yaml"):
        load_config_file(tmp_path / "nope.yaml")


def test_defaults_validate() -> None:
    assert ServeConfig().nginx.port == 8080
