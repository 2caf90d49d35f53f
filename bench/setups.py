"""Which setups one run measures on this hardware, and how `up` is asked for each stack (pure)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from bench import names
from bench.session import Plan
from bench.targets import Hardware, stack_device_flags

GPU_UNEQUAL_SKIPPED = (
    "Unequal replicas: skipped on GPUs. The CPU run slows one replica with busy loops on its core, "
    "which do not slow a GPU replica, and `up` cannot make one replica slower another way (a lower "
    "max_num_seqs, say): its engine settings are the same for every replica."
)


@dataclass(frozen=True)
class SetupPlan:
    """The steps to run (names.STEP_*, in order), the stacks' sizes and `up` flags, and why any differ."""

    steps: tuple[str, ...]
    replicas: int  # of the main stack
    stack_flags: tuple[str, ...]
    one_replica_flags: tuple[str, ...]
    unequal: bool
    together: bool  # start every setup at once (CPU), or one at a time (GPUs: each claims the memory)
    notes: tuple[str, ...] = ()


def plan_setups(hw: Hardware, replicas: int, plan: Plan, skip: Collection[str] = ()) -> SetupPlan:
    """What runs where: on CPU `replicas` replicas pinned to cores; on GPUs one replica per device,
    the first `replicas` devices for the stack and the first one alone for the one-replica stack."""
    notes: list[str] = []
    count = replicas
    if hw.on_gpu and len(hw.gpus) < replicas:
        count = len(hw.gpus)
        notes.append(f"{count} GPU(s) for {replicas} replicas asked for: the stack runs {count} replica(s).")
    wanted = {names.STEP_STACK, *plan.baselines}
    if plan.one_replica and count > 1:
        wanted.add(names.STEP_STACK_1)
    steps = tuple(step for step in names.STEPS if step in wanted and step not in skip)
    unequal = plan.unequal and count > 1 and not hw.on_gpu
    if plan.unequal and hw.on_gpu and names.STEP_STACK in steps:
        notes.append(GPU_UNEQUAL_SKIPPED)
    return SetupPlan(
        steps=steps,
        replicas=count,
        stack_flags=tuple(stack_device_flags(hw, count)),
        one_replica_flags=tuple(stack_device_flags(hw, 1)),
        unequal=unequal,
        together=not hw.on_gpu,
        notes=tuple(notes),
    )
