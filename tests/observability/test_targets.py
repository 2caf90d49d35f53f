"""The file_sd targets: one group per replica of the routing, labelled, each file replaced by a rename."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hunyuan_serve.edge.routing import routing_from_states
from hunyuan_serve.edge.targets import NGINX_FILE, REPLICAS_FILE, TARGETS_DIR, write_targets
from hunyuan_serve.run import state
from hunyuan_serve.run.health import State

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


def test_each_file_is_replaced_whole_by_a_rename_so_a_reader_never_sees_part_of_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_targets(tmp_path, routing_from_states([("127.0.0.1:8101", State.READY)]), NAMES[:1], status_port=0)
    folder = tmp_path / TARGETS_DIR
    before = {p.name: p.read_text() for p in folder.iterdir()}
    renames: list[tuple[Path, Path, object, str]] = []
    rename = os.replace

    def observed(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        """At each rename: the new file is complete JSON, and the old one is still whole in its place."""
        renames.append((Path(src), Path(dst), json.loads(Path(src).read_text()), Path(dst).read_text()))
        rename(src, dst)

    monkeypatch.setattr(state.os, "replace", observed)
    routing = routing_from_states([("127.0.0.1:8101", State.READY), ("127.0.0.1:8102", State.READY)])
    write_targets(tmp_path, routing, NAMES, status_port=9113)
    monkeypatch.undo()
    assert sorted(dst.name for _, dst, _, _ in renames) == [NGINX_FILE, REPLICAS_FILE]
    for src, dst, written, replaced in renames:
        assert src.parent == dst.parent and src.name != dst.name  # one filesystem: the rename is atomic
        assert written == json.loads(dst.read_text()) and replaced == before[dst.name]
    assert sorted(p.name for p in folder.iterdir()) == [NGINX_FILE, REPLICAS_FILE]  # no temporary left
