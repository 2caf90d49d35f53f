"""The vLLM adapter behind the Engine protocol: AsyncLLMEngine started, asked and stopped."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hunyuan_serve.config import EngineConfig
from hunyuan_serve.families.base import Prompt
from hunyuan_serve.gpu import resolve_device
from hunyuan_serve.models import served_name
from hunyuan_serve.replica.encoding import PromptEncoder
from hunyuan_serve.replica.engine.args import engine_kwargs, scheduler_cls, stop_token_ids, torch_facts
from hunyuan_serve.replica.engine.device_env import (
    DeviceMismatch,
    apply_cpu_env,
    apply_cuda_env,
    device_mismatch,
)
from hunyuan_serve.replica.engine.fork import forks_engine_core, use_fork
from hunyuan_serve.replica.engine.interface import ENCODED_MEMO_SIZE, Delta, EngineStats, Generation, Sampling
from hunyuan_serve.replica.engine.internals import installed_version, require_installed
from hunyuan_serve.replica.engine.stat_logger import stats_logger_factory
from hunyuan_serve.replica.engine.width_file import WidthWriter


class SchedulerNotBuilt(RuntimeError):
    """vLLM's engine core started without the pausing scheduler; the message says which vLLM."""


@dataclass
class VllmEngine:
    """AsyncLLMEngine behind the Engine protocol; prompts are tokenized here with the chat template."""

    cfg: EngineConfig
    model: str
    ignore_eos: bool = False  # test knob only (random weights emit EOS at once); never set in production
    device: str = ""  # cuda or cpu; empty: cfg.device (auto asks nvidia-smi, never torch)
    model_name: str = ""
    max_model_len: int = 0
    stats: EngineStats = field(default_factory=EngineStats)
    _engine: Any = None
    _tokenizer: Any = None
    _stop_ids: list[int] = field(default_factory=list)
    _encoder: PromptEncoder | None = None
    _live: dict[str, int] = field(default_factory=dict)  # our request ids in the engine -> their priority
    _width: WidthWriter | None = None  # the bulk width vLLM's scheduler reads (people_scheduler.py)

    async def start(self) -> None:
        if self._engine is not None:  # already started (the benchmark shares one engine with an app)
            return
        # Building blocks for tens of seconds (import, engine-core start): a thread keeps /health answering.
        # A daemon thread, not the default executor: asyncio.run() joins that executor on exit, so a
        # replica stopped while loading would hang until the build finished.
        loop = asyncio.get_running_loop()
        built: asyncio.Future[None] = loop.create_future()

        def settle(error: BaseException | None) -> None:
            if built.done():
                return
            if error is None:
                built.set_result(None)
            else:
                built.set_exception(error)

        def build() -> None:
            error: BaseException | None = None
            try:
                self._build()
            except BaseException as err:  # handed to the awaiting coroutine, which reports it
                error = err
            with contextlib.suppress(RuntimeError):  # the loop may be closed when we stopped early
                loop.call_soon_threadsafe(settle, error)

        threading.Thread(target=build, name="engine-build", daemon=True).start()
        await built
        self.model_name = served_name(self.model, self.cfg.served_model_name)

    def _build(self) -> None:
        # Nothing here may touch CUDA before vLLM is imported: the device kind is the plan's, and the
        # environment is set before the first import of torch (vllm imports it).
        device = self.device or resolve_device(self.cfg.device)
        on_cpu = device == "cpu"
        if on_cpu:
            apply_cpu_env(os.environ, self.cfg, sorted(os.sched_getaffinity(0)))
        else:
            apply_cuda_env(os.environ)
        from vllm import AsyncEngineArgs, AsyncLLMEngine

        problem = device_mismatch(device, torch_facts())
        if problem is not None:
            raise DeviceMismatch(problem)
        # Every vLLM name relied on is there, or nothing starts (a wrong build is told as that, above).
        require_installed()
        from transformers import AutoTokenizer

        self._tokenizer = AutoTokenizer.from_pretrained(
            self.cfg.tokenizer or self.model, trust_remote_code=self.cfg.trust_remote_code
        )
        self._encoder = PromptEncoder(self._tokenizer, ENCODED_MEMO_SIZE)
        if Path(self.model).is_dir():
            self._stop_ids = stop_token_ids(Path(self.model))
        self._width = WidthWriter()
        self.stats.apply_bulk_width = self._width.write
        self.stats.acknowledged = self._width.acknowledged
        scheduler = scheduler_cls(os.environ)
        args = AsyncEngineArgs(
            **engine_kwargs(self.cfg, self.model, on_cpu, str(self._width.path), scheduler)
        )
        recorder = stats_logger_factory(self.stats)
        from vllm import envs

        # A cache an earlier engine of this process left would hide the variables set above.
        envs.disable_envs_cache()
        vllm_config = args.create_engine_config()
        if forks_engine_core(self.cfg, on_cpu):
            use_fork(os.environ)
        self._engine = AsyncLLMEngine.from_vllm_config(
            vllm_config,
            stat_loggers=[recorder],
            enable_log_requests=args.enable_log_requests,
            disable_log_stats=args.disable_log_stats,
        )
        self._require_scheduler(scheduler)
        # vLLM reads its environment variables through a module __getattr__ on every access, several
        # times per output on the frontend's path; its engine core caches them once started
        # (vllm/v1/engine/core.py calls enable_envs_cache) and so may this process: ours are all set
        # above, before the engine exists. A tenth of the frontend's CPU per string here.
        envs.enable_envs_cache()
        self.stats.unscheduled = self._unscheduled_by_priority
        # What vLLM's own server does once started (vllm/entrypoints/launchers/utils/server_utils.py):
        # torch's and transformers' start-up objects leave the collector's view, so a full collection
        # walks only what serving allocated. Measured on the tiny engine, 1,500 strings a round: the
        # event loop's longest pause 439 ms -> 42-55 ms (bench/results/frontend/).
        from vllm.utils.gc_utils import freeze_gc_heap

        freeze_gc_heap()
        self.max_model_len = int(self._engine.model_config.max_model_len)

    def _require_scheduler(self, scheduler: str) -> None:
        """The engine core builds its scheduler before it answers the start, so the pausing one has
        written its pid by now; without it people-first would be off with nothing said."""
        if self._width is not None and self._width.acknowledged().scheduler_pid:
            return
        self.shutdown()
        raise SchedulerNotBuilt(
            f"{installed_version()} did not build the pausing scheduler (engine arg scheduler_cls="
            f"{scheduler}): bulk work would run beside people unpaused, so the replica does not start"
        )

    def _unscheduled_by_priority(self) -> dict[int, int]:
        """Per priority, our requests vLLM holds and has not scheduled yet (read when /metrics is).

        From vLLM's frontend request states (vllm/v1/engine/output_processor.py RequestState, its
        RequestStateStats.scheduled_ts, set from the engine core's SCHEDULED event whatever the
        output kind); n > 1 children share their parent's external id.
        """
        counts = dict.fromkeys(set(self._live.values()), 0)
        if self._engine is None:
            return counts
        # Read by name: replica/engine/internals.py holds them, checked at the start.
        states = self._engine.output_processor.request_states
        waiting = {
            state.external_req_id
            for state in list(states.values())
            if state.stats is not None and not state.stats.scheduled_ts
        }
        for request_id in waiting:
            priority = self._live.get(str(request_id))
            if priority is not None:
                counts[priority] += 1
        return counts

    def _token_ids(self, prompt: Prompt) -> list[int]:
        if self._encoder is None:
            raise RuntimeError("engine not started: no tokenizer yet")
        return self._encoder.ids(prompt)

    def count_prompt_tokens(self, prompt: Prompt) -> int:
        return len(self._token_ids(prompt))

    def _params(self, prompt: Prompt, sampling: Sampling, n: int = 1, final_only: bool = False) -> Any:
        from vllm import SamplingParams
        from vllm.sampling_params import RequestOutputKind

        return SamplingParams(
            n=n,
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            top_k=sampling.top_k,
            repetition_penalty=sampling.repetition_penalty,
            presence_penalty=sampling.presence_penalty,
            frequency_penalty=sampling.frequency_penalty,
            max_tokens=sampling.max_tokens,
            # The test knob must silence every stop id, not only the tokenizer's EOS.
            stop_token_ids=[] if self.ignore_eos else self._stop_ids,
            stop=list(prompt.stop),
            ignore_eos=self.ignore_eos,
            # An answer read whole needs no output per step (what vLLM's own server asks for a
            # non-streamed answer): no RequestOutput, queue hop and wake-up per token. A quarter of
            # the frontend's CPU per string (bench/results/frontend/). The engine
            # core still reports every step's scheduler stats, which the stall rule counts.
            # A stream keeps the cumulative kind: each step's whole text so far.
            output_kind=RequestOutputKind.FINAL_ONLY if final_only else RequestOutputKind.CUMULATIVE,
        )

    async def _outputs(
        self,
        prompt: Prompt,
        sampling: Sampling,
        request_id: str,
        n: int = 1,
        priority: int = 0,
        final_only: bool = False,
    ) -> AsyncGenerator[Any, None]:
        """vLLM's outputs (cumulative, or the last only); a cancelled or closed iteration aborts at once."""
        ids = self._token_ids(prompt)
        finished = False
        self._live[request_id] = priority
        try:
            # A rendered engine input ("type": "token"), what vLLM's own server passes after its renderer.
            # A bare {"prompt_token_ids"} is deprecated in vLLM 0.32 (InputProcessor.process_inputs warns
            # "Passing raw prompts ... will be removed") and makes a thread hop per string through the
            # renderer (process_inputs_async). The job's CPU per string did not move beyond the noise.
            async for output in self._engine.generate(
                {"type": "token", "prompt_token_ids": ids},
                self._params(prompt, sampling, n, final_only),
                request_id=request_id,
                priority=priority,
            ):
                finished = bool(output.finished)
                yield output
        finally:
            self._live.pop(request_id, None)
            if not finished:
                # The client left, the deadline passed or the stream was closed: free the batch slot now.
                await asyncio.shield(self._engine.abort(request_id))

    def _generation(
        self, final: Any, prompt_tokens: int, started: float, completion: Any = None
    ) -> Generation:
        completion = final.outputs[0] if completion is None else completion
        metrics = final.metrics
        queue_s = 0.0
        if metrics is not None and metrics.scheduled_ts and metrics.queued_ts:
            # Engine-core monotonic timestamps: waiting for a batch slot, not our own queueing.
            queue_s = max(0.0, metrics.scheduled_ts - metrics.queued_ts)
        return Generation(
            text=completion.text.strip(),
            prompt_tokens=prompt_tokens,
            output_tokens=len(completion.token_ids),
            finish_reason=completion.finish_reason,
            queue_s=queue_s,
            engine_s=time.monotonic() - started,
        )

    async def generate(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> Generation:
        started = time.monotonic()
        final = None
        outputs = self._outputs(prompt, sampling, request_id, priority=priority, final_only=True)
        try:
            async for output in outputs:
                final = output
        finally:
            await outputs.aclose()
        if final is None:
            raise RuntimeError(f"engine returned no output for {request_id}")
        return self._generation(final, len(self._token_ids(prompt)), started)

    async def sample(
        self, prompt: Prompt, sampling: Sampling, request_id: str, n: int, priority: int = 0
    ) -> list[Generation]:
        # vLLM's n: one request, its prompt prefilled once and shared by the n sequences it forks.
        started = time.monotonic()
        final = None
        latest: dict[int, Any] = {}  # each sample's last cumulative output, by its index
        outputs = self._outputs(prompt, sampling, request_id, n, priority, final_only=True)
        try:
            async for output in outputs:
                final = output
                # With n > 1 a step's output carries only the samples that advanced in it.
                for completion in output.outputs:
                    latest[completion.index] = completion
        finally:
            await outputs.aclose()
        if final is None:
            raise RuntimeError(f"engine returned no output for {request_id}")
        count = len(self._token_ids(prompt))
        return [self._generation(final, count, started, latest[index]) for index in sorted(latest)]

    async def stream(
        self, prompt: Prompt, sampling: Sampling, request_id: str, priority: int = 0
    ) -> AsyncGenerator[Delta, None]:
        started = time.monotonic()
        final = None
        sent = 0  # characters of the stripped text already yielded
        outputs = self._outputs(prompt, sampling, request_id, priority=priority)
        try:
            async for output in outputs:
                final = output
                # Leading whitespace is held back, as generate() strips it; trailing, until the end.
                text = output.outputs[0].text.lstrip()
                text = text.rstrip() if output.finished else text
                if len(text) > sent:
                    yield Delta(text[sent:])
                    sent = len(text)
        finally:
            await outputs.aclose()
        if final is None:
            raise RuntimeError(f"engine returned no output for {request_id}")
        yield Delta("", self._generation(final, len(self._token_ids(prompt)), started))

    async def abort(self, request_id: str) -> None:
        await self._engine.abort(request_id)

    def is_alive(self) -> bool:
        return self._engine is not None and not self._engine.errored

    def unfinished(self) -> int:
        return 0 if self._engine is None else int(self._engine.get_num_unfinished_requests())

    def shutdown(self) -> None:
        engine, self._engine = self._engine, None
        if engine is not None:
            # Bounded: the engine core lingers in its own teardown after its workers have gone, and
            # vLLM waits 5 s for it by default before it kills it.
            engine.shutdown(timeout=self.cfg.shutdown_timeout_s)
        width, self._width = self._width, None
        if width is not None:
            self.stats.apply_bulk_width = None
            self.stats.acknowledged = None
            width.close()
