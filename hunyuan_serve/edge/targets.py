"""Prometheus scrape targets (file_sd JSON) from the same routing the Nginx upstream is rendered from."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hunyuan_serve.edge.routing import Routing
from hunyuan_serve.run.state import write_json_atomic

TARGETS_DIR = "prometheus"
REPLICAS_FILE = "replicas.json"  # the scrape job of the replicas' /metrics
NGINX_FILE = "nginx.json"  # the scrape job of Nginx's status port, when nginx.status_port is set


def replica_targets(routing: Routing, names: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """One target group per replica, in routing order, labelled with its name, pool and device.

    Every replica stays listed, as in the upstream, with `routed` saying whether Nginx sends it
    traffic: a replica that dies then reads `up == 0` (an alert) instead of vanishing from Prometheus.
    """
    return [
        {
            "targets": [server.addr],
            "labels": {
                "replica": name,
                "pool": server.pool,
                "device": device,
                "routed": "false" if server.down else "true",
            },
        }
        for server, (name, device) in zip(routing.servers, names, strict=True)
    ]


def nginx_targets(status_port: int) -> list[dict[str, Any]]:
    return (
        [{"targets": [f"127.0.0.1:{status_port}"], "labels": {"component": "nginx"}}] if status_port else []
    )


def write_targets(
    run_dir: Path, routing: Routing, names: Sequence[tuple[str, str]], status_port: int
) -> None:
    """Both files, each replaced atomically (Prometheus re-reads a file when it changes)."""
    folder = run_dir / TARGETS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder / REPLICAS_FILE, replica_targets(routing, names))
    write_json_atomic(folder / NGINX_FILE, nginx_targets(status_port))
