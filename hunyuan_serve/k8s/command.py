"""`hunyuan-serve render k8s --out DIR`: its flags, and writing the base into DIR (the only effects)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from hunyuan_serve import __version__
from hunyuan_serve.config import ConfigError, ServeConfig, config_from_args

if TYPE_CHECKING:  # the builders load Jinja and the plan: only when a base is rendered, not per command line
    from hunyuan_serve.k8s.manifests import PodOptions

# The images deploy/container/ builds (`make image`), tagged with the package's version.
FRONT_IMAGE = f"hunyuan-serve-front:{__version__}"
DEFAULT_NAMESPACE = "hunyuan-serve"
DEFAULT_POD_CPU = "4"
DEFAULT_POD_MEMORY = "16Gi"  # also the limit
FLAGS = ("out", "image", "nginx_image", "namespace", "pod_cpu", "pod_memory", "model_pvc", "tls_secret")
_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|Ki|M|Mi|G|Gi|T|Ti|P|Pi|E|Ei)?$")
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$")

POOLS_HELP = """\
k8s: a kustomize base in --out: one Deployment (1 pod) and Service per replica of `up`, the front
Nginx (its nginx.conf from up's template, one upstream server per replica Service), a PDB.
GPU pools: one per --tensor-parallel-size group of --gpus (the ids are only counted: the node's
device plugin picks the GPUs; each pod requests nvidia.com/gpu: tensor_parallel_size), or
--replicas N of them with --device cuda; otherwise --replicas N CPU pools. This machine's GPUs
are never read."""


def replica_image(gpu: bool) -> str:
    """This version's service image of the flavour a pool needs (deploy/container/build.sh tags it so;
    a registry's name comes with --image)."""
    return f"hunyuan-serve:{__version__}-{'gpu' if gpu else 'cpu'}"


def add_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of `render k8s` (refused with the other render targets)."""
    group = parser.add_argument_group("k8s options (render k8s only)", POOLS_HELP)
    add = group.add_argument
    add("--out", metavar="DIR", help="Directory of the base: new, empty, or a previous render (replaced).")
    add(
        "--image",
        metavar="IMAGE",
        help=f"Replica image (default {replica_image(False)} or {replica_image(True)} by the pool's "
        "device: what `make image` builds).",
    )
    add("--nginx-image", metavar="IMAGE", help=f"Front Nginx image (default {FRONT_IMAGE}: `make image`).")
    add("--namespace", metavar="NS", help=f"Namespace of every object (default {DEFAULT_NAMESPACE}).")
    add("--pod-cpu", metavar="Q", help=f"CPU request of a replica pod (default {DEFAULT_POD_CPU}).")
    add(
        "--pod-memory",
        metavar="Q",
        help=f"Memory request and limit of a replica pod (default {DEFAULT_POD_MEMORY}).",
    )
    add(
        "--model-pvc",
        metavar="CLAIM",
        help="PersistentVolumeClaim holding a --model PATH, mounted at PATH (default: the node's hostPath).",
    )
    add(
        "--tls-secret",
        metavar="NAME",
        help="A kubernetes.io/tls Secret (tls.crt, tls.key; e.g. cert-manager's) the front serves HTTPS "
        "with on nginx.tls_port; after a renewal, `kubectl rollout restart` the front (docs/tls.md).",
    )


def wants_k8s(args: argparse.Namespace) -> bool:
    """`render k8s`, or another target given a k8s flag (which cmd_render_k8s refuses)."""
    return args.what == "k8s" or any(getattr(args, flag, None) is not None for flag in FLAGS)


def _checked(value: str | None, default: str, pattern: re.Pattern[str], what: str) -> str:
    text = default if value is None else value
    if not pattern.match(text):
        raise ConfigError(f"{what}: {text!r} is not valid")
    return text


def pod_options(args: argparse.Namespace) -> PodOptions:
    from hunyuan_serve.k8s.manifests import PodOptions
    from hunyuan_serve.k8s.pools import dns_label

    return PodOptions(
        image=None if args.image is None else _checked(args.image, "", _IMAGE, "--image"),
        nginx_image=_checked(args.nginx_image, FRONT_IMAGE, _IMAGE, "--nginx-image"),
        cpu=_checked(args.pod_cpu, DEFAULT_POD_CPU, _QUANTITY, "--pod-cpu"),
        memory=_checked(args.pod_memory, DEFAULT_POD_MEMORY, _QUANTITY, "--pod-memory"),
        model_pvc=dns_label(args.model_pvc, "--model-pvc") if args.model_pvc else None,
        tls_secret=dns_label(args.tls_secret, "--tls-secret") if args.tls_secret else None,
    )


def tls_secret_problem(cfg: ServeConfig, tls_secret: str | None) -> str | None:
    """nginx.tls_cert names a file on this host, which no pod has: on Kubernetes the pair is a Secret."""
    if cfg.nginx.tls_cert and not tls_secret:
        return (
            f"nginx.tls_cert {cfg.nginx.tls_cert} is a file on this host; on Kubernetes the front takes its "
            "pair from a kubernetes.io/tls Secret: pass --tls-secret NAME"
        )
    return None


def open_front_problem(cfg: ServeConfig) -> str | None:
    """up's rule for a non-loopback listener: the front listens on its pod's address, which every pod of
    the cluster reaches, so it needs keys or a say-so. The gateway's peer secret has no place here: a
    NetworkPolicy lets only the front reach the replicas, and a secret is never rendered into a ConfigMap."""
    if cfg.auth.peer_secret_file:
        return (
            "auth.peer_secret_file is for hosts behind `gateway`; on Kubernetes a NetworkPolicy lets only "
            "the front reach the replicas"
        )
    if cfg.auth.keys_file or cfg.auth.allow_open:
        return None
    return (
        "the front Nginx listens on its pod's address, reachable from every pod of the cluster, and no "
        "auth.keys_file is set; set --keys-file (the pods read it from the Secret hunyuan-serve-keys) or "
        "--allow-open to serve it open"
    )


def revision_problem(cfg: ServeConfig) -> str | None:
    """A hub model is fetched by each pod's engine, at its default branch: `up` alone pins engine.revision
    (it downloads once, then hands replicas the local copy), so a pinned revision is refused, not dropped."""
    if cfg.engine.revision and not (cfg.engine.model or "").startswith("/"):
        return (
            "engine.revision: the pods fetch a hub model at its default branch; to pin a revision, put that "
            "snapshot on a volume and pass --model /PATH (with --model-pvc, or on the nodes)"
        )
    return None


def web_files() -> dict[str, str]:
    """The page Nginx serves at / (hunyuan_serve/web), for its ConfigMap."""
    from hunyuan_serve.run.rundir import web_root

    return {p.name: p.read_text(encoding="utf-8") for p in sorted(web_root().iterdir()) if p.is_file()}


def cmd_render_k8s(args: argparse.Namespace) -> int:
    from hunyuan_serve.k8s.base import render_base
    from hunyuan_serve.k8s.manifests import mount_clashes
    from hunyuan_serve.k8s.pools import dns_label, plan_pools

    if args.what != "k8s":
        raise ConfigError(
            f"--{'/--'.join(f.replace('_', '-') for f in FLAGS)} are options of render k8s only"
        )
    if not args.out:
        raise ConfigError("render k8s needs --out DIR")
    cfg = config_from_args(args)
    checks = [open_front_problem(cfg), revision_problem(cfg), tls_secret_problem(cfg, args.tls_secret)]
    problems = [p for p in checks if p] + mount_clashes(cfg)
    if problems:
        raise ConfigError("; ".join(problems))
    namespace = dns_label(args.namespace or DEFAULT_NAMESPACE, "--namespace")
    pools = plan_pools(cfg)
    files = render_base(pools, pod_options(args), namespace, web_files(), cfg)
    out = Path(args.out)
    write_base(out, files)
    kinds = ", ".join(f"{p.name} ({f'{p.gpus} GPU' if p.gpus else 'CPU'})" for p in pools)
    print(f"wrote {len(files)} files to {out}: {kinds}; apply with: kubectl apply -k {out}")
    return 0


def _present(out: Path) -> set[str]:
    return {p.relative_to(out).as_posix() for p in out.rglob("*") if not p.is_dir()}


def write_base(out: Path, files: Mapping[str, str]) -> None:
    """Write the base into out: a new or empty directory, or one that holds only a previous render
    (whose files are removed first); anything else there is refused, naming it."""
    from hunyuan_serve.k8s.base import HEADER, KUSTOMIZATION, referenced_files

    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a directory")
    present = _present(out) if out.exists() else set()
    if present:
        kustomization = out / KUSTOMIZATION
        text = kustomization.read_text(encoding="utf-8") if kustomization.is_file() else ""
        if not text.startswith(HEADER):
            raise ConfigError(
                f"--out {out} is not empty and holds no previous render; choose an empty directory"
            )
        strays = sorted(present - referenced_files(text))
        if strays:
            raise ConfigError(f"--out {out} holds files not from a render: {', '.join(strays[:5])}")
        for name in present:
            (out / name).unlink()
        for folder in sorted((p for p in out.rglob("*") if p.is_dir()), reverse=True):
            if not any(folder.iterdir()):
                folder.rmdir()
    for name, text in files.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
