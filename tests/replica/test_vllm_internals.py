"""Every vLLM name this project relies on, held against the installed vLLM and the gpu extra's pin."""

from __future__ import annotations

import urllib.error

import pytest

from hunyuan_serve.replica import vllm_internals as vi
from hunyuan_serve.replica.vllm_internals import INTERNALS, Internal, Reader
from tests.support import vllm_wheel

LABELS = [internal.label() for internal in INTERNALS]


@pytest.fixture(scope="module")
def pinned() -> Reader:
    """The gpu extra's vllm, its source files read from the wheel on PyPI by byte ranges (about 1 MB of
    a 336 MB wheel, 2 s) and then from the cache."""
    version = vllm_wheel.pinned_version()
    try:
        texts = vllm_wheel.sources(version, {internal.path for internal in INTERNALS})
    except (urllib.error.URLError, TimeoutError) as err:
        pytest.skip(
            f"PyPI unreachable ({err}) and no copy of vllm {version}'s files in {vllm_wheel.cache_dir()}"
        )
    return texts.get


@pytest.mark.parametrize("internal", INTERNALS, ids=LABELS)
def test_the_gpu_pin_has_it(pinned: Reader, internal: Internal) -> None:
    [(_, problem)] = vi.problems_in(pinned, [internal])
    assert problem == "", f"vllm {vllm_wheel.pinned_version()}: {internal.label()}: {problem}"


@pytest.mark.parametrize("internal", INTERNALS, ids=LABELS)
def test_the_installed_vllm_has_it(internal: Internal) -> None:
    [(_, problem)] = vi.problems_in(vi.installed_reader(), [internal])
    assert problem == "", f"{vi.installed_version()}: {internal.label()}: {problem}"


def test_each_internal_is_listed_once() -> None:
    assert len(set(LABELS)) == len(LABELS)


SOURCE = """
environment_variables = {"VLLM_A": lambda: 1}

class Base:
    kept: int = 0
    def step(self, request, *, budget=4): ...

class Child(Base):
    def __init__(self, config):
        self.config = config
    def run(self, a, b, /, c=1): ...
"""

# (the internal, what the check says of it against SOURCE)
CASES = [
    (Internal("m.py", "Child", "config", "attr"), ""),  # self.X = ... in a method
    (Internal("m.py", "Child", "kept", "attr"), ""),  # a field of a base in the same module
    (Internal("m.py", "Child", "gone", "attr"), "no attribute gone"),
    (Internal("m.py", "Child", "step", "method", ("request",)), ""),
    (Internal("m.py", "Child", "step", "method", ("request", "priority")), "takes no priority"),
    (Internal("m.py", "Child", "run", "method", ("a",)), "requires b too"),
    (Internal("m.py", "Nobody", "", "class"), "no class Nobody"),
    (Internal("m.py", "", "VLLM_A", "key"), ""),
    (Internal("m.py", "", "VLLM_B", "key"), "no key 'VLLM_B'"),
    (Internal("other.py", "", "x", "attr"), "no module other.py"),
]


@pytest.mark.parametrize(("internal", "problem"), CASES, ids=[c[0].label() for c in CASES])
def test_the_check_finds_what_a_vllm_lacks(internal: Internal, problem: str) -> None:
    assert vi.problems_in(lambda path: SOURCE if path == "m.py" else None, [internal]) == [
        (internal, problem)
    ]


def test_a_missing_name_fails_the_start_naming_the_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    gone = Internal("vllm/envs.py", "", "VLLM_RENAMED_AWAY", "key")
    monkeypatch.setattr(vi, "INTERNALS", (*INTERNALS, gone))
    vi.require_installed.cache_clear()
    try:
        with pytest.raises(vi.VllmInternalsMissing) as refused:
            vi.require_installed.__wrapped__()
    finally:
        vi.require_installed.cache_clear()
    assert vi.installed_version() in str(refused.value) and "VLLM_RENAMED_AWAY" in str(refused.value)
