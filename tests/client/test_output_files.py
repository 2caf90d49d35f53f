"""`translate -o` and `--report` files: a replaced file's mode kept, the umask's for a new one, whole."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from hunyuan_serve.client.cli import main
from hunyuan_serve.client.files import write_atomic
from tests.support.scripted_service import ScriptedService


@pytest.fixture
def umask() -> Iterator[None]:
    """The process umask is put back after the test (the tests below set their own)."""
    old = os.umask(0o022)
    os.umask(old)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def translate(service: ScriptedService, tmp_path: Path) -> tuple[Path, Path]:
    src, dst, report = tmp_path / "in.txt", tmp_path / "out.txt", tmp_path / "report.json"
    src.write_text("Hello\n", encoding="utf-8")
    args = ["--url", service.url, "--to", "zh", str(src), "-o", str(dst), "--report", str(report)]
    assert main([*args, "--no-cache", "--no-progress"]) == 0
    assert dst.read_text(encoding="utf-8") == "[zh] Hello\n"
    return dst, report


@pytest.mark.usefixtures("umask")
@pytest.mark.parametrize(("mask", "expected"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)], ids=oct)
def test_new_outputs_follow_the_umask(
    service: ScriptedService, tmp_path: Path, mask: int, expected: int
) -> None:
    os.umask(mask)
    dst, report = translate(service, tmp_path)
    assert (oct(mode(dst)), oct(mode(report))) == (oct(expected), oct(expected))


@pytest.mark.usefixtures("umask")
@pytest.mark.parametrize("kept", [0o644, 0o640, 0o604], ids=oct)
def test_a_replaced_output_keeps_its_mode(service: ScriptedService, tmp_path: Path, kept: int) -> None:
    os.umask(0o077)  # a umask that would give 0600: the existing file's mode wins over it
    for name in ("out.txt", "report.json"):
        (tmp_path / name).write_text("old\n", encoding="utf-8")
        (tmp_path / name).chmod(kept)
    dst, report = translate(service, tmp_path)
    assert (oct(mode(dst)), oct(mode(report))) == (oct(kept), oct(kept))


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old\n", encoding="utf-8")
    with pytest.raises(TypeError):  # the write fails midway, as a full disk would
        write_atomic(target, "not bytes")  # type: ignore[arg-type]
    assert target.read_text(encoding="utf-8") == "old\n" and sorted(tmp_path.iterdir()) == [target]
    write_atomic(target, b"new\n")
    assert target.read_text(encoding="utf-8") == "new\n" and sorted(tmp_path.iterdir()) == [target]
