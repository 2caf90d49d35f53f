"""The bulk width's decisions on a fake clock: people arriving and leaving, step-time models, keys."""

from __future__ import annotations

import pytest

from hunyuan_serve.config import ReplicaConfig
from hunyuan_serve.config.width import BulkWidthSettings
from hunyuan_serve.replica.bulk_width import WidthRule, next_key
from hunyuan_serve.replica.step_model import StepModel

FULL = 192  # max_num_seqs 256 less the interactive reserve's quarter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def learnt(intercept_s: float, per_seq_s: float, sizes: range = range(1, 129)) -> StepModel:
    """A model that saw one step of each size on an engine whose step is intercept + per_seq x size."""
    model = StepModel()
    for seqs in sizes:
        model.observe(seqs, intercept_s + per_seq_s * seqs)
    return model


CPU = learnt(4.8e-3, 0.042e-3)  # a CPU replica: 4.8 ms idle, 8.8 ms with ~96 bulk sequences
GPU = learnt(10e-3, 1e-7)  # a decode step nearly flat in batch size
STEEP = learnt(4.8e-3, 5e-3)  # every sequence doubles the step: the floor holds


def rule(clock: Clock, **settings: float) -> WidthRule:
    return WidthRule(BulkWidthSettings(**settings), FULL, clock)


# (seconds since the start, a person arrives then?, people in the engine, width expected)
PERSON_ARRIVES_WAITS_LEAVES = [
    (0.0, False, 0, FULL),  # nobody yet: full
    (1.0, True, 1, 46),  # a person: the CPU line allows 1.4 x the step of one sequence
    (1.1, False, 0, 46),  # their answer came back; the window still runs
    (3.0, True, 3, 46),  # three at once: their own sequences count against the step
    (7.9, False, 0, 46),  # 4.9 s after the last arrival (window 5 s)
    (8.0, False, 0, FULL),  # the window has passed: full again
    (60.0, False, 0, FULL),
]


@pytest.mark.parametrize(("at", "arrives", "people", "expected"), PERSON_ARRIVES_WAITS_LEAVES)
def test_a_person_arrives_waits_and_leaves_on_a_cpu(
    at: float, arrives: bool, people: int, expected: int
) -> None:
    clock = Clock()
    width = rule(clock)
    start = clock.now
    for when, arrived, _, _ in PERSON_ARRIVES_WAITS_LEAVES:  # replay the story up to this row
        if when > at:
            break
        clock.now = start + when
        if arrived:
            width.interactive_arrived()
    assert width.width(CPU, people) == expected


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (GPU, FULL),  # flat: a person's step hardly moves with the batch, so bulk keeps it all
        (CPU, 46),  # linear: narrowed to what keeps a person's step within 1.4x
        (STEEP, 4),  # no width keeps the step within target: bulk_width_min still runs
        (StepModel(), FULL // 2),  # nothing measured yet: half, which teaches the model a second size
        (learnt(4.8e-3, 0.042e-3, range(90, 100)), FULL // 2),  # one size class only: no line yet
    ],
)
def test_the_width_with_a_person_active_comes_from_the_measured_line(model: StepModel, expected: int) -> None:
    clock = Clock()
    width = rule(clock)
    width.interactive_arrived()
    assert width.width(model, 1) == expected


@pytest.mark.parametrize("model", [CPU, GPU, STEEP, StepModel()])
def test_a_pool_with_no_interactive_traffic_keeps_the_full_width(model: StepModel) -> None:
    clock = Clock()
    width = rule(clock)
    for step in range(100):
        clock.now += 1.0
        assert width.width(model, 0) == FULL, step


def test_a_window_of_zero_keeps_the_width_full_whoever_comes() -> None:
    clock = Clock()
    width = rule(clock, interactive_window_s=0)
    width.interactive_arrived()
    assert width.width(CPU, 1) == FULL


@pytest.mark.parametrize(("ratio", "expected"), [(1.1, 11), (1.4, 46), (2.0, 115), (3.0, FULL)])
def test_a_looser_target_for_people_leaves_bulk_a_wider_width(ratio: float, expected: int) -> None:
    clock = Clock()
    width = rule(clock, interactive_step_ratio=ratio)
    width.interactive_arrived()
    assert width.width(CPU, 1) == expected


def test_the_width_never_exceeds_full_nor_falls_under_its_floor_even_when_full_is_small() -> None:
    clock = Clock()
    small = WidthRule(BulkWidthSettings(bulk_width_min=8), 3, clock)
    small.interactive_arrived()
    assert [small.width(m, 1) for m in (CPU, GPU, STEEP)] == [3, 3, 3]


def test_the_step_model_fits_the_line_it_saw_and_is_flat_where_size_costs_nothing() -> None:
    line = CPU.line()
    assert line is not None
    assert line.intercept_s == pytest.approx(4.8e-3) and line.per_seq_s == pytest.approx(0.042e-3)
    falling = learnt(10e-3, -1e-6)  # larger batches measured faster (noise): flat, never negative
    flat = falling.line()
    assert flat is not None and flat.per_seq_s == 0.0 and flat.seqs_within(1.0) == float("inf")


def test_the_step_model_follows_a_machine_that_got_slower() -> None:
    model = learnt(4.8e-3, 0.042e-3)
    for _ in range(400):  # a neighbour now takes half the core: every step twice as long
        for seqs in (1, 3, 6, 12, 24, 48, 96):
            model.observe(seqs, 2 * (4.8e-3 + 0.042e-3 * seqs))
    line = model.line()
    assert line is not None and line.intercept_s == pytest.approx(9.6e-3, rel=0.05)


def test_cold_steps_and_a_batch_filling_up_do_not_flatten_the_line() -> None:
    # As a fresh tiny engine on a CPU ran them: its first steps alone twice a warm one's, then a job of
    # 24 at 1.2 + 0.02 ms a sequence, passing through sizes 5 and 14 in two steps that carried prefills.
    model = StepModel()
    for n in range(60):
        model.observe(1, 3.9e-3 if n < 4 else 1.22e-3)
    for seqs, seconds in ((5, 5.8e-3), (5, 5.2e-3), (14, 4.3e-3), (13, 4.8e-3)):
        model.observe(seqs, seconds)
    for n in range(45):
        model.observe(24, 8.1e-3 if n == 0 else 1.7e-3)
    line = model.line()
    assert line is not None and line.per_seq_s == pytest.approx(0.02e-3, rel=0.5), line


def test_empty_and_dummy_steps_teach_nothing() -> None:
    model = StepModel()
    model.observe(0, 0.004)
    model.observe(5, 0.0)
    assert model.line() is None


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
    cfg = ReplicaConfig(interactive_window_s=2, interactive_step_ratio=1.2, bulk_width_min=1)
    assert (cfg.interactive_window_s, cfg.interactive_step_ratio, cfg.bulk_width_min) == (2, 1.2, 1)
    with pytest.raises(ValueError, match="interactive_step_ratio"):
        ReplicaConfig(interactive_step_ratio=1.0)


def test_a_step_is_read_from_vllms_iteration_details_and_its_log_line_dropped() -> None:
    import logging
    from types import SimpleNamespace

    from hunyuan_serve.replica.engine_stats import quiet_step_lines, step_of

    # elapsed_ms is what vLLM's CPU executor reports whatever the batch: the step is timed by the
    # engine core's clock between outputs, the shortest inter-token latency of the step.
    details = SimpleNamespace(num_ctx_requests=2, num_generation_requests=30, elapsed_ms=0.1, is_dummy=False)
    decoded = SimpleNamespace(inter_token_latencies_iter=[0.0091, 0.0085, 0.0240])
    assert step_of(SimpleNamespace(iteration_details=details), decoded) == (32, 0.0085)
    prefills_only = SimpleNamespace(inter_token_latencies_iter=[])
    assert step_of(SimpleNamespace(iteration_details=details), prefills_only) is None
    assert step_of(SimpleNamespace(iteration_details=details), None) is None
    assert step_of(SimpleNamespace(iteration_details=None), decoded) is None
    assert step_of(SimpleNamespace(iteration_details=SimpleNamespace(is_dummy=True)), decoded) is None
    quiet_step_lines()
    quiet_step_lines()  # once is enough, however many engines a process starts
    logger = logging.getLogger("vllm.v1.metrics.loggers")
    assert [type(f).__name__ for f in logger.filters].count("_NoStepLines") == 1

    def kept(msg: str) -> bool:
        return bool(logger.filter(logging.LogRecord(logger.name, logging.INFO, "", 0, msg, ("",), None)))

    # vLLM's own format (vllm/v1/metrics/loggers.py _log_iteration_details) against its other lines
    assert not kept("%sIteration(%d): %d context requests, %d context tokens")
    assert kept("%sAvg prompt throughput: %.1f tokens/s")


def test_each_pool_sets_its_own_width_settings() -> None:
    from hunyuan_serve.config import ServeConfig
    from hunyuan_serve.config.serve import resolve_pools

    cfg = ServeConfig.model_validate(
        {
            "replica": {"interactive_step_ratio": 1.2},
            "pools": [
                {"name": "page", "model": "org/A"},
                {"name": "batch", "model": "org/B", "replica": {"interactive_window_s": 0}},
            ],
        }
    )
    page, batch = (pool.cfg.replica for pool in resolve_pools(cfg))
    assert (page.interactive_window_s, page.interactive_step_ratio) == (
        ReplicaConfig().interactive_window_s,
        1.2,
    )
    assert (batch.interactive_window_s, batch.interactive_step_ratio) == (0, 1.2)
