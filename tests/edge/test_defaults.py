"""The edge's cap per replica and its workers' priority: derived once, rendered into nginx.conf."""

from __future__ import annotations

from pathlib import Path

import pytest

from hunyuan_serve.config import NginxConfig, build_config
from hunyuan_serve.edge.capacity import edge_max_conns
from hunyuan_serve.edge.render import render_nginx
from hunyuan_serve.edge.routing import routing_from_states
from hunyuan_serve.run.health import State
from tests.support.edge import NGINX, nginx_t

CPU_CAP = NginxConfig().cpu_max_conns
NO_QUEUE = {"replica.max_queued": 0}


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        # By default what the replica runs and lets wait (max_in_flight + max_queued): a burst waits in
        # the replicas, least_conn spreading it by queue depth.
        ({"engine.device": "cpu"}, 256 + 2048),
        ({"engine.device": "cuda", "replica.max_in_flight": 100, "replica.max_queued": 50}, 150),
        # Without a replica queue (max_queued 0), what its engine batches at once.
        ({"engine.device": "cpu", **NO_QUEUE}, CPU_CAP),  # a CPU engine's efficient batch, not 256
        ({"engine.device": "cpu", "nginx.cpu_max_conns": 8, **NO_QUEUE}, 8),
        ({"engine.device": "cpu", "engine.max_num_seqs": 4, **NO_QUEUE}, 4),  # never past one batch
        ({"engine.device": "cpu", "replica.max_in_flight": 5, **NO_QUEUE}, 5),  # nor what the replica admits
        ({"engine.device": "cuda", **NO_QUEUE}, 256),  # one batch of the engine's (max_num_seqs)
        ({"engine.device": "cuda", "engine.max_num_seqs": 64, **NO_QUEUE}, 64),
        ({"engine.device": "cuda", "replica.max_in_flight": 100, **NO_QUEUE}, 100),
        ({"engine.device": "auto", "engine.max_num_seqs": 48, **NO_QUEUE}, 48),  # before up chose: GPU's
        ({"engine.device": "cpu", "nginx.max_conns": 300}, 300),  # set: as given
        ({"engine.device": "cuda", "nginx.max_conns": 0}, 0),  # 0: no cap
    ],
)
def test_edge_cap_per_replica(overrides: dict[str, object], expected: int) -> None:
    assert edge_max_conns(build_config({}, overrides)) == expected


def _render(tmp_path: Path, overrides: dict[str, object]) -> str:
    cfg = build_config({}, overrides)
    states = [State.READY, State.READY, State.EVICTED]
    routing = routing_from_states([(f"127.0.0.1:{8101 + i}", s) for i, s in enumerate(states)])
    return render_nginx(cfg, routing, prefix=tmp_path, web_root=tmp_path / "web", worker_user=None)


@pytest.mark.parametrize(
    ("overrides", "cap", "priority"),
    [
        ({"engine.device": "cpu", **NO_QUEUE}, f" max_conns={CPU_CAP}", NginxConfig().worker_priority),
        ({"engine.device": "cuda", "nginx.worker_priority": 3}, " max_conns=2304", 3),
        ({"nginx.max_conns": 0, "nginx.worker_priority": 0}, "", 0),
    ],
)
def test_cap_and_priority_land_in_nginx_conf(
    tmp_path: Path, overrides: dict[str, object], cap: str, priority: int
) -> None:
    text = _render(tmp_path, overrides)
    servers = [line.strip() for line in text.splitlines() if line.strip().startswith("server 127.0.0.1:")]
    assert servers == [
        f"server 127.0.0.1:8101 max_fails=1 fail_timeout=2s{cap};",
        f"server 127.0.0.1:8102 max_fails=1 fail_timeout=2s{cap};",
        f"server 127.0.0.1:8103 max_fails=1 fail_timeout=2s{cap} down;",
    ]
    lines = text.splitlines()
    # Nginx's default (0) is left unsaid; any other value is one main-context directive.
    assert [line for line in lines if "worker_priority" in line] == (
        [f"worker_priority {priority};"] if priority else []
    )


@pytest.mark.nginx
@pytest.mark.skipif(NGINX is None, reason="nginx is not installed")
@pytest.mark.parametrize("priority", [-20, -5, 19])
def test_rendered_priority_and_cap_pass_nginx_t(tmp_path: Path, priority: int) -> None:
    text = _render(tmp_path, {"engine.device": "cpu", "nginx.worker_priority": priority})
    # A CPU replica's default cap: what it runs and lets wait (max_in_flight + max_queued).
    assert f"worker_priority {priority};" in text and " max_conns=2304;" in text
    # Two connections for each request its three replicas hold (the client's, the replica's), and 4096.
    assert "worker_connections 17920;" in text
    out = nginx_t(tmp_path, text)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize(
    ("overrides", "held"),
    [
        ({"nginx.max_conns": 300}, 300),  # the cap
        # No cap: what each replica's admission takes before it refuses, which Nginx may all hold open.
        ({"nginx.max_conns": 0, "replica.max_in_flight": 100, "replica.max_queued": 400}, 500),
        ({"nginx.max_conns": 0, "replica.max_in_flight": 100, "replica.max_queued": 0}, 100),
    ],
)
def test_worker_connections_hold_what_the_replicas_may(
    tmp_path: Path, overrides: dict[str, object], held: int
) -> None:
    text = _render(tmp_path, overrides)
    least = NginxConfig().worker_connections
    assert f"worker_connections {least + 2 * 3 * held};" in text


@pytest.mark.parametrize("priority", [-21, 20])
def test_worker_priority_outside_nice_range_is_refused(priority: int) -> None:
    with pytest.raises(ValueError, match="worker_priority"):
        build_config({}, {"nginx.worker_priority": priority})
