"""Forking vLLM's engine core on CPU instead of spawning it, and what the forked core must not keep."""

from __future__ import annotations

import functools
import os
import signal
import socket
import stat
from collections.abc import MutableMapping

from hunyuan_serve.config import EngineConfig
from hunyuan_serve.replica.engine import variables

# vLLM's CPU platform sets VLLM_WORKER_MULTIPROC_METHOD=spawn while it builds the engine config
# (vllm/platforms/cpu.py, check_and_update_config), so the engine core process starts a new interpreter
# and imports torch and vLLM again: about 5.6 s of an 8.4 s engine build on the tiny model, against
# 2.8 s forked, same throughput (measured in one run, one core). vLLM's own default elsewhere is fork
# (vllm/utils/system_utils.py, get_mp_context); it spawns only once CUDA is initialised, and a GPU
# replica never comes here.
MULTIPROC_METHOD_ENV = variables.WORKER_MULTIPROC_METHOD


def forks_engine_core(cfg: EngineConfig, on_cpu: bool) -> bool:
    """Whether this engine's core is forked: CPU, one device, the model inside the core (no worker
    process of its own, whose CPU binding vLLM sets up per spawned worker)."""
    single = not cfg.cpu_worker_process and cfg.tensor_parallel_size == 1
    return on_cpu and cfg.cpu_fork_engine_core and single


def use_fork(environ: MutableMapping[str, str]) -> None:
    """After vLLM's config is built (it writes spawn there), before the engine core starts."""
    environ[MULTIPROC_METHOD_ENV] = "fork"
    forget_the_front_in_forked_children()


@functools.cache  # once a process: at-fork handlers cannot be taken back
def forget_the_front_in_forked_children() -> None:
    os.register_at_fork(after_in_child=forget_the_front)


def forget_the_front() -> None:
    """In a forked child: let go of what belongs to the replica's HTTP front.

    - Every listening socket, and every TCP connection: the port must not stay open in the engine core
      (a replica killed by hand would leave it held by an orphan, connections queued there unanswered),
      and a connection the front closes must really close (the child's copy would hold it open, so its
      peer would never see the end of it).
    - The signal wakeup descriptor: it is the front's event-loop pipe, and a signal the child takes
      would otherwise wake the front as if it were the front's.
    """
    signal.set_wakeup_fd(-1)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode) and _the_fronts(fd):
                os.close(fd)
        except OSError:  # the listing's own descriptor, gone by now
            continue


def _the_fronts(fd: int) -> bool:
    sock = socket.socket(fileno=fd)
    try:
        listening = bool(sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN))
        return listening or sock.family in (socket.AF_INET, socket.AF_INET6)
    finally:
        sock.detach()  # the descriptor stays open: closing is the caller's decision
