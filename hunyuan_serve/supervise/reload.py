"""Rolling reload, the pure parts: what changed, what needs a full restart, the order and ports, outcomes."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from hunyuan_serve.config import ServeConfig, resolve_pools
from hunyuan_serve.run.plan import ReplicaPlan, pools_of
from hunyuan_serve.run.reload_wait import reload_end

# The one table of settings a reload cannot apply: changing any of them is refused, naming the key.
# Every other setting is applied: the replicas whose settings changed are replaced, and Nginx and the
# supervisor take the new config (rendered and reloaded) once those replicas run it.
RESTART_ONLY: dict[str, str] = {
    "pools": "the pools, their order and so their replicas' ports are laid out when `up` starts",
    "gpus": "the devices are laid out when `up` starts",
    "replicas": "the number of replicas is fixed when `up` starts",
    "base_port": "the replicas' ports are laid out when `up` starts",
    "run_dir": "it holds the running `up`'s lock, state and events",
    "engine.device": "the device kind is chosen when `up` starts",
    "engine.tensor_parallel_size": "the devices are grouped when `up` starts",
    "nginx.port": "clients and `status` find the running Nginx on it",
    "nginx.listen": "clients find the running Nginx on it",
    "nginx.binary": "the running Nginx master is that program",
}
# The keys of RESTART_ONLY that lay out one pool's replicas: compared on each pool's effective config
# (and named pools.NAME.KEY with a pools section), the others on the stack's own settings.
POOL_LAYOUT = ("gpus", "replicas", "engine.device", "engine.tensor_parallel_size")
# The sections only `up` and Nginx read: a change there replaces no replica.
NOT_READ_BY_REPLICAS = frozenset({"nginx", "supervisor", "logs"})

Order = Literal["surge", "drain-first"]


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"nginx": {"port": 1}} -> {"nginx.port": 1}: one dotted key per setting."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def flat_config(cfg: ServeConfig) -> dict[str, Any]:
    """Every setting by dotted key; a pool's own as pools.NAME.KEY."""
    flat = flatten(cfg.model_dump(mode="json", exclude={"pools"}))
    for pool in cfg.pools:
        flat.update(flatten(pool.model_dump(mode="json", exclude={"name"}), f"pools.{pool.name}."))
    return flat


def changed_keys(old: ServeConfig, new: ServeConfig) -> list[str]:
    """Dotted keys whose values differ between the two configs, sorted."""
    before, after = flat_config(old), flat_config(new)
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def _restart(key: str, reason_of: str) -> str:
    return f"{key}: needs a full restart ({RESTART_ONLY[reason_of]})"


def pool_refusals(old: ServeConfig, new: ServeConfig) -> list[str]:
    """A pool added, removed or moved (or a pools section put in place of the one-model settings)."""
    before, after = [p.name for p in old.pools], [p.name for p in new.pools]
    if before == after:
        return []
    what = [f"pool {n} added" for n in after if n not in before]
    what += [f"pool {n} removed" for n in before if n not in after]
    if not before or not after:
        what = [
            "a pools section in place of the one-model settings" if after else "the pools section removed"
        ]
    return [_restart(f"pools ({'; '.join(what or ['their order changed'])})", "pools")]


def refusals(old: ServeConfig, new: ServeConfig) -> list[str]:
    """Why the new config cannot be applied by a reload (empty: it can), one reason per key."""
    structure = pool_refusals(old, new)
    before, after = flatten(old.model_dump(mode="json")), flatten(new.model_dump(mode="json"))
    stack = [k for k in RESTART_ONLY if k not in POOL_LAYOUT and k != "pools"]
    reasons = structure + [_restart(k, k) for k in sorted(stack) if before.get(k) != after.get(k)]
    if structure:
        return reasons
    olds = {p.name: flatten(p.cfg.model_dump(mode="json")) for p in resolve_pools(old)}
    for pool in resolve_pools(new):
        mine = flatten(pool.cfg.model_dump(mode="json"))
        prefix = f"pools.{pool.name}." if new.pools else ""
        keys = [k for k in POOL_LAYOUT if olds[pool.name].get(k) != mine.get(k)]
        reasons += [_restart(prefix + k, k) for k in sorted(keys)]
    return reasons


def replica_view(cfg: ServeConfig, pool: str) -> dict[str, Any]:
    """What the replicas of `pool` read of cfg, but their port: a replica whose view is the same under
    the new config keeps serving through a reload (same process)."""
    resolved = pools_of(cfg)[pool]
    data = resolved.cfg.model_dump(mode="json", exclude=set(NOT_READ_BY_REPLICAS))
    data["replica"].pop("port")
    data["chimera_pool"] = resolved.chimera_pool  # becomes the replica's chimera_url (plan.replica_config)
    return dict(data)


def to_replace(
    running: Sequence[Mapping[str, Any]], cfg: ServeConfig, plans: Sequence[ReplicaPlan]
) -> list[int]:
    """The slots whose replica reads something else under cfg than what it runs (`running`, by slot)."""
    views = {plan.pool: replica_view(cfg, plan.pool) for plan in plans}
    return [i for i, plan in enumerate(plans) if views[plan.pool] != running[i]]


def replace_order(setting: str, plans: Sequence[ReplicaPlan]) -> Order:
    """surge: start the new replica beside the old one, then drain the old; drain-first: the old one
    goes first (a GPU holds one engine: the new one starts on the freed device while the others serve)."""
    if setting == "surge":
        return "surge"
    if setting == "drain_first":
        return "drain-first"
    return "drain-first" if any(p.gpus for p in plans) else "surge"


def port_sets(cfg: ServeConfig, count: int | None = None) -> tuple[range, range]:
    """The two port sets the `count` replicas (of every pool; default replicas) alternate between, one
    reload to the next: base_port + i at start, then base_port + count + i, then back."""
    count = cfg.replicas if count is None else count
    first = range(cfg.base_port, cfg.base_port + count)
    return first, range(first.stop, first.stop + count)


def next_port(cfg: ServeConfig, index: int, current: int, count: int | None = None) -> int:
    """The port replica `index`'s new process takes: the other set's, never the one in use."""
    first, second = port_sets(cfg, count)
    return second[index] if current == first[index] else first[index]


def port_refusals(cfg: ServeConfig, count: int) -> list[str]:
    """The second port set must exist and stay clear of Nginx's ports."""
    second = range(cfg.base_port + count, cfg.base_port + 2 * count)
    if second.stop - 1 > 65535:
        return [
            f"base_port: {cfg.base_port} leaves no second port set for a reload (up to {second.stop - 1})"
        ]
    taken = {cfg.nginx.port: "nginx.port", cfg.nginx.status_port: "nginx.status_port"}
    return [f"base_port: reload port {p} is {taken[p]}" for p in second if p in taken]


def incoming_plan(new: ReplicaPlan, port: int, reload_id: int) -> ReplicaPlan:
    """The new process of a replica: the new config's plan on its next port, with a config file and a
    log of its own (the old process may still be restarted on its own file while the new one starts)."""
    stem = f"{new.name}.r{reload_id}"
    argv = list(new.argv)
    argv[argv.index("--config") + 1] = str(new.config_path.with_name(f"{stem}.yaml"))
    argv[argv.index("--port") + 1] = str(port)
    return dataclasses.replace(
        new,
        port=port,
        argv=tuple(argv),
        config_path=new.config_path.with_name(f"{stem}.yaml"),
        log_path=new.log_path.with_name(f"{stem}.log"),
    )


@dataclass(frozen=True)
class Prepared:
    """A new config made ready to run: the model fetched and its family placed, as `up` does at start."""

    cfg: ServeConfig  # effective: what the replicas read
    plans: list[ReplicaPlan]  # as plan_replicas lays them out for cfg (start-time ports and files)
    info: dict[str, Any] = field(default_factory=dict)  # what `status` shows of the stack (model, family)


@dataclass(frozen=True)
class Source:
    """Where a reload gets its config: the file and flags `up` was started with, read again.

    read: the config as written (validated; ConfigError names the problem); prepare: effects of `up`'s
    start (fetch the model, place its family, lay out the plans); port_problem: why a port cannot be
    bound now (None: free).
    """

    initial: ServeConfig  # the config as written that `up` started with
    read: Callable[[], Awaitable[ServeConfig]]
    prepare: Callable[[ServeConfig], Awaitable[Prepared]]
    port_problem: Callable[[str, int], str | None] = lambda host, port: None


# -- the `reload` command's view: the outcome of one reload, read from the events ---------------------


def _pairs(replaced: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(
        f"{r['replica']} pid {r['old_pid']} -> {r['new_pid']} (port {r['old_port']} -> {r['new_port']})"
        for r in replaced
    )


def outcome(events: Sequence[Mapping[str, Any]], rid: int) -> tuple[int, str] | None:
    """(exit code, what to print) once reload `rid` has ended in these events; None while it goes on."""
    end = reload_end(events, rid)
    if end is None:
        return None
    replaced = end.get("replaced", [])
    if end["event"] == "reload_done":
        what = _pairs(replaced) or "no replica"
        kept = end.get("kept") or []
        unchanged = f"; kept {', '.join(kept)} (their settings did not change)" if kept else ""
        return 0, f"reload {rid} done in {end.get('wall_s')} s: replaced {what}{unchanged}"
    if end["event"] == "reload_refused":
        return int(end.get("exit_code", 1)), f"reload {rid} refused, nothing was changed: {end.get('error')}"
    before = f"; replaced before it: {_pairs(replaced)}" if replaced else "; no replica was replaced"
    return 1, f"reload {rid} failed at {end.get('replica')}: {end.get('error')}{before}"
