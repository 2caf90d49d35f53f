"""The vLLM stat logger of the adapter: the scheduler's counts and each step's time, into EngineStats."""

from __future__ import annotations

import logging
from typing import Any

from hunyuan_serve.replica.engine_types import EngineStats

# vLLM's own logging stat logger writes a line per step once iteration details are on (they are: the
# step times feed the bulk width); a replica's log would be mostly those lines.
_PER_STEP_LINE = "Iteration("


class _NoStepLines(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).lstrip("%s").startswith(_PER_STEP_LINE)


def quiet_step_lines() -> None:
    """Drop vLLM's per-step log lines (idempotent: one filter, however many engines a process starts)."""
    logger = logging.getLogger("vllm.v1.metrics.loggers")
    if not any(isinstance(f, _NoStepLines) for f in logger.filters):
        logger.addFilter(_NoStepLines())


def step_of(scheduler_stats: Any, iteration_stats: Any) -> tuple[int, float] | None:
    """A step's sequences (vLLM's iteration details) and seconds, None when the step cannot be timed.

    The seconds are the shortest inter-token latency among the step's decoding sequences: the time, on
    the engine core's clock, from the previous step's outputs to this one's, which is the whole step
    (schedule, forward, sample, outputs) while the engine runs back to back. The details' own
    `elapsed_ms` is not it: it times only the wait on the executor's future, and on the CPU's
    in-process executor that future is already done, so it reads about 0.1 ms at any batch size.
    """
    details = getattr(scheduler_stats, "iteration_details", None)
    if details is None or details.is_dummy:
        return None
    latencies = getattr(iteration_stats, "inter_token_latencies_iter", None)
    if not latencies:
        return None  # no sequence decoded in both this step and the one before: nothing to time
    seqs = int(details.num_ctx_requests) + int(details.num_generation_requests)
    return seqs, float(min(latencies))


def stats_logger_factory(stats: EngineStats) -> Any:
    """A vLLM stat-logger factory that copies the scheduler's running/waiting counts into `stats`, and
    hands each step's sequences and time to `stats.on_step`."""
    from vllm.v1.metrics.loggers import StatLoggerBase

    class _Recorder(StatLoggerBase):
        def __init__(self, vllm_config: Any, engine_index: int = 0) -> None:
            self.stats = stats

        def record(
            self,
            scheduler_stats: Any,
            iteration_stats: Any,
            mm_cache_stats: Any = None,
            engine_idx: int = 0,
        ) -> None:
            if scheduler_stats is None:
                return
            self.stats.record(scheduler_stats.num_running_reqs, scheduler_stats.num_waiting_reqs)
            step = step_of(scheduler_stats, iteration_stats)
            if step is not None and self.stats.on_step is not None:
                self.stats.on_step(*step)

        def log_engine_initialized(self) -> None:
            pass

    return _Recorder
