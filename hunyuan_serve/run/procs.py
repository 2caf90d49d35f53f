"""Child processes of `up`: spawned in their own session, watched for exit, stopped by process group."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

from hunyuan_serve.run.plan import ReplicaPlan
from hunyuan_serve.run.seams import Proc


async def spawn(
    argv: Sequence[str], env: Mapping[str, str], log_path: Path, cpus: Sequence[int] = ()
) -> asyncio.subprocess.Process:
    """Start argv with its output appended to log_path, as leader of a new process group.

    A new session keeps the terminal's Ctrl-C away from children: `up` decides how they stop.
    With cpus, the process (and all it starts) may run on those CPUs only, from its first instruction.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    if cpus:
        argv = ("taskset", "--cpu-list", ",".join(str(c) for c in cpus), *argv)
    with open(log_path, "ab") as log:
        return await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=asyncio.subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
        )


def signal_group(pgid: int, sig: int) -> None:
    """Signal a whole process group (children a replica left behind included); gone is fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def send(proc: Proc, sig: int) -> None:
    """Signal the process unless it is known to have ended.

    Not proc.send_signal: Popen polls (waitpid) first and would reap the child behind asyncio's back.
    """
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, sig)


def kill_now(proc: Proc) -> None:
    """SIGKILL the process and its group; works on a SIGSTOP-ped process as well."""
    signal_group(proc.pid, signal.SIGKILL)


async def stop(proc: Proc, sig: int, grace_s: float) -> int | None:
    """Send sig to the leader (waking it if stopped), wait up to grace_s, then SIGKILL the group."""
    if proc.returncode is None:
        send(proc, sig)
        send(proc, signal.SIGCONT)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(proc.wait(), timeout=grace_s)
    signal_group(proc.pid, signal.SIGKILL)
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(proc.wait(), timeout=grace_s)
    return proc.returncode


class SubprocessRunner:
    """The supervisor's real process runner: procs.spawn with the plan's cores, log file and group."""

    def __init__(self, before_spawn: Callable[[ReplicaPlan], Awaitable[None]] | None = None) -> None:
        # Awaited before each spawn: a GPU replica's restart can wait there until its devices are free.
        self.before_spawn = before_spawn

    async def spawn(self, plan: ReplicaPlan, env: Mapping[str, str]) -> Proc:
        if self.before_spawn is not None:
            await self.before_spawn(plan)
        return await spawn(plan.argv, env, plan.log_path, plan.cpus)

    def kill(self, proc: Proc) -> None:
        kill_now(proc)

    async def wait(self, proc: Proc) -> int | None:
        returncode = await proc.wait()
        signal_group(proc.pid, signal.SIGKILL)  # children the leader left behind
        return returncode

    async def stop(self, proc: Proc, grace_s: float) -> None:
        await stop(proc, signal.SIGTERM, grace_s)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (zombies count as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def cmdline(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return None


def children(pid: int) -> dict[int, str]:
    """Live child processes of pid with their command lines (Nginx shows its worker states there)."""
    try:
        # One small file instead of a scan of /proc: this runs in a tight loop during a reload.
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
            pids = [int(p) for p in fh.read().split()]
    except OSError:
        pids = []
        for entry in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        pids.append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    found = {}
    for child in pids:
        line = cmdline(child)
        if line:  # a zombie has an empty command line
            found[child] = line
    return found


def processes() -> dict[int, str]:
    """Every live process this user can see, with its command line (zombies have none)."""
    found = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        line = cmdline(int(entry))
        if line:
            found[int(entry)] = line
    return found


def replicas_of(commands: Mapping[int, str], run_dir: Path) -> list[int]:
    """The pids among commands that run a replica of this run dir: `up` hands each its config there."""
    marker = f"hunyuan_serve replica --config {run_dir}/"
    return sorted(pid for pid, line in commands.items() if marker in line)


def wait_gone(pids: Sequence[int], timeout_s: float, poll_s: float) -> list[int]:
    """Wait up to timeout_s for pids (not our children: nothing to reap) to end; those still alive."""
    deadline = time.monotonic() + timeout_s
    while (left := [p for p in pids if pid_alive(p)]) and time.monotonic() < deadline:
        time.sleep(poll_s)
    return left


def end_orphan(pid: int, steps: Sequence[tuple[int, float]], poll_s: float) -> None:
    """Stop a process another `up` started (a group leader): each (signal, grace) in turn until it is
    gone, then SIGKILL to its group for what it left behind (an Nginx master's workers)."""
    for sig, grace_s in steps:
        if not pid_alive(pid):
            break
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
        wait_gone([pid], grace_s, poll_s)
    signal_group(pid, signal.SIGKILL)
