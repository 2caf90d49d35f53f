"""Replica pools on Kubernetes: one pod (Deployment + Service) per replica of `up`'s plan; pure."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from hunyuan_serve.config import DEFAULT_POOL, ConfigError, ServeConfig, resolve_pools
from hunyuan_serve.config import Pool as ConfigPool
from hunyuan_serve.edge.routing import Routing, routing_from_states
from hunyuan_serve.families import DEFAULT_HUB_MODEL
from hunyuan_serve.run.health import State
from hunyuan_serve.run.plan import ReplicaPlan, plan_replicas, with_replica_engine

NAME = "hunyuan-serve"  # app.kubernetes.io/name, and the prefix of every resource's name
# Where each replica pod mounts the replicas' ConfigMap: its own directory, since /etc/hunyuan-serve is
# where the docs put the keys file, which is mounted from a Secret.
CONFIG_DIR = Path("/etc/hunyuan-serve/replicas")
PYTHON = "python"  # the image's interpreter with hunyuan-serve installed (the plan's argv[0])
# A pod's port must be reachable from its Service, so replicas and Nginx bind every address of the pod.
POD_BIND = "0.0.0.0"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@dataclass(frozen=True)
class PodPlan:
    """One replica of `up` as one pod: its plan (port, argv, config path), GPUs and config."""

    plan: ReplicaPlan
    gpus: int  # nvidia.com/gpu of its pod: tensor_parallel_size on a GPU pool, 0 on CPU
    config: ServeConfig  # what its replica reads: up's per-replica config, bound to the pod's address

    @property
    def name(self) -> str:
        """The Deployment's and the Service's name (a DNS label: Nginx resolves it in the namespace)."""
        return f"{NAME}-{self.plan.name}"

    @property
    def addr(self) -> str:
        """The pool's Service as Nginx's upstream names it: a ClusterIP that outlives the pod."""
        return f"{self.name}:{self.plan.port}"


def dns_label(value: str, what: str) -> str:
    """A Kubernetes name (RFC 1123 label), or a ConfigError naming the option."""
    if not _DNS_LABEL.match(value):
        raise ConfigError(
            f"{what}: {value!r} is not a DNS label (lowercase letters, digits, '-', at most 63)"
        )
    return value


def gpu_pods(cfg: ServeConfig) -> int:
    """GPU pools: one per tensor_parallel_size group of --gpus (the ids are only counted: on Kubernetes
    the device plugin picks the devices), or --replicas of them with engine.device cuda; else none."""
    if cfg.engine.device == "cpu":
        return 0
    if cfg.gpus is not None:
        return len(cfg.gpus) // cfg.engine.tensor_parallel_size
    return cfg.replicas if cfg.engine.device == "cuda" else 0


def model_of(cfg: ServeConfig, on_gpu: bool) -> str:
    """The model every pod serves: as given, the default hub model on GPUs; CPU pools need one given
    (the CPU demo model is converted on a machine, not shipped in an image)."""
    if cfg.engine.model:
        return cfg.engine.model
    if on_gpu:
        return DEFAULT_HUB_MODEL
    raise ConfigError("render k8s on CPU needs --model (a hub id, or a path on a volume of the pods)")


def plan_pools(cfg: ServeConfig) -> list[PodPlan]:
    """The pods of this config, from `up`'s own plan (names, ports, argv), never this machine's GPUs:
    with several config pools each pool's replicas, named after their pool."""
    pools = resolve_pools(cfg)
    fusing = [pool.name for pool in pools if pool.chimera_pool]
    if fusing:
        # up sends a pool's ensembles through its own host's Nginx (/_hs/pool/NAME/); a pod is not on
        # the front's loopback, and the base has no route of that kind yet.
        raise ConfigError(
            f"pools.{fusing[0]}.chimera_pool: render k8s does not wire ensembles across pools yet; drop "
            "chimera_pool, or set the pool's replica.chimera_url to the Chimera pool's Service"
        )
    if len(pools) == 1:
        return _pods(pools[0].cfg, None)
    return [pod for pool in pools for pod in _pods(pool.cfg, pool.name)]


def _pods(cfg: ServeConfig, pool: str | None) -> list[PodPlan]:
    tp = cfg.engine.tensor_parallel_size
    pods = gpu_pods(cfg)
    # Device ids stand in for the GPUs of a node so the plan groups them; its env (CUDA_VISIBLE_DEVICES,
    # core binding) is this host's and stays out of the pods.
    visible: list[int | str] = list(range(pods * tp)) if pods and cfg.gpus is None else []
    plans = plan_replicas(cfg, visible_gpus=visible, cores=[0], run_dir=CONFIG_DIR, python=PYTHON)
    if pool is not None:
        plans = [_in_pool(plan, pool) for plan in plans]
    model = model_of(cfg, bool(pods))
    served = with_replica_engine(cfg, plans, model, model)
    return [PodPlan(plan, tp if plan.gpus else 0, pod_replica_config(served, plan)) for plan in plans]


def _in_pool(plan: ReplicaPlan, pool: str) -> ReplicaPlan:
    """A plan renamed after its pool (every pool numbers its replicas from 0): its own pod, config file."""
    name = f"{pool}-{plan.name}"
    config_path = plan.config_path.with_name(f"{name}.yaml")
    argv = tuple(str(config_path) if a == str(plan.config_path) else a for a in plan.argv)
    return replace(plan, name=name, config_path=config_path, argv=argv, pool=pool)


def pod_replica_config(cfg: ServeConfig, plan: ReplicaPlan) -> ServeConfig:
    """What `up` writes for this replica (its own port), bound to the pod's address."""
    data = cfg.model_dump(mode="json")
    data["replica"].update(port=plan.port, host=POD_BIND)
    return ServeConfig.model_validate(data)


def front_config(
    pools: list[PodPlan], cfg: ServeConfig | None = None, tls_dir: str | None = None
) -> ServeConfig:
    """Nginx's config: the replicas' own (so /health names their model), or with several config pools
    the whole config (which pool is the default, the dialects'), listening on the pod's address; with
    tls_dir, serving the pair of the TLS Secret mounted there (tls.crt and tls.key, as it names them)."""
    front = cfg if cfg is not None and len(cfg.pools) > 1 else pools[0].config
    nginx: dict[str, Any] = {"listen": POD_BIND}
    if tls_dir is not None:
        nginx.update(tls_cert=f"{tls_dir}/tls.crt", tls_key=f"{tls_dir}/tls.key")
    return front.model_copy(update={"nginx": front.nginx.model_copy(update=nginx)})


def front_routing(pools: list[PodPlan]) -> Routing:
    """Every pool's Service, all up: Kubernetes keeps a pod out of its Service until it is ready."""
    if all(pool.plan.pool == DEFAULT_POOL for pool in pools):
        return routing_from_states([(pool.addr, State.READY) for pool in pools])
    members = [(pool.addr, State.READY) for pool in pools]
    return routing_from_states(members, [p.plan.name for p in pools], [p.plan.pool for p in pools])


def front_pools(pools: list[PodPlan]) -> list[ConfigPool]:
    """Each config pool as the front routes to it: the config its replicas read (their served name)."""
    first: dict[str, ServeConfig] = {}
    for pool in pools:
        first.setdefault(pool.plan.pool, pool.config)
    return [ConfigPool(name, config) for name, config in first.items()]
