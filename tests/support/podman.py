"""This machine's podman for the image tests: its flags, its pip setup for the builds, the builds."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from configparser import ConfigParser
from pathlib import Path

from hunyuan_serve import __version__

ROOT = Path(__file__).resolve().parents[2]
CPU_IMAGE = f"hunyuan-serve:{__version__}-cpu"
FRONT_IMAGE = f"hunyuan-serve-front:{__version__}"
KEY = "sk-image-test-0123456789"  # the API key the test containers are started with
PIP_DIR = "/run/hs-pip"  # where a build sees this host's pip settings, mounted read-only


def podman() -> str:
    found = shutil.which("podman")
    if found is None:
        raise RuntimeError("no podman: `make image-test` installs it (tests/container/setup.sh)")
    return found


def limits() -> tuple[int, int]:
    """nofile and nproc no higher than the shell's: podman's defaults are higher and refused here. nproc
    is also capped at 32768, buildah's default: above it runc's setrlimit was refused here (EPERM),
    even below the shell's 96368."""
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)[0]
    return min(nofile, 65536), min(nproc, 32768)


def machine_flags() -> list[str]:
    """What this kind of machine needs on every `podman run`: runc (crun refuses its hybrid cgroup
    layout) and rlimits no higher than the shell's. The machine's, not the image's or the user's."""
    nofile, nproc = limits()
    return [
        "--runtime",
        "runc",
        "--ulimit",
        f"nofile={nofile}:{nofile}",
        "--ulimit",
        f"nproc={nproc}:{nproc}",
    ]


def containers_conf(directory: Path) -> Path:
    """The same two settings for `podman kube play`, which takes no --runtime or --ulimit flag."""
    nofile, nproc = limits()
    path = directory / "containers.conf"
    path.write_text(
        f'[containers]\ndefault_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]\n'
        '[engine]\nruntime = "runc"\n'
    )
    return path


def run(args: Sequence[str], timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([podman(), *args], capture_output=True, text=True, timeout=timeout)
    if check and done.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} exited {done.returncode}: {done.stderr[-3000:]}")
    return done


def image_exists(name: str) -> bool:
    return run(["image", "exists", name], check=False).returncode == 0


def pip_settings(config: str) -> dict[str, str]:
    """This host's pip settings (`pip config list` output) as key -> value."""
    settings: dict[str, str] = {}
    for line in config.splitlines():
        key, _, value = line.partition("=")
        settings[key.rsplit(".", 1)[-1]] = value.strip().strip("'\"")
    return settings


def pip_mounts(scratch: Path) -> list[str]:
    """Build flags that hand this host's pip setup (its CA bundle, wheel store, local indexes,
    constraints) to the image's pip as read-only mounts, named by PIP_CONFIG_FILE: nothing in a layer."""
    pip = [sys.executable, "-m", "pip", "config", "list"]
    listed = subprocess.run(pip, capture_output=True, text=True, check=False).stdout
    settings = pip_settings(listed)
    conf = ConfigParser()
    conf["global"] = {}
    flags = ["-v", f"{scratch}:{PIP_DIR}:ro", "--build-arg", f"PIP_CONFIG_FILE={PIP_DIR}/pip.conf"]
    for key in ("cert", "constraint"):
        if key in settings and Path(settings[key]).is_file():
            shutil.copy(settings[key], scratch / key)
            conf["global"][key] = f"{PIP_DIR}/{key}"
    for key in ("find-links", "extra-index-url", "index-url"):
        values = list(dict.fromkeys(settings.get(key, "").split()))
        for value in values:
            local = Path(value.removeprefix("file://"))
            # A local index's pages link to ../files: the index's whole tree is mounted.
            tree = local.parent if local.name == "simple" else local
            if local.is_dir():
                flags += ["-v", f"{tree}:{tree}:ro"]
        if values:
            conf["global"][key] = " ".join(values)
    with (scratch / "pip.conf").open("w") as out:
        conf.write(out)
    return flags


def build(flavour: str = "cpu", extra: Sequence[str] = (), timeout: float = 3600) -> None:
    """deploy/container/build.sh (what `make image` runs, its base found or made by base.sh as a user's
    would be: no registry answers here), with this host's pip."""
    with tempfile.TemporaryDirectory(prefix="hs-pip-") as scratch:
        os.chmod(scratch, 0o755)
        flags = ["--build-arg", "TORCH_INDEX=", *pip_mounts(Path(scratch))]
        # podman build takes no --runtime: its RUN steps read the runtime from CONTAINERS_CONF.
        conf = containers_conf(Path(scratch))
        env = {**os.environ, "FLAVOUR": flavour, "ENGINE": podman(), "CONTAINERS_CONF": str(conf)}
        done = subprocess.run(
            ["bash", str(ROOT / "deploy/container/build.sh"), *flags, *machine_flags()[2:], *extra],
            env=env, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
    if done.returncode != 0:
        raise AssertionError(textwrap.shorten(done.stdout[-2000:], 2000) + "\n" + done.stderr[-4000:])


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def container_run(
    name: str, volumes: Sequence[str], command: Sequence[str] = (), flags: Sequence[str] = (),
    image: str = CPU_IMAGE, detach: bool = True, timeout: float = 120,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """`podman run` of IMAGE as its own non-root user on a read-only root, with this machine's flags."""
    mounts = [arg for volume in volumes for arg in ("-v", volume)]
    args = ["run", *(["-d"] if detach else ["--rm"]), "--name", name, *machine_flags(), "--read-only"]
    return run([*args, *mounts, *flags, image, *command], timeout=timeout, check=detach)


def exec_in(name: str, *command: str, timeout: float = 60) -> str:
    return run(["exec", name, *command], timeout=timeout).stdout


def host_pids(name: str) -> set[int]:
    """The container's processes as host pids (podman top reads its pid namespace from the host)."""
    out = run(["top", name, "hpid"], check=False).stdout.split()[1:]
    return {int(p) for p in out if p.isdigit()}


def remove(*names: str) -> None:
    for name in names:
        run(["rm", "-f", "-t", "0", name], check=False, timeout=120)


def remove_volumes(*names: str) -> None:
    for name in names:
        run(["volume", "rm", "-f", name], check=False)
