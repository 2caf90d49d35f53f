"""`hunyuan-serve render`: the Nginx config, the systemd unit or the kustomize base of up's plan."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from hunyuan_serve.config import config_from_args
from hunyuan_serve.fleet.rundir import run_dir_of, web_root, worker_user
from hunyuan_serve.gpu import visible_gpus
from hunyuan_serve.k8s.command import add_flags as add_k8s_flags
from hunyuan_serve.k8s.command import wants_k8s
from hunyuan_serve.supervise.command import serve_flags

SYSTEMD_CONFIG = "/etc/hunyuan-serve/config.yaml"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    render = subparsers.add_parser(
        "render", help="Print the Nginx config or systemd unit `up` would use; k8s: write a kustomize base."
    )
    render.add_argument("what", choices=("nginx", "systemd", "k8s"))
    serve_flags(render)
    add_k8s_flags(render)
    render.set_defaults(func=cmd_render)


def cmd_render(args: argparse.Namespace) -> int:
    if wants_k8s(args):
        from hunyuan_serve.k8s.command import cmd_render_k8s

        return cmd_render_k8s(args)
    from hunyuan_serve.fleet.health import State
    from hunyuan_serve.fleet.plan import plan_replicas
    from hunyuan_serve.fleet.render import render_nginx, render_systemd
    from hunyuan_serve.fleet.routing import routing_from_states

    cfg = config_from_args(args)
    run_dir = run_dir_of(cfg)
    plans = plan_replicas(
        cfg,
        visible_gpus=visible_gpus(),
        cores=sorted(os.sched_getaffinity(0)),
        run_dir=run_dir,
        python=sys.executable,
    )
    if args.what == "nginx":
        states = [(p.addr, State.READY) for p in plans]
        routing = routing_from_states(states, [p.name for p in plans], [p.pool for p in plans])
        sys.stdout.write(
            render_nginx(
                cfg, routing, prefix=run_dir / "nginx", web_root=web_root(), worker_user=worker_user()
            )
        )
        return 0
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
