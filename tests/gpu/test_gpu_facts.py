"""nvidia-smi's answers parsed, CUDA_VISIBLE_DEVICES honoured, and the bounded wait for free GPU memory."""

from __future__ import annotations

import pytest

from hunyuan_serve.gpu import (
    Gpu,
    GpuFacts,
    memory_shortfall,
    parse_mig_list,
    parse_query,
    parse_visible,
    release_waiter,
    selectable,
    uuids_of,
    wait_devices_free,
)

QUERY = """\
0, GPU-aaaa-1111, NVIDIA H100 80GB HBM3, 580.65.06, 9.0, 81559, 512, 81047, Disabled
1, GPU-bbbb-2222, NVIDIA A100-SXM4-40GB, 580.65.06, 8.0, 40960, 100, 40860, Enabled
2, GPU-cccc-3333, Tesla V100, 580.65.06, [N/A], [N/A], [N/A], [N/A], [N/A]
"""
LISTING = """\
GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa-1111)
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-bbbb-2222)
  MIG 3g.20gb     Device  0: (UUID: MIG-dddd-4444)
  MIG 3g.20gb     Device  1: (UUID: MIG-eeee-5555)
GPU 2: Tesla V100 (UUID: GPU-cccc-3333)
"""


def _facts() -> GpuFacts:
    return parse_query(QUERY, parse_mig_list(LISTING))


def test_query_and_mig_listing_are_parsed() -> None:
    facts = _facts()
    assert facts.driver_version == "580.65.06"
    h100, a100, v100 = facts.gpus
    assert h100 == Gpu(0, "GPU-aaaa-1111", "NVIDIA H100 80GB HBM3", (9, 0), 81559, 512, 81047)
    assert a100.mig_uuids == ("MIG-dddd-4444", "MIG-eeee-5555")
    assert (v100.compute_capability, v100.memory_free_mib, v100.mig_uuids) == (None, None, ())


def test_mig_instances_replace_their_gpu_and_uuids_resolve() -> None:
    facts = _facts()
    assert selectable(facts, None) == [0, "MIG-dddd-4444", "MIG-eeee-5555", 2]
    assert uuids_of(facts)[0] == "GPU-aaaa-1111"


@pytest.mark.parametrize(
    ("inherited", "expected"),
    [
        ("2,0", [2, 0]),  # Slurm's order and numbers are kept
        ("GPU-cccc", ["GPU-cccc"]),  # UUID prefixes, as CUDA takes them
        ("MIG-eeee-5555", ["MIG-eeee-5555"]),
        ("0,7", [0]),  # a device that does not exist is dropped
        ("", []),  # no devices at all
        ("0,-1,2", [0]),  # CUDA stops at the first invalid entry
    ],
)
def test_an_inherited_cuda_visible_devices_is_honoured(inherited: str, expected: list[object]) -> None:
    assert selectable(_facts(), inherited) == expected


def test_parse_visible_unset_is_none() -> None:
    assert parse_visible(None) is None


def test_memory_shortfall_is_vllms_own_rule() -> None:
    facts = parse_query("0, GPU-a, X, 580.1, 9.0, 1000, 200, 800, Disabled\n")
    assert memory_shortfall(facts, [0], 0.8) == []
    assert memory_shortfall(facts, [0], 0.9) == ["GPU 0: 800 MiB free, 900 MiB needed"]
    assert memory_shortfall(_facts(), ["MIG-dddd-4444", 2], 0.9) == []  # not measurable: not waited for


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


async def test_wait_returns_once_the_memory_is_released() -> None:
    answers = iter([100, 300, 950])
    clock = _Clock()

    def query() -> GpuFacts:
        return parse_query(f"0, GPU-a, X, 580.1, 9.0, 1000, 0, {next(answers)}, Disabled\n")

    short = await wait_devices_free(
        [0], utilization=0.9, timeout_s=10, poll_s=1, query=query, sleep=clock.sleep, clock=clock
    )
    assert (short, clock.now) == ([], 2.0)


async def test_wait_is_bounded_and_says_what_is_still_held() -> None:
    clock = _Clock()

    def query() -> GpuFacts:
        return parse_query("0, GPU-a, X, 580.1, 9.0, 1000, 900, 100, Disabled\n")

    short = await wait_devices_free(
        [0], utilization=0.9, timeout_s=3, poll_s=1, query=query, sleep=clock.sleep, clock=clock
    )
    assert short == ["GPU 0: 100 MiB free, 900 MiB needed"] and clock.now == 3.0


async def test_cpu_replicas_do_not_wait() -> None:
    events: list[str] = []

    class Plan:
        name = "replica-0"
        gpus: tuple[int | str, ...] = ()

    await release_waiter(0.9, 10, 1, lambda event, **_: events.append(event))(Plan())
    assert events == []


async def test_a_gpu_replica_whose_memory_stays_held_starts_after_the_bound_and_says_so() -> None:
    events: list[tuple[str, dict[str, object]]] = []

    class Plan:
        name = "replica-0"
        gpus: tuple[int | str, ...] = (0,)

    def held() -> GpuFacts:
        return parse_query("0, GPU-a, X, 580.1, 9.0, 1000, 900, 100, Disabled\n")

    wait = release_waiter(0.9, 0.05, 0.01, lambda event, **kw: events.append((event, kw)), query=held)
    await wait(Plan())
    assert [(e, kw["devices"]) for e, kw in events] == [
        ("gpu_memory_not_free", ["GPU 0: 100 MiB free, 900 MiB needed"])
    ]
