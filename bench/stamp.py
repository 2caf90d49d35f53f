"""What every result is stamped with: the commit, the command line, the hardware and the time."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
STAMP_KEYS = ("commit", "dirty", "command", "hardware", "date")


def _git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def commit() -> tuple[str, bool]:
    """The checkout's commit, and whether tracked files differ from it (the figures are then not its)."""
    head = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    return head, bool(_git("status", "--porcelain", "--untracked-files=no"))


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024**2, 1)
    except (OSError, ValueError):
        pass
    return None


def _gpus() -> list[str]:
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in done.stdout.splitlines() if line.strip()] if done.returncode == 0 else []


def hardware() -> dict[str, Any]:
    """The machine the figures come from: its CPU, the cores this process may use, memory, GPUs."""
    return {
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cores": len(os.sched_getaffinity(0)),
        "memory_gib": _memory_gib(),
        "gpus": _gpus(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def stamp(argv: list[str]) -> dict[str, Any]:
    head, dirty = commit()
    return {
        "commit": head,
        "dirty": dirty,
        "command": shlex.join(argv),
        "hardware": hardware(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def describe_hardware(hw: dict[str, Any]) -> str:
    gpus = ", ".join(hw.get("gpus") or []) or "no GPU"
    memory = f"{hw['memory_gib']} GiB" if hw.get("memory_gib") else "memory unknown"
    return f"{hw.get('cpu', '?')}, {hw.get('cores', '?')} cores, {memory}, {gpus}"


def stamp_lines(s: dict[str, Any]) -> list[str]:
    """The stamp as the first lines of a result's Markdown."""
    dirty = " (with uncommitted changes)" if s.get("dirty") else ""
    lines = [
        f"- commit: `{s['commit']}`{dirty}",
        f"- command: `{s['command']}`",
        f"- hardware: {describe_hardware(s['hardware'])}",
        f"- date: {s['date']}",
    ]
    if load := s["hardware"].get("load_average"):
        lines.append(f"- load average at the start: {', '.join(str(x) for x in load)}")
    if note := s.get("note"):
        lines.append(f"- note: {note}")
    return lines
