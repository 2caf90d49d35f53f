"""A secret file readable by others is named with its mode and the fix; an owner-only one passes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hunyuan_serve.private_files import exposed_problem


@pytest.mark.parametrize(
    ("mode", "exposed"),
    [(0o600, False), (0o400, False), (0o640, True), (0o604, True), (0o644, True), (0o620, True)],
)
def test_a_secret_open_to_others_is_refused_with_the_fix(tmp_path: Path, mode: int, exposed: bool) -> None:
    secret = tmp_path / "keys.txt"
    secret.write_text("k\n", encoding="utf-8")
    secret.chmod(mode)
    problem = exposed_problem(secret, "keys file")
    if exposed:
        assert problem is not None
        assert f"{mode:04o}" in problem
        assert f"chmod 600 {secret}" in problem
        assert problem.startswith("keys file ")
    else:
        assert problem is None


def test_a_missing_file_is_left_to_its_reader(tmp_path: Path) -> None:
    assert exposed_problem(tmp_path / "absent", "keys file") is None


def test_a_secret_another_user_owns_is_the_mounts_to_guard(tmp_path: Path) -> None:
    """A container's or a Kubernetes Secret volume mounts the file as root's, 0644: chmod would lock the
    service out, so it is not refused; the same mode on the service's own file is."""
    if os.getuid() != 0:
        pytest.skip("chown to another user needs root")
    secret = tmp_path / "tls.key"
    secret.write_text("k\n", encoding="utf-8")
    secret.chmod(0o644)
    assert exposed_problem(secret, "nginx.tls_key") is not None
    os.chown(secret, 65534, 65534)
    assert exposed_problem(secret, "nginx.tls_key") is None
