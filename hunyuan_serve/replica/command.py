"""`hunyuan-serve replica`: one process, one engine, one HTTP port; SIGTERM drains and exits 0."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from hunyuan_serve.config import ServeConfig, add_config_flags, config_from_args

if TYPE_CHECKING:
    from hunyuan_serve.replica.engine.interface import Engine

# Test-only knob: random-weight checkpoints emit EOS at once, so tests that need long generations
# (abort on disconnect, concurrent batching) make the engine ignore EOS. Never set in production.
TEST_IGNORE_EOS_ENV = "HUNYUAN_SERVE_TEST_IGNORE_EOS"

# asyncio's loop takes every connection waiting on the listening socket as soon as it is told of them;
# under uvloop a burst's connections were taken about as fast as they were answered, so a health probe's
# waited in the kernel's accept queue behind them (`ss` on a replica's port: up to 777 connections
# waiting, 2,000 strings sent at once to two replicas) and the supervisor evicted replicas at work.
EVENT_LOOP = "asyncio"


def _terminate_children(grace_s: float = 5.0) -> None:
    import psutil

    children = psutil.Process().children(recursive=True)
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.terminate()
    _, alive = psutil.wait_procs(children, timeout=grace_s)
    for child in alive:
        with contextlib.suppress(psutil.Error):
            child.kill()


async def watch_parent(expected: int, period_s: float, stop: Callable[[], None]) -> None:
    """Every period_s, look whether the `up` that started this replica is still its parent; once it is
    not (`up` was SIGKILL-ed, the replica re-parented), log it and stop as SIGTERM would."""
    from hunyuan_serve.replica.lifecycle import parent_gone

    while not parent_gone(expected, os.getppid()):
        await asyncio.sleep(period_s)
    logging.getLogger(__name__).warning(
        json.dumps({"event": "parent_gone", "parent_pid": expected, "ppid": os.getppid()})
    )
    stop()


def _server_class(parent_check_s: float) -> type[Any]:
    import uvicorn

    from hunyuan_serve.replica.lifecycle import watched_parent

    parent = watched_parent(os.environ)  # None unless `up` started this replica

    class DrainingServer(uvicorn.Server):
        """Uvicorn re-raises SIGTERM after its graceful shutdown, so the exit status would say 'killed';
        for a supervisor SIGTERM is the normal stop: drain, then exit 0. A replica `up` started also
        stops so once `up` is gone (watch_parent)."""

        async def serve(self, sockets: list[socket.socket] | None = None) -> None:
            watch = None
            if parent is not None and parent_check_s > 0:
                watch = asyncio.create_task(watch_parent(parent, parent_check_s, self.stop))
            try:
                await super().serve(sockets)
            finally:
                if watch is not None:
                    watch.cancel()

        def stop(self) -> None:
            self.should_exit = True  # what uvicorn's own SIGTERM handler sets: the graceful drain

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            handled = (signal.SIGINT, signal.SIGTERM)
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return DrainingServer


def _engine(cfg: ServeConfig, model: str, device: str, ignore_eos: bool) -> Engine:
    """vLLM, or the stand-in when engine.stand_in is set: never silently (a warning, the replica_starting
    line and /health say so)."""
    from hunyuan_serve.replica.engine.vllm_engine import VllmEngine
    from hunyuan_serve.replica.standin import StandInEngine

    if cfg.engine.stand_in:
        logging.getLogger(__name__).warning(
            json.dumps({"event": "engine_stand_in", "reason": "engine.stand_in: no model runs"})
        )
        return StandInEngine(cfg.engine, model)
    return VllmEngine(cfg.engine, model, ignore_eos=ignore_eos, device=device)


def _log_starting(model: str, family: str, device: str, engine: Engine, port: int) -> None:
    """The replica_starting line: what this replica serves, on what, with which engine (StandInEngine or
    VllmEngine)."""
    started = {"model": model, "family": family, "device": device, "engine": type(engine).__name__}
    logging.getLogger(__name__).info(json.dumps({"event": "replica_starting", **started, "port": port}))


def serve(cfg: ServeConfig, ignore_eos: bool = False) -> int:
    """Build the engine and app and run Uvicorn until SIGTERM/SIGINT (graceful) or a fatal load error."""
    import uvicorn

    from hunyuan_serve.gpu import resolve_device
    from hunyuan_serve.models import model_config, model_family, resolve_model
    from hunyuan_serve.replica.app import create_app
    from hunyuan_serve.replica.tls import listener

    # The device kind is the plan's (up sets engine.device), never torch's guess: asking torch here
    # would initialise CUDA before vLLM forks its engine core.
    device = resolve_device(cfg.engine.device)
    model = resolve_model(cfg.engine, device == "cuda")
    family = model_family(cfg.engine.prompt_family, model, model_config(model, cfg.engine.revision))
    engine = _engine(cfg, model, device, ignore_eos)
    failures: list[str] = []
    server: Any = None

    def on_fatal(reason: str) -> None:
        failures.append(reason)
        if server is not None:
            server.should_exit = True

    app = create_app(engine, cfg, family, on_fatal=on_fatal)
    server = _server_class(cfg.replica.parent_check_s)(
        uvicorn.Config(
            app,
            host=cfg.replica.host,
            port=cfg.replica.port,
            log_level=cfg.log_level,
            access_log=False,  # the app writes one JSON line per request instead
            timeout_graceful_shutdown=math.ceil(cfg.replica.graceful_shutdown_s),
            lifespan="on",
            loop=EVENT_LOOP,
            **listener(cfg.replica),  # one write per answer (a replica dying sends nothing), TLS if set
        )
    )
    _log_starting(model, family, device, engine, cfg.replica.port)
    server.run()
    code = 1 if failures else 0
    if app.state.replica.lifecycle.loading:
        # Stopped while the engine was still being built in a thread: its half-started engine
        # processes would outlive us (they wait for a handshake), so end them, then leave at once.
        _terminate_children()
    # Drained, engine shut down, cache closed: what is left is the interpreter's teardown of torch and
    # vLLM (seconds on a busy machine, past kill_timeout_s during a reload), which nothing here needs.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _run(args: argparse.Namespace) -> int:
    from hunyuan_serve.auth import refuse_exposed

    cfg = config_from_args(args)
    refuse_exposed(cfg)  # before the engine or the port: a secret others may read is refused, exit 2
    logging.basicConfig(level=cfg.log_level.upper(), format="%(message)s", stream=sys.stderr)
    return serve(cfg, ignore_eos=os.environ.get(TEST_IGNORE_EOS_ENV) == "1")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "replica",
        help="Serve one model on one port (FastAPI + vLLM async engine).",
        description="Serve one model: POST /translate, GET /languages, /health, /metrics.",
    )
    add_config_flags(parser, ["top", "engine", "replica", "auth"])
    # The spelling; same destinations as --replica-port / --replica-host.
    parser.add_argument(
        "--port", dest="replica.port", default=argparse.SUPPRESS, help="Alias of --replica-port."
    )
    parser.add_argument(
        "--host", dest="replica.host", default=argparse.SUPPRESS, help="Alias of --replica-host."
    )
    parser.set_defaults(func=_run)
