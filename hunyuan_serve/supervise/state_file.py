"""The supervisor's state file (what `status` reads): written after every step and each phase of the end."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hunyuan_serve.run.seams import Clock
from hunyuan_serve.run.state import STATE_FILE, write_json_atomic
from hunyuan_serve.supervise.replica import Replica


class StateFile:
    """run_dir/state.json: the stack's facts (`info`), and what the parts show of themselves when written."""

    def __init__(self, run_dir: Path, clock: Clock, info: Mapping[str, Any]) -> None:
        self.path, self.run_dir, self.clock = run_dir / STATE_FILE, run_dir, clock
        self.info = dict(info)  # model, events file, prompt family...
        self.started_at = clock.wall()

    def note(self, info: Mapping[str, Any]) -> None:
        """Facts a reload changed (the model, the family): in every write from now on."""
        self.info.update(info)

    def write(
        self,
        replicas: list[Replica],
        incoming: list[Replica],
        reload: dict[str, Any] | None,
        nginx: dict[str, Any],
        *,
        running: bool = True,
        phase: str = "running",
    ) -> None:
        state = {
            "pid": os.getpid(),
            "running": running,
            "phase": phase,
            "started_at": self.started_at,
            "updated_at": self.clock.wall(),
            "run_dir": str(self.run_dir),
            **self.info,
            "replicas": [self._replica(r) for r in replicas],
            "incoming": [self._replica(r) for r in incoming],  # started by a reload
            "reload": reload,
            "nginx": nginx,
        }
        write_json_atomic(self.path, state)

    def _replica(self, r: Replica) -> dict[str, Any]:
        return {
            "name": r.plan.name,
            "pool": r.plan.pool,
            "device": r.plan.device,
            "addr": r.plan.addr,
            "port": r.plan.port,
            "pid": r.proc.pid if r.proc is not None else None,
            "state": r.health.state.value,
            "restarts": r.health.restarts,
            "reason": r.health.reason,
            "since_s": round(self.clock.now() - r.health.since, 3),
            "last_probe_ms": None if r.last_probe_ms is None else round(r.last_probe_ms, 1),
            "log": str(r.plan.log_path),
            "config": r.config,
            "retiring": r.retiring,
        }
