"""The bulk width's decisions on a fake clock: people arriving and leaving, their pace on flat and
linear engines, keys."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.config.width import BulkWidthSettings
from hunyuan_serve.replica.admission.bulk_width import WidthRule, next_key

FULL = 192  # max_num_seqs 256 less the interactive reserve's quarter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def cpu(beside: int) -> float:
    """A person's seconds per token beside `beside` bulk sequences on a CPU replica: each one costs them
    7% (what the tiny engine on 2 cores read: 1.26x at 0 against idle, 1.62x at 4, 2.74x at 16)."""
    return 0.010 * (1 + 0.07 * beside)


def gpu(beside: int) -> float:
    """... on a GPU, where a decode step hardly moves with the batch."""
    return 0.010 * (1 + 0.0001 * beside)


def steep(beside: int) -> float:
    """... where a single bulk sequence already doubles the person's time: the floor holds."""
    return 0.010 * (1 + beside)


def rule(clock: Clock, **settings: float) -> WidthRule:
    return WidthRule(BulkWidthSettings(**settings), FULL, clock)


def person_calls(width: WidthRule, pace: Callable[[int], float], calls: int, bulk: bool = True) -> list[int]:
    """`calls` of a person one after the other, 0.2 s apart, beside a job (bulk) or on an idle engine:
    the width each ran under."""
    ran = []
    for _ in range(calls):
        width.clock.now += 0.2  # type: ignore[attr-defined]
        probe = width.interactive_arrived()
        now = width.width() if bulk else 0
        ran.append(now)
        width.person_done(pace(now), probe, now)
    return ran


# (seconds since the start, a person's call ends then?, width expected)
PERSON_ARRIVES_WAITS_LEAVES = [
    (0.0, False, FULL),  # nobody yet: full
    (1.0, True, 1),  # a person, the first call a probe: then the floor, as nothing has been compared
    (1.1, False, 1),  # their answer came back; the window still runs
    (5.9, False, 1),  # 4.9 s after the last arrival (window 5 s)
    (6.0, False, FULL),  # the window has passed: full again
    (60.0, False, FULL),
]


@pytest.mark.parametrize(("at", "calls", "expected"), PERSON_ARRIVES_WAITS_LEAVES)
def test_a_person_arrives_waits_and_leaves(at: float, calls: bool, expected: int) -> None:
    clock = Clock()
    width = rule(clock)
    start = clock.now
    for when, call, _ in PERSON_ARRIVES_WAITS_LEAVES:  # replay the story up to this row
        if when > at:
            break
        clock.now = start + when
        if call:
            probe = width.interactive_arrived()
            assert probe and width.width() == 0  # the first call has no baseline yet: a probe
            width.person_done(cpu(0), probe, 0)
    assert width.width() == expected


def test_on_a_flat_engine_bulk_beside_a_person_grows_to_the_full_width() -> None:
    width = rule(Clock())
    ran = person_calls(width, gpu, 60)
    assert ran[0] == 0 and ran[1] == 1  # a probe, then the floor
    assert width.beside == FULL and ran[-1] in (0, FULL)  # full, but for the probes


def test_on_a_linear_engine_bulk_beside_a_person_stays_where_the_pace_holds() -> None:
    width = rule(Clock())  # interactive_step_ratio 1.2: 2 bulk sequences at 7% each still fit, 3 do not
    ran = person_calls(width, cpu, 200)
    settled = [w for w in ran[100:] if w]
    assert max(settled) <= 3 and min(settled) >= 1, settled  # around the most within target
    beside = [cpu(w) for w in ran[100:]]
    assert sum(beside) / len(beside) <= 1.2 * cpu(0)


def test_where_any_bulk_costs_too_much_the_floor_still_runs() -> None:
    width = rule(Clock(), bulk_width_min=2)
    ran = person_calls(width, steep, 50)
    assert set(ran[10:]) <= {0, 2} and width.beside == 2


def test_one_call_in_pace_probe_every_runs_with_no_bulk_beside() -> None:
    width = rule(Clock(), pace_probe_every=4)
    ran = person_calls(width, gpu, 41)
    assert [n for n, w in enumerate(ran) if w == 0] == list(range(0, 41, 4))  # a probe, then 3 calls


def test_a_floor_of_zero_leaves_a_person_alone_where_any_bulk_costs_too_much() -> None:
    width = rule(Clock(), bulk_width_min=0, pace_probe_every=4)
    ran = person_calls(width, steep, 40)
    # After the first probe (0), every call at 0; a probe in 4 tries 1 beside the person, and is over.
    assert ran[:5] == [0, 0, 0, 0, 1] and set(ran[5:]) == {0, 1}
    assert [n for n, w in enumerate(ran) if w == 1] == list(range(4, 40, 4)) and width.beside == 0


def test_a_floor_of_zero_still_grows_to_full_on_a_flat_engine() -> None:
    width = rule(Clock(), bulk_width_min=0)
    ran = person_calls(width, gpu, 60)
    assert ran[:9] == [0] * 8 + [1] and width.beside == FULL  # the probe up at 1 was within target


def test_an_idle_engine_teaches_the_baseline_without_probes() -> None:
    width = rule(Clock())
    person_calls(width, cpu, 3, bulk=False)  # calls with no bulk in the engine: each an alone pace
    assert list(width.alone) == [cpu(0)] * 3
    assert person_calls(width, cpu, 1) == [1]  # the job starts: a baseline is known, no probe first


def test_a_looser_target_for_people_leaves_bulk_more() -> None:
    tight, loose = rule(Clock(), interactive_step_ratio=1.1), rule(Clock(), interactive_step_ratio=2.0)
    assert max(person_calls(tight, cpu, 200)[100:]) < max(person_calls(loose, cpu, 200)[100:])


@pytest.mark.parametrize("pace", [cpu, gpu, steep])
def test_a_pool_with_no_interactive_traffic_keeps_the_full_width(pace: Callable[[int], float]) -> None:
    clock = Clock()
    width = rule(clock)
    for step in range(100):
        clock.now += 1.0
        assert width.width() == FULL, step


def test_a_window_of_zero_keeps_the_width_full_whoever_comes() -> None:
    width = rule(Clock(), interactive_window_s=0)
    assert person_calls(width, steep, 10) == [FULL] * 10


def test_the_width_never_exceeds_full_nor_falls_under_its_floor_even_when_full_is_small() -> None:
    small = WidthRule(BulkWidthSettings(bulk_width_min=8), 3, Clock())
    assert small.floor == 3 and max(person_calls(small, gpu, 40)) == 3
    assert set(person_calls(WidthRule(BulkWidthSettings(bulk_width_min=8), 3, Clock()), steep, 40)) == {0, 3}


def test_a_call_with_no_pace_teaches_nothing() -> None:
    width = rule(Clock())
    probe = width.interactive_arrived()
    width.person_done(None, probe, 0)
    width.person_done(0.0, False, 1)
    assert not width.alone and width.probing == 0 and width.beside == 1


def test_new_bulk_prompts_between_a_persons_strings_are_limited_only_while_the_width_is_narrow() -> None:
    clock = Clock()
    width = rule(clock)
    assert width.prompt_tokens() is None  # nobody yet: the width is full, any prompts
    probe = width.interactive_arrived()
    assert probe and width.width() == 0 and width.prompt_tokens() == 128  # a probe: one width's worth
    width.person_done(cpu(0), probe, 0)
    assert width.width() == 1 and width.prompt_tokens() == 128
    width.beside = 5
    assert width.prompt_tokens() == 640  # in proportion to the width
    width.beside = FULL
    assert width.prompt_tokens() is None  # full beside people (a flat engine): not limited
    width.beside = 1
    clock.now += 6.0  # the window has passed
    assert width.width() == FULL and width.prompt_tokens() is None


def test_on_a_flat_engine_prompts_are_soon_not_limited_and_a_setting_of_zero_never_limits() -> None:
    width = rule(Clock())
    person_calls(width, gpu, 60)
    assert width.beside == FULL and width.prompt_tokens() is None
    off = rule(Clock(), narrow_prompt_tokens=0)
    person_calls(off, steep, 10)
    assert off.width() == 1 and off.prompt_tokens() is None


# (waiting keys oldest first, running per key, weights, the key given the next place)
NEXT_KEY = [
    (["a"], {"a": 40}, {}, "a"),  # alone: whatever it holds
    (["a", "b"], {"a": 4, "b": 0}, {}, "b"),  # b holds nothing yet: b
    (["a", "b"], {"a": 2, "b": 2}, {}, "a"),  # equal: the oldest waiter
    (["b", "a"], {"a": 2, "b": 2}, {}, "b"),
    (["a", "b"], {"a": 3, "b": 2}, {"a": 2}, "a"),  # a's weight 2: 1.5 per weight against b's 2
    ([None, "b"], {"b": 1}, {}, None),  # no keys file: the keyless work is one key among others
]


@pytest.mark.parametrize(("waiting", "running", "weights", "expected"), NEXT_KEY)
def test_a_freed_place_goes_to_the_key_furthest_under_its_share(
    waiting: list[str | None],
    running: dict[str | None, int],
    weights: dict[str | None, int],
    expected: str | None,
) -> None:
    assert next_key(waiting, running, weights) == expected


def test_the_width_settings_are_replica_fields_each_pool_may_set() -> None:
    cfg = ReplicaConfig(interactive_window_s=2, interactive_step_ratio=1.3, bulk_width_min=3)
    assert (cfg.interactive_window_s, cfg.interactive_step_ratio, cfg.bulk_width_min) == (2, 1.3, 3)
    with pytest.raises(ValueError, match="interactive_step_ratio"):
        ReplicaConfig(interactive_step_ratio=1.0)


def test_each_pool_sets_its_own_width_settings() -> None:
    from hunyuan_serve.config import ServeConfig
    from hunyuan_serve.config.serve import resolve_pools

    cfg = ServeConfig.model_validate(
        {
            "replica": {"interactive_step_ratio": 1.3},
            "pools": [
                {"name": "page", "model": "org/A"},
                {"name": "batch", "model": "org/B", "replica": {"interactive_window_s": 0}},
            ],
        }
    )
    page, batch = (pool.cfg.replica for pool in resolve_pools(cfg))
    assert (page.interactive_window_s, page.interactive_step_ratio) == (
        ReplicaConfig().interactive_window_s,
        1.3,
    )
    assert (batch.interactive_window_s, batch.interactive_step_ratio) == (0, 1.3)
