"""The vLLM stat logger of the adapter: the scheduler's counts, into EngineStats."""

from __future__ import annotations

from typing import Any

from hunyuan_serve.replica.engine.interface import EngineStats


def stats_logger_factory(stats: EngineStats) -> Any:
    """A vLLM stat-logger factory that copies the scheduler's running/waiting counts into `stats`."""
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

        def log_engine_initialized(self) -> None:
            pass

    return _Recorder
