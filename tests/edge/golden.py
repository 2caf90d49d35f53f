"""The sample deployment rendered into deploy/ as reference outputs (a test keeps them current)."""

from __future__ import annotations

from pathlib import Path

from hunyuan_serve.config import ServeConfig, build_config
from hunyuan_serve.edge.hold import READY_FILE
from hunyuan_serve.edge.render import render_nginx
from hunyuan_serve.edge.routing import routing_from_states
from hunyuan_serve.run.health import State
from hunyuan_serve.run.plan import plan_replicas
from hunyuan_serve.systemd_unit import render_systemd

REPO = Path(__file__).resolve().parents[2]
SAMPLE_RUN_DIR = Path("/run/hunyuan-serve")
SAMPLE_WEB_ROOT = Path("/opt/hunyuan-serve/lib/python3/site-packages/hunyuan_serve/web")
SAMPLE_EXE = "/opt/hunyuan-serve/bin/hunyuan-serve"
SAMPLE_CONFIG = "/etc/hunyuan-serve/config.yaml"
GOLDEN_NGINX = REPO / "deploy" / "nginx" / "example-3gpu.conf"
GOLDEN_SYSTEMD = REPO / "deploy" / "systemd" / "hunyuan-serve.service"
GOLDEN_POOLS = REPO / "deploy" / "nginx" / "example-2pools.conf"
SAMPLE_ROUTE_JS = SAMPLE_WEB_ROOT.parent / "edge" / "templates" / "route.js"
SAMPLE_READY = SAMPLE_RUN_DIR / "nginx" / READY_FILE


def sample_config() -> ServeConfig:
    data = {"gpus": "0,1,2", "run_dir": str(SAMPLE_RUN_DIR), "nginx": {"listen": "0.0.0.0"}}
    return build_config({**data, "engine": {"model": "tencent/Hunyuan-MT-7B"}}, {})


def sample_nginx() -> str:
    cfg = sample_config()
    plans = plan_replicas(cfg, visible_gpus=[0, 1, 2], cores=[0], run_dir=SAMPLE_RUN_DIR, python="python")
    states = [State.READY, State.READY, State.RESTARTING]
    routing = routing_from_states([(p.addr, s) for p, s in zip(plans, states, strict=True)])
    return render_nginx(
        cfg,
        routing,
        prefix=SAMPLE_RUN_DIR / "nginx",
        web_root=SAMPLE_WEB_ROOT,
        worker_user=None,
        generation=7,
        script=SAMPLE_ROUTE_JS,  # hold.js is read beside it
        ready_file=SAMPLE_READY,
    )


def sample_pools_config() -> ServeConfig:
    """Two pools on a 3-GPU host: Hunyuan-MT-7B on two GPUs, its Chimera on the third."""
    pools = [
        {"name": "mt", "model": "tencent/Hunyuan-MT-7B", "gpus": "0,1"},
        {"name": "chimera", "model": "tencent/Hunyuan-MT-Chimera-7B", "gpus": "2"},
    ]
    data = {"run_dir": str(SAMPLE_RUN_DIR), "nginx": {"listen": "0.0.0.0"}, "pools": pools}
    return build_config(data, {})


def sample_pools_nginx() -> str:
    cfg = sample_pools_config()
    members = [("127.0.0.1:8101", State.READY), ("127.0.0.1:8102", State.RESTARTING)]
    members.append(("127.0.0.1:8103", State.READY))
    routing = routing_from_states(members, ["mt-0", "mt-1", "chimera-0"], ["mt", "mt", "chimera"])
    return render_nginx(
        cfg,
        routing,
        prefix=SAMPLE_RUN_DIR / "nginx",
        web_root=SAMPLE_WEB_ROOT,
        worker_user=None,
        generation=7,
        script=SAMPLE_ROUTE_JS,
        ready_file=SAMPLE_READY,
    )


def sample_systemd() -> str:
    return render_systemd(
        sample_config(),
        argv=[SAMPLE_EXE, "up", "--config", SAMPLE_CONFIG],
        run_dir=SAMPLE_RUN_DIR,
        working_dir=Path("/opt/hunyuan-serve"),
        user="hunyuan",
        replicas=3,
        config_path=SAMPLE_CONFIG,
    )


if __name__ == "__main__":
    GOLDEN_NGINX.write_text(sample_nginx(), encoding="utf-8")
    GOLDEN_SYSTEMD.write_text(sample_systemd(), encoding="utf-8")
    GOLDEN_POOLS.write_text(sample_pools_nginx(), encoding="utf-8")
    print(f"wrote {GOLDEN_NGINX}, {GOLDEN_SYSTEMD} and {GOLDEN_POOLS}")
