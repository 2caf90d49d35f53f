"""`render k8s --out`: which directories it writes into, and the options it refuses, each named."""

from __future__ import annotations

from pathlib import Path

import pytest

from hunyuan_serve.cli import main
from tests.support.kube import build, of_kind, render

CPU = ("--replicas", "3", "--model", "/models/m", "--allow-open")


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    return capsys.readouterr().err


def test_a_directory_holding_other_files_is_refused_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    err = _refused(capsys, "render", "k8s", *CPU, "--out", str(tmp_path))
    assert "is not empty and holds no previous render" in err
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_rendering_again_replaces_a_previous_render(tmp_path: Path) -> None:
    base = render(tmp_path / "base", *CPU)
    assert (base / "config/replica-2.yaml").exists()
    render(base, "--replicas", "1", "--model", "/models/m", "--allow-open")
    assert not (base / "config/replica-2.yaml").exists() and (base / "config/replica-0.yaml").exists()
    names = sorted(of_kind(build(base), "Deployment"))
    assert names == ["hunyuan-serve-front", "hunyuan-serve-replica-0"]


def test_a_stray_file_in_a_previous_render_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = render(tmp_path / "base", *CPU)
    (base / "web" / "extra.css").write_text("x")
    before = sorted(p.relative_to(base).as_posix() for p in base.rglob("*"))
    err = _refused(
        capsys, "render", "k8s", "--replicas", "1", "--model", "/m", "--allow-open", "--out", str(base)
    )
    assert "holds files not from a render: web/extra.css" in err
    assert sorted(p.relative_to(base).as_posix() for p in base.rglob("*")) == before


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["render", "nginx", "--out", "OUT"], "options of render k8s only"),
        (["render", "k8s", *CPU], "render k8s needs --out DIR"),
        (
            ["render", "k8s", "--replicas", "2", "--model", "/m", "--out", "OUT"],
            "--allow-open to serve it open",
        ),
        (["render", "k8s", "--allow-open", "--out", "OUT"], "render k8s on CPU needs --model"),
        (
            ["render", "k8s", *CPU, "--keys-file", "/etc/hunyuan-serve/replicas/k", "--out", "OUT"],
            "auth.keys_file",
        ),
        (["render", "k8s", *CPU, "--namespace", "Team_A", "--out", "OUT"], "'Team_A' is not a DNS label"),
        (["render", "k8s", *CPU, "--peer-secret-file", "/s", "--out", "OUT"], "auth.peer_secret_file is for"),
        (
            ["render", "k8s", "--gpus", "0", "--revision", "v1", "--allow-open", "--out", "OUT"],
            "engine.revision",
        ),
        (
            ["render", "k8s", *CPU, "--pod-memory", "16GB", "--out", "OUT"],
            "--pod-memory: '16GB' is not valid",
        ),
    ],
)
def test_bad_options_are_refused_naming_them(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    err = _refused(capsys, *[str(out) if a == "OUT" else a for a in argv])
    assert message in err
    assert not out.exists()
