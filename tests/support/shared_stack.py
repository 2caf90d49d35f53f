"""Tiny-model `up` stacks that many modules share: each stopped after its last user.

Started at the session's start: `shared_stack`, open, for the read-only API modules; `keyed_stack`, two
replicas with a keys file of every key its modules use (each module its own keys, so quotas and
glossaries stay apart). Started by their first user, after those two have stopped: `restart_stack`
(tests/support/restart_stack.py), which its modules kill, stop and reload replicas of, and
`pools_stack` (tests/support/pools_stack.py), two pools that its modules reload and kill one of; each
user leaves the stack with every replica ready again.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest

from tests.support.stacks import free_ports, replicas_ready, spawn, stop, tiny_up, wait_until

FIXTURE = "shared_stack"
KEYED_FIXTURE = "keyed_stack"
RESTART_FIXTURE = "restart_stack"
POOLS_FIXTURE = "pools_stack"
AHEAD_FIXTURES = (FIXTURE, KEYED_FIXTURE)  # launched at the session's start
SHARED_FIXTURES = (*AHEAD_FIXTURES, RESTART_FIXTURE, POOLS_FIXTURE)
READY_TIMEOUT_S = 600.0  # engines starting on two shared cores beside the light tests, first compile included
MAX_TOKENS = 12
KEYED_REPLICAS = 2
DOCUMENT_MAX_BYTES = 64 * 1024  # the keyed stack's replica.document_max_bytes
# Modules whose tests may run in any order against any stack: they start nothing heavy themselves.
HEAVY_MARKERS = ("engine", "e2e", "demo")


@dataclass(frozen=True)
class Key:
    secret: str
    limit: int | None = None  # characters, as in a keys file's `limit=N`
    priority: str | None = None  # its requests' default class, as a keys file's `priority=`

    def quota(self) -> int:
        assert self.limit is not None, f"{self.secret} has no limit"
        return self.limit

    def line(self) -> str:
        options = [*([f"limit={self.limit}"] if self.limit is not None else [])]
        options += [f"priority={self.priority}"] if self.priority else []
        return " ".join([self.secret, *options])


# The keyed stack's keys file: its modules take theirs from here by name.
KEYS = {
    "keys": Key("sk-stack-test-0f9e8d7c6b5a"),
    "keys-second": Key("sk-second-key"),
    "documents-owner": Key("sk-docs-owner-4b3a2918f7"),
    "documents-other": Key("sk-docs-other-7c6d5e4f3a", limit=20),
    "deepl-owner": Key("sk-deepl-owner-5f4e3d2c1b"),
    "deepl-limited": Key("sk-deepl-limited-9a8b7c6d", limit=40),
    "formats": Key("sk-formats-2a1b0c9d8e"),
    "weblate": Key("sk-weblate-6e5d4c3b2a"),
    # Tolgee's HIGH (interactive) and LOW (batch) priority providers of one name, each with its key.
    "tolgee-high": Key("sk-tolgee-high-3e2d1c0b9a"),
    "tolgee-low": Key("sk-tolgee-low-8f7e6d5c4b", priority="bulk"),
    "subtitleedit": Key("sk-subtitleedit-1a2b3c4d5e"),
    "memory": Key("sk-memory-6d5c4b3a2f1e"),
    "memory-other": Key("sk-memory-other-0a9b8c7d"),
    "long-texts": Key("sk-long-texts-3c2b1a0f9e"),
}


class Stoppable(Protocol):
    def stop(self) -> None: ...


@dataclass
class SharedStack:
    """`up` on a tiny checkpoint, started by launch(); its replicas listen on base_port + i."""

    url: str
    log: Path
    run_dir: Path
    base_port: int
    replicas: int
    proc: subprocess.Popen[bytes]

    def wait_ready(self) -> None:
        ready = replicas_ready(self.url, self.replicas)
        wait_until(self.proc, self.log, ready, READY_TIMEOUT_S, f"{self.replicas} replica(s) ready")

    def stop(self) -> None:
        stop(self.proc)


def _launch(
    cmd: list[str], work: Path, port: int, base: int, replicas: int, env: dict[str, str]
) -> SharedStack:
    log = work / "up.log"
    return SharedStack(f"http://127.0.0.1:{port}", log, work / "run", base, replicas, spawn(cmd, log, env))


def launch(model: Path, work: Path) -> SharedStack:
    """The open stack, EOS ignored (outputs of MAX_TOKENS tokens); not waited for: the engine warms up
    while the tests that need none run."""
    port, base = free_ports(2)
    cmd = tiny_up(model, work / "run", port, base, max_tokens=MAX_TOKENS)
    return _launch(cmd, work, port, base, 1, {**os.environ, "HUNYUAN_SERVE_TEST_IGNORE_EOS": "1"})


def launch_keyed(model: Path, work: Path) -> SharedStack:
    """The keyed stack on a tiny hy-mt1.5 checkpoint (its terminology and formatted prompts), documents
    polled fast and capped at DOCUMENT_MAX_BYTES; not waited for."""
    keys = work / "keys.txt"  # the name the keys module looks for in the replicas' configs
    keys.write_text("# the keyed stack's keys\n" + "".join(key.line() + "\n" for key in KEYS.values()))
    config = work / "config.yaml"
    config.write_text(f"replica:\n  document_max_bytes: {DOCUMENT_MAX_BYTES}\n  document_poll_s: 0.2\n")
    port, base, _ = free_ports(KEYED_REPLICAS + 1)
    cmd = tiny_up(model, work / "run", port, base, max_tokens=MAX_TOKENS)
    cmd[cmd.index("--replicas") + 1] = str(KEYED_REPLICAS)
    cmd += ["--keys-file", str(keys), "--config", str(config)]
    return _launch(cmd, work, port, base, KEYED_REPLICAS, dict(os.environ))


def asks(item: pytest.Item, fixture: str) -> bool:
    return fixture in getattr(item, "fixturenames", ())


def is_heavy(item: pytest.Item) -> bool:
    """Whether the item starts engines, a real `up` or the demo model."""
    return any(item.get_closest_marker(marker) for marker in HEAVY_MARKERS)


def last_users(items: Sequence[pytest.Item], fixtures: Sequence[str]) -> dict[str, str]:
    """fixture -> nodeid of the last item (in run order) that uses it: its stack can stop after that one.

    A fixture no item asks for is absent: its stack is not launched at all.
    """
    return {fixture: item.nodeid for item in items for fixture in fixtures if asks(item, fixture)}


def module_of(node: pytest.Item | pytest.TestReport) -> str:
    """The path of the module a test (or a test's report) belongs to, as its node id starts."""
    return node.nodeid.split("::")[0]


def light_modules_first(
    items: list[pytest.Item], shared: Sequence[str] = SHARED_FIXTURES
) -> list[pytest.Item]:
    """Modules with no engine/e2e/demo test first, then the heavy modules that use a shared stack (those
    of the stacks started ahead, then each other stack's users together, in `shared`'s order), then
    the rest; each module's tests kept together, in their order.

    Stable within each part, so module fixtures are still built once; the light part gives the
    stacks started ahead time to start beside it, and their users come next so that they stop
    before the next shared stack starts, and before the tests that start engines of their own.
    """
    heavy_modules = {module_of(item) for item in items if is_heavy(item)}
    rank: dict[str, int] = {}
    for item in items:
        asked = [i for i, fixture in enumerate(shared) if asks(item, fixture)]
        if asked:
            first = 0 if any(shared[i] in AHEAD_FIXTURES for i in asked) else min(asked)
            rank[module_of(item)] = min(rank.get(module_of(item), first), first)
    light = [item for item in items if module_of(item) not in heavy_modules]
    heavy = [item for item in items if module_of(item) in heavy_modules]
    return light + sorted(heavy, key=lambda item: rank.get(module_of(item), len(shared)))
