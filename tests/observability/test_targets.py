"""The file_sd targets: one group per replica of the routing, labelled, and written atomically."""

from __future__ import annotations

import json
from pathlib import Path

from hunyuan_serve.fleet.health import State
from hunyuan_serve.fleet.routing import routing_from_states
from hunyuan_serve.fleet.targets import NGINX_FILE, REPLICAS_FILE, TARGETS_DIR, write_targets

NAMES = [("replica-0", "cpu:0"), ("replica-1", "cuda:1")]


def test_every_replica_is_listed_with_whether_nginx_routes_to_it(tmp_path: Path) -> None:
    routing = routing_from_states([("127.0.0.1:8101", State.READY), ("127.0.0.1:8102", State.STARTING)])
    write_targets(tmp_path, routing, NAMES, status_port=0)
    assert json.loads((tmp_path / TARGETS_DIR / REPLICAS_FILE).read_text()) == [
        {
            "targets": ["127.0.0.1:8101"],
            "labels": {"replica": "replica-0", "pool": "default", "device": "cpu:0", "routed": "true"},
        },
        {
            "targets": ["127.0.0.1:8102"],
            "labels": {"replica": "replica-1", "pool": "default", "device": "cuda:1", "routed": "false"},
        },
    ]
    assert json.loads((tmp_path / TARGETS_DIR / NGINX_FILE).read_text()) == []
    assert sorted(p.name for p in (tmp_path / TARGETS_DIR).iterdir()) == [NGINX_FILE, REPLICAS_FILE]


def test_nginx_status_port_is_a_target(tmp_path: Path) -> None:
    routing = routing_from_states([("127.0.0.1:8101", State.READY), ("127.0.0.1:8102", State.READY)])
    write_targets(tmp_path, routing, NAMES, status_port=9113)
    nginx = json.loads((tmp_path / TARGETS_DIR / NGINX_FILE).read_text())
    assert nginx == [{"targets": ["127.0.0.1:9113"], "labels": {"component": "nginx"}}]


def test_each_target_is_labelled_with_its_pool(tmp_path: Path) -> None:
    routing = routing_from_states(
        [("127.0.0.1:8101", State.READY), ("127.0.0.1:8102", State.EVICTED)],
        ["mt-0", "chimera-0"],
        ["mt", "chimera"],
    )
    write_targets(tmp_path, routing, [("mt-0", "cpu:0"), ("chimera-0", "cpu:1")], status_port=0)
    labels = [t["labels"] for t in json.loads((tmp_path / TARGETS_DIR / REPLICAS_FILE).read_text())]
    assert [(x["replica"], x["pool"], x["routed"]) for x in labels] == [
        ("mt-0", "mt", "true"),
        ("chimera-0", "chimera", "false"),
    ]
