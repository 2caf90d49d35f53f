"""`hunyuan-serve render`: the Nginx config, the systemd unit or the kustomize base of up's plan."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hunyuan_serve.config import ConfigError, ServeConfig, config_from_args
from hunyuan_serve.k8s.command import add_flags as add_k8s_flags
from hunyuan_serve.k8s.command import wants_k8s
from hunyuan_serve.run.rundir import run_dir_of, web_root, worker_user
from hunyuan_serve.supervise.flags import serve_flags
from hunyuan_serve.supervise.placement import placed_here, plan_here

if TYPE_CHECKING:
    from hunyuan_serve.run.plan import ReplicaPlan

SYSTEMD_CONFIG = "/etc/hunyuan-serve/config.yaml"
# The generation of the first config `up` writes: its supervisor counts the configs it renders from 1.
FIRST_GENERATION = 1


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    render = subparsers.add_parser(
        "render", help="Print the Nginx config or systemd unit `up` would use; k8s: write a kustomize base."
    )
    render.add_argument("what", choices=("nginx", "systemd", "k8s"))
    render.add_argument(
        "--starting",
        action="store_true",
        help="nginx: the config `up` starts Nginx with (every replica down until its first probe "
        "passes; config generation 1), byte for byte; default: the one it runs with every replica ready.",
    )
    serve_flags(render)
    add_k8s_flags(render)
    render.set_defaults(func=cmd_render)


def cmd_render(args: argparse.Namespace) -> int:
    if args.starting and args.what != "nginx":
        raise ConfigError(f"--starting is an option of render nginx, not of render {args.what}")
    if wants_k8s(args):
        from hunyuan_serve.k8s.command import cmd_render_k8s

        return cmd_render_k8s(args)
    from hunyuan_serve.systemd_unit import render_systemd

    cfg = config_from_args(args)
    run_dir = run_dir_of(cfg)
    if args.what == "nginx":
        # This machine's facts as `up` reads them (GPUs or cores, each pool's model, family, device).
        placed, plans = placed_here(cfg, run_dir, fetch=False)
        sys.stdout.write(nginx_of(placed, plans, run_dir, starting=args.starting))
        return 0
    plans = plan_here(cfg, run_dir)
    config_path = str(Path(args.config).resolve()) if getattr(args, "config", None) else SYSTEMD_CONFIG
    exe = Path(sys.executable).parent / "hunyuan-serve"
    argv = [str(exe)] if exe.exists() else [sys.executable, "-m", "hunyuan_serve"]
    sys.stdout.write(
        render_systemd(
            cfg,
            argv=[*argv, "up", "--config", config_path],
            run_dir=Path("/run/hunyuan-serve"),
            working_dir=Path.cwd(),
            user=None,
            replicas=len(plans),
            config_path=config_path,
        )
    )
    return 0


def nginx_of(cfg: ServeConfig, plans: Sequence[ReplicaPlan], run_dir: Path, *, starting: bool) -> str:
    """What `up` writes into <run dir>/nginx/nginx.conf for these plans: the supervisor's renderer on
    its inputs (the placed config, its prefix, web root and worker user), at its first config
    (starting: every replica down, generation 1) or with every replica ready."""
    from hunyuan_serve.edge.hold import ready_file
    from hunyuan_serve.edge.kept_tls import KEPT_TLS_DIR, KeptPair
    from hunyuan_serve.edge.render import render_nginx
    from hunyuan_serve.edge.routing import routing_from_states
    from hunyuan_serve.run.health import State

    # up's Nginx reads its copies of the front's pair in the run dir, not the configured files.
    cfg = cfg.model_copy(update={"nginx": KeptPair(run_dir / KEPT_TLS_DIR).served(cfg.nginx)})
    state = State.STARTING if starting else State.READY
    routing = routing_from_states(
        [(p.addr, state) for p in plans], [p.name for p in plans], [p.pool for p in plans]
    )
    return render_nginx(
        cfg,
        routing,
        prefix=run_dir / "nginx",
        web_root=web_root(),
        worker_user=worker_user(),
        generation=FIRST_GENERATION if starting else 0,
        ready_file=ready_file(cfg, run_dir / "nginx"),
    )
