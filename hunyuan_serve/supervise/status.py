"""`status`: the running `up`'s state file, plus each replica's in-flight gauge read live."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from hunyuan_serve.auth import PEER_HEADER, load_peer_secret
from hunyuan_serve.config import DEFAULT_POOL, ConfigError, default_run_dir
from hunyuan_serve.run.health import State
from hunyuan_serve.run.procs import pid_alive
from hunyuan_serve.run.state import read_state

_IN_FLIGHT = re.compile(r"^hunyuan_requests_in_flight(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$", re.MULTILINE)
# The bulk sequences the replica lets run in its engine now (replica/admission/engine_room.py): narrow
# while people are active, full otherwise.
_BULK_WIDTH = re.compile(r"^hunyuan_bulk_width\s+([0-9.eE+-]+)\s*$", re.MULTILINE)
# 1 while the replica's engine steps and its pausing scheduler never acknowledged the bulk width.
_INACTIVE = re.compile(r"^hunyuan_people_first_inactive\s+([0-9.eE+-]+)\s*$", re.MULTILINE)
PEOPLE_FIRST_INACTIVE = "people-first inactive"


def parse_in_flight(metrics_text: str) -> float | None:
    """Sum of the hunyuan_requests_in_flight gauge in Prometheus text, None if absent."""
    values = [float(v) for v in _IN_FLIGHT.findall(metrics_text)]
    return sum(values) if values else None


def parse_bulk_width(metrics_text: str) -> int | None:
    """The replica's hunyuan_bulk_width gauge in Prometheus text, None if absent."""
    found = _BULK_WIDTH.search(metrics_text)
    return int(float(found.group(1))) if found else None


def parse_people_first(metrics_text: str) -> str | None:
    """ "inactive" or "active" from the replica's hunyuan_people_first_inactive gauge, None if absent."""
    found = _INACTIVE.search(metrics_text)
    return None if found is None else ("inactive" if float(found.group(1)) else "active")


def _metrics(addr: str, timeout_s: float, headers: dict[str, str], tls: bool = False) -> str | None:
    # A replica on TLS (replica.tls_cert) is this host's own: asked over TLS, unverified, as its probes are.
    url = f"{'https' if tls else 'http'}://{addr}/metrics"
    try:
        response = httpx.get(url, timeout=timeout_s, trust_env=False, headers=headers, verify=not tls)
    except httpx.HTTPError:
        return None
    return response.text if response.status_code == 200 else None


def _routable(state: object) -> bool:
    """Whether the state file's state is one Nginx routes to (health.State decides, not a copy here)."""
    try:
        return isinstance(state, str) and State(state).routable
    except ValueError:
        return False


def _peer_headers(state: dict[str, Any]) -> dict[str, str]:
    """The peer secret's header when `up` runs behind a gateway (its state names the file)."""
    path = state.get("peer_secret_file")
    try:
        return {PEER_HEADER: load_peer_secret(path)} if isinstance(path, str) and path else {}
    except ConfigError:
        return {}  # unreadable now: the gauges read as unknown, the rest of the table stands


def collect_status(run_dir: Path, timeout_s: float = 1.0) -> dict[str, Any] | None:
    """What `status --json` prints; None when no `up` ever wrote a state there."""
    state = read_state(run_dir)
    if state is None:
        return None
    running = bool(state.get("running")) and pid_alive(int(state.get("pid", 0)))
    state["running"] = running
    headers = _peer_headers(state)
    for replica in state.get("replicas", []):
        live = running and replica.get("pid") is not None and _routable(replica.get("state"))
        addr = replica.get("addr")  # where `up` reaches it (plan.addr)
        tls = bool(state.get("replica_tls"))
        text = _metrics(str(addr), timeout_s, headers, tls) if live and addr else None
        replica["in_flight"] = parse_in_flight(text) if text is not None else None
        replica["bulk_width"] = parse_bulk_width(text) if text is not None else None
        replica["people_first"] = parse_people_first(text) if text is not None else None
        if not running:
            replica["state"] = "stopped"
            replica["pid"] = None
    return state


def find_status(
    run_dir: Path | None, environ: Mapping[str, str], timeout_s: float
) -> tuple[Path, dict[str, Any] | None, list[str]]:
    """`status`'s stack: run_dir's when one was asked for (--run-dir, --config), else the default run
    dir's or, when no `up` runs there, the only `up` running (one started with --run-dir); with notes
    naming the run dir read when it is not the default and every other `up` running (run/stacks.py)."""
    from hunyuan_serve.run import stacks

    if run_dir is not None:
        return run_dir, collect_status(run_dir, timeout_s), []
    default = default_run_dir(environ)
    others = [(d, pid) for d, pid in stacks.running(environ) if d != default.absolute()]
    status, notes = collect_status(default, timeout_s), []
    if (status is None or not status["running"]) and len(others) == 1:
        (default, _), others = others[0], []
        status = collect_status(default, timeout_s)
        notes.append(f"run dir {default}: the only `up` running (pass --run-dir to read another)")
    notes += [f"also running: `up` pid {pid} with run dir {d} (status --run-dir {d})" for d, pid in others]
    return default, status, notes


def format_status(status: dict[str, Any]) -> str:
    """A human table: one line per replica, then Nginx."""
    head = (
        "NAME", "POOL", "DEVICE", "PORT", "PID", "STATE", "RESTARTS", "PROBE_MS", "IN_FLIGHT", "BULK_WIDTH",
        "REASON",
    )  # fmt: skip
    rows: list[tuple[str, ...]] = [head]
    for r in _listed(status):
        rows.append(
            tuple(
                "-" if v is None else str(v)
                for v in (
                    r.get("name"),
                    r.get("pool"),
                    r.get("device"),
                    r.get("port"),
                    r.get("pid"),
                    r.get("state"),
                    r.get("restarts"),
                    r.get("last_probe_ms"),
                    r.get("in_flight"),
                    r.get("bulk_width"),
                    _reason(r),
                )
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head) - 1)]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1]
        for row in rows
    ]
    nginx = status.get("nginx", {})
    up = "running" if status.get("running") else "not running"
    lines.append("")
    lines.extend(_header(status, up))
    lines.append(
        f"nginx: pid {nginx.get('pid')} on {nginx.get('listen')}:{nginx.get('port')}, "
        f"{nginx.get('ready')} replica(s) in the upstream"
    )
    reload = reload_line(status.get("reload"))
    return "\n".join([*lines, reload] if reload else lines)


def _reason(replica: dict[str, Any]) -> str | None:
    """The state's reason, and people-first inactive where the replica's metrics say so."""
    if replica.get("people_first") != "inactive":
        return replica.get("reason")
    return "; ".join(filter(None, [replica.get("reason"), PEOPLE_FIRST_INACTIVE]))


def _header(status: dict[str, Any], up: str) -> list[str]:
    """`up`'s line; with a pools section one more per pool: its model and prompt family."""
    pools = status.get("pools") or []
    if [p.get("name") for p in pools] in ([], [DEFAULT_POOL]):
        return [
            f"up: {up} (pid {status.get('pid')}), model {status.get('model')} "
            f"(prompt family {status.get('family')}), run dir {status.get('run_dir')}"
        ]
    lines = [f"up: {up} (pid {status.get('pid')}), {len(pools)} pools, run dir {status.get('run_dir')}"]
    for pool in pools:
        lines.append(
            f"pool {pool.get('name')}: model {pool.get('model')} (prompt family {pool.get('family')}), "
            f"{len(pool.get('replicas') or [])} replica(s)"
        )
    return lines


def _listed(status: dict[str, Any]) -> list[dict[str, Any]]:
    """The slots' replicas (one a reload is draining shows as retiring), then those a reload is starting."""
    rows = [{**r, "state": "retiring"} if r.get("retiring") else r for r in status.get("replicas", [])]
    return rows + [{**r, "name": f"{r.get('name')} (new)"} for r in status.get("incoming") or []]


def reload_line(reload: dict[str, Any] | None) -> str | None:
    """The last rolling reload, in one line (None: there was none)."""
    if not reload:
        return None
    head = f"reload {reload.get('reload')}"
    outcome = reload.get("outcome")
    if outcome is None:
        return f"{head}: in progress, {reload.get('phase')}"
    if outcome == "done":
        return (
            f"{head}: done in {reload.get('wall_s')} s, {len(reload.get('replaced', []))} replica(s) replaced"
        )
    if outcome == "failed":
        return f"{head}: failed at {reload.get('replica')}: {reload.get('error')}"
    return f"{head}: {outcome}: {reload.get('error')}"
