"""Every vLLM name this project relies on, held against the installed vLLM and the gpu extra's pin."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from hunyuan_serve.config import EngineConfig
from hunyuan_serve.replica.engine import internals as vi
from hunyuan_serve.replica.engine import vllm_engine
from hunyuan_serve.replica.engine.device_env import TorchFacts
from hunyuan_serve.replica.engine.internals import INTERNALS, Internal, Reader
from tests.support import vllm_wheel

LABELS = [internal.label() for internal in INTERNALS]


@pytest.fixture(scope="module")
def pinned() -> Reader:
    """The gpu extra's vllm, its source files from the cache deploy/install.sh fills (the suite never
    asks the network). Without the cache the check is skipped, saying what to run; with a cache that
    lacks a file an internal now names it fails, saying the same."""
    version = vllm_wheel.pinned_version()
    if not vllm_wheel.cached_file(version).is_file():
        pytest.skip(f"no copy of vllm {version}'s source files: fetch them with {vllm_wheel.FETCH}")
    return vllm_wheel.cached(version, {internal.path for internal in INTERNALS}).get


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


def test_a_missing_name_fails_the_engine_start_naming_the_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    gone = Internal("vllm/envs.py", "", "VLLM_RENAMED_AWAY", "key")
    monkeypatch.setattr(vi, "INTERNALS", (*INTERNALS, gone))
    # The engine's start checks once vllm is imported and its build fits the device, before it reads a
    # model (none is here to read). Stand-ins for that import and torch's facts: the real import takes
    # minutes on this machine's two cores, and the check reads the installed files, never the module.
    monkeypatch.setattr(vllm_engine, "apply_cpu_env", lambda *args: None)
    spec = importlib.util.find_spec("vllm")  # the installed one's: its files are what the check reads
    stand_in = SimpleNamespace(__spec__=spec, AsyncEngineArgs=None, AsyncLLMEngine=None)
    monkeypatch.setitem(sys.modules, "vllm", stand_in)
    facts = TorchFacts("2.13.0+cpu", None, False, "cpu", "0.32.0")
    monkeypatch.setattr(vllm_engine, "torch_facts", lambda: facts)
    engine = vllm_engine.VllmEngine(EngineConfig(), "/no/model/here", device="cpu")
    vi.require_installed.cache_clear()
    try:
        with pytest.raises(vi.VllmInternalsMissing) as refused:
            asyncio.run(engine.start())
    finally:
        vi.require_installed.cache_clear()
    assert vi.installed_version() in str(refused.value) and "VLLM_RENAMED_AWAY" in str(refused.value)


def test_the_pin_check_reads_the_cache_only_and_says_what_to_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(vllm_wheel.NotCached, match=r"no copy of vllm 9\.9's .*install\.sh"):
        vllm_wheel.cached("9.9", ["vllm/envs.py"])
    file = vllm_wheel.cached_file("9.9")
    file.parent.mkdir(parents=True)
    file.write_text(json.dumps({"vllm/envs.py": "X = 1\n"}))
    assert vllm_wheel.cached("9.9", ["vllm/envs.py"]) == {"vllm/envs.py": "X = 1\n"}
    # An internal in a file the cache was filled without: fetched again, not skipped.
    with pytest.raises(vllm_wheel.NotCached, match=r"lacks vllm/outputs\.py: fetch them again with deploy/"):
        vllm_wheel.cached("9.9", ["vllm/envs.py", "vllm/outputs.py"])
