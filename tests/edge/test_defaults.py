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


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        # What the replica runs and lets wait: a burst waits in the replicas, not refused at the edge.
        ({"engine.device": "cpu"}, 256 + 1024),
        ({"engine.device": "cuda", "replica.max_in_flight": 100, "replica.max_queued": 50}, 150),
        ({"engine.device": "cpu", "nginx.cpu_max_conns": 8}, 256 + 1024),  # the engine's batch: no matter
        # Without a replica queue, what the engine batches at once.
        ({"engine.device": "cpu", "replica.max_queued": 0}, CPU_CAP),  # a CPU engine's efficient batch
        ({"engine.device": "cpu", "replica.max_queued": 0, "nginx.cpu_max_conns": 8}, 8),
        ({"engine.device": "cpu", "replica.max_queued": 0, "engine.max_num_seqs": 4}, 4),  # one batch
        ({"engine.device": "cpu", "replica.max_queued": 0, "replica.max_in_flight": 5}, 5),
        ({"engine.device": "cuda", "replica.max_queued": 0}, 256),  # one batch (max_num_seqs)
        ({"engine.device": "cuda", "replica.max_queued": 0, "engine.max_num_seqs": 64}, 64),
        ({"engine.device": "cuda", "replica.max_queued": 0, "replica.max_in_flight": 100}, 100),
        ({"engine.device": "auto", "replica.max_queued": 0, "engine.max_num_seqs": 48}, 48),  # GPU's rule
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
        ({"engine.device": "cpu"}, " max_conns=1280", NginxConfig().worker_priority),
        ({"engine.device": "cuda", "nginx.worker_priority": 3, "replica.max_queued": 0}, " max_conns=256", 3),
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
    assert f"worker_priority {priority};" in text and "max_conns=1280" in text
    out = nginx_t(tmp_path, text)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("priority", [-21, 20])
def test_worker_priority_outside_nice_range_is_refused(priority: int) -> None:
    with pytest.raises(ValueError, match="worker_priority"):
        build_config({}, {"nginx.worker_priority": priority})
