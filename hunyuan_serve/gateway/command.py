"""`hunyuan-serve gateway` (run the front), `gateway status` and `reload`: the gateway's composition root."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hunyuan_serve.config import default_run_dir

if TYPE_CHECKING:
    from hunyuan_serve.gateway.discovery import HttpDiscovery
    from hunyuan_serve.gateway.inventory import Inventory
    from hunyuan_serve.gateway.loop import Gateway
    from hunyuan_serve.run.events import JsonEvents


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "gateway",
        help="Front several `up` hosts with one Nginx (`gateway status`: its hosts and replicas).",
        description="Run the multi-host front from an inventory file, with `status` show the running "
        "one's hosts and replicas, or with `reload` have it check and serve its renewed TLS pair.",
    )
    parser.add_argument(
        "action",
        nargs="?",
        choices=("status", "reload"),
        help="status: show the running gateway; reload: its front's TLS pair read again (a renewal).",
    )
    parser.add_argument("--inventory", metavar="FILE", help="YAML inventory: peer_secret_file, hosts, ...")
    parser.add_argument("--port", type=int, help="Public port of the front (overrides the inventory's).")
    parser.add_argument("--run-dir", help="Where its Nginx, state and events go (default: per-user).")
    parser.add_argument("--json", action="store_true", help="status: print JSON instead of a table.")
    parser.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="reload: seconds to wait for the outcome (gateway.reload_wait_timeout_s).",
    )
    parser.set_defaults(func=cmd_gateway)


def gateway_run_dir(args: argparse.Namespace, inventory: Inventory | None) -> Path:
    """--run-dir, else the inventory's run_dir, else `gateway` beside `up`'s default run directory;
    absolute, since Nginx reads its prefix from there."""
    if args.run_dir:
        return Path(args.run_dir).absolute()
    if inventory is not None and inventory.run_dir:
        return Path(inventory.run_dir).absolute()
    return (default_run_dir(os.environ) / "gateway").absolute()


def cmd_gateway(args: argparse.Namespace) -> int:
    if args.action == "status":
        return cmd_status(args)
    if args.action == "reload":
        return cmd_reload(args)
    from hunyuan_serve.config import ConfigError
    from hunyuan_serve.gateway.inventory import load_inventory, with_port

    if not args.inventory:
        raise ConfigError("gateway: --inventory FILE is required")
    inventory = load_inventory(args.inventory)
    if args.port is not None:
        inventory = with_port(inventory, args.port)
    return run_gateway(inventory, gateway_run_dir(args, inventory))


def _problems(inventory: Inventory) -> list[str]:
    """Why the gateway cannot start: an unguarded public front, a busy port (the TLS one too)."""
    from hunyuan_serve.auth import open_listen_problem
    from hunyuan_serve.run.ports import port_problem

    cfg = inventory.serve_config()
    problems = [
        open_listen_problem(cfg, peer_guards_listen=False),
        port_problem(cfg.nginx.listen, cfg.nginx.port),
    ]
    if cfg.nginx.tls_cert:
        problems.append(port_problem(cfg.nginx.listen, cfg.nginx.tls_port))
    return [p for p in problems if p]


def check_files(inventory: Inventory) -> None:
    """An unreadable or malformed secret or keys file is the inventory's mistake: a ConfigError (exit 2)
    naming the file, before anything is created; a secret file others may read (the front's key, the
    client key to the hosts among them) a SecretFileError naming the front pair's other faults too."""
    from hunyuan_serve.auth import load_keys, peer_secret, refuse_exposed
    from hunyuan_serve.gateway.tls import client_context

    client_key = [("inventory: tls_key", inventory.tls_key)] if inventory.tls_key else []
    refuse_exposed(inventory.serve_config(), also=front_tls_problems(inventory), more=client_key)
    auth = inventory.serve_config().auth
    peer_secret(auth)
    if auth.keys_file:
        load_keys(auth.keys_file)
    client_context(inventory)  # the CA and client certificate load (a ConfigError naming the file)


def front_tls_problems(inventory: Inventory) -> list[str]:
    """The front's own certificate pair (nginx.tls_cert and tls_key), checked as `up` checks its own:
    a gateway is the front clients reach, so a bad pair must stop it just the same."""
    from hunyuan_serve.edge.tls import check_pair

    report = check_pair(inventory.serve_config().nginx)
    return list(report.problems) if report else []


def _discovery(inventory: Inventory) -> HttpDiscovery:
    """Polls of the hosts with the peer secret, over TLS to https hosts (the CA, the client certificate)."""
    from hunyuan_serve.auth import peer_headers
    from hunyuan_serve.gateway.discovery import HttpDiscovery
    from hunyuan_serve.gateway.tls import client_context

    headers = peer_headers(inventory.serve_config().auth)
    return HttpDiscovery(inventory.gateway.discovery_timeout_s, headers, tls=client_context(inventory))


def host_problems(inventory: Inventory) -> list[str]:
    """The hosts answering now that must not be used (gateway/tls.py start_problems), asked once."""
    import asyncio

    from hunyuan_serve.gateway.tls import start_problems

    async def ask() -> list[str]:
        discovery = _discovery(inventory)
        try:
            return await start_problems(inventory, discovery)
        finally:
            await discovery.aclose()

    return asyncio.run(ask())


def run_gateway(inventory: Inventory, run_dir: Path) -> int:
    import asyncio

    from hunyuan_serve.run.rundir import lock_run_dir

    check_files(inventory)
    # Before the run dir: a refused start leaves nothing behind.
    refused = front_tls_problems(inventory) or _problems(inventory) or host_problems(inventory)
    if refused:
        print("hunyuan-serve gateway: cannot start: " + "; ".join(refused), file=sys.stderr)
        return 1
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "logs").mkdir(exist_ok=True)
    lock = lock_run_dir(run_dir)
    emit = _open_events(inventory, run_dir)
    try:
        return asyncio.run(build_gateway(inventory, run_dir, emit).run())
    finally:
        emit.close()
        lock.close()


def _open_events(inventory: Inventory, run_dir: Path) -> JsonEvents:
    from hunyuan_serve.gateway.loop import EVENTS_FILE
    from hunyuan_serve.run.events import JsonEvents

    path = run_dir / EVENTS_FILE
    path.write_text("", encoding="utf-8")
    emit = JsonEvents(path)
    hosts = [{"name": h.name, "url": h.url} for h in inventory.hosts]
    emit("gateway", pid=os.getpid(), run_dir=str(run_dir), port=inventory.nginx.port, hosts=hosts)
    return emit


def build_gateway(inventory: Inventory, run_dir: Path, emit: JsonEvents) -> Gateway:
    """The gateway on the real adapters: HTTP discovery and probes with the peer secret, Nginx, the clock."""
    from hunyuan_serve.auth import peer_headers
    from hunyuan_serve.edge.controller import NginxController
    from hunyuan_serve.gateway.loop import Gateway
    from hunyuan_serve.gateway.tls import client_context
    from hunyuan_serve.run.probe import HttpProber
    from hunyuan_serve.run.rundir import web_root, worker_user
    from hunyuan_serve.run.seams import RealClock

    cfg, gw = inventory.serve_config(), inventory.gateway
    headers, tls = peer_headers(cfg.auth), client_context(inventory)
    # Replicas are reached by address; their certificates are verified for tls_name, as Nginx does.
    name = inventory.tls_name if tls else None
    return Gateway(
        inventory,
        discovery=_discovery(inventory),
        prober=HttpProber(gw.probe_timeout_s, headers=headers, tls=tls, server_name=name),
        nginx=NginxController(cfg.nginx, run_dir / "nginx"),
        clock=RealClock(),
        emit=emit,
        run_dir=run_dir,
        web_root=web_root(),
        worker_user=worker_user(),
    )


# -- status and reload -----------------------------------------------------------------------------


def cmd_reload(args: argparse.Namespace) -> int:
    """SIGHUP to the running gateway, its outcome awaited (gateway/reload_client.py)."""
    from hunyuan_serve.config import GatewayConfig
    from hunyuan_serve.gateway.inventory import load_inventory
    from hunyuan_serve.gateway.reload_client import reload_gateway

    inventory = load_inventory(args.inventory) if args.inventory else None
    settings = inventory.gateway if inventory is not None else GatewayConfig()
    return reload_gateway(gateway_run_dir(args, inventory), args.timeout or settings.reload_wait_timeout_s)


def cmd_status(args: argparse.Namespace) -> int:
    from hunyuan_serve.gateway.inventory import load_inventory
    from hunyuan_serve.gateway.loop import STATE_FILE
    from hunyuan_serve.run.procs import pid_alive

    run_dir = gateway_run_dir(args, load_inventory(args.inventory) if args.inventory else None)
    try:
        state = json.loads((run_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = None
    if not isinstance(state, dict):
        print(f"hunyuan-serve: no gateway has run with run dir {run_dir} (pass --run-dir)", file=sys.stderr)
        return 1
    state["running"] = bool(state.get("running")) and pid_alive(int(state.get("pid", 0)))
    print(json.dumps(state, indent=1) if args.json else format_inventory(state))
    return 0 if state["running"] else 3


def _cell(value: object) -> str:
    return "-" if value is None else str(value)


def format_inventory(state: dict[str, Any]) -> str:
    """One line per replica (a host without any gets one line), then the front."""
    head = ("HOST", "HOST_STATE", "MODEL", "REPLICA", "ADDR", "STATE", "PROBE_MS", "REASON")
    rows: list[tuple[str, ...]] = [head]
    for host in state.get("hosts", []):
        lead = (_cell(host.get("name")), _cell(host.get("state")), _cell(host.get("model")))
        for r in host.get("replicas") or [{}]:
            reason = r.get("reason") if r else host.get("reason")
            cells = (r.get("name"), r.get("addr"), r.get("state"), r.get("last_probe_ms"), reason)
            rows.append(lead + tuple(_cell(c) for c in cells))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head) - 1)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1] for row in rows
    ]
    nginx = state.get("nginx", {})
    up = "running" if state.get("running") else "not running"
    lines.append("")
    lines.append(f"gateway: {up} (pid {state.get('pid')}), run dir {state.get('run_dir')}")
    lines.append(
        f"nginx: pid {nginx.get('pid')} on {nginx.get('listen')}:{nginx.get('port')}, "
        f"{nginx.get('ready')} of {nginx.get('replicas')} replica(s) in the upstream"
    )
    return "\n".join(lines)
