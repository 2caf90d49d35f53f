"""The supervisor and logs sections: probing, restarts, shutdown and log rotation of `up`."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
)

from hunyuan_serve.config.base import Section


class SupervisorConfig(Section):
    """Probing, eviction, restart and shutdown rules of `up`."""

    probe_interval_s: float = Field(0.5, gt=0, description="Time between health probes of a replica.")
    probe_timeout_s: float = Field(2.0, gt=0, description="Deadline of one health probe.")
    # Deep probes run a generation, which keeps an idle CPU engine's workers spinning for a second
    # after; a hang under load shows sooner through the replica's stall rule (stall_timeout_s).
    deep_probe_every: int = Field(60, ge=0, description="Every Nth probe is deep (0: never).")
    unhealthy_threshold: int = Field(3, ge=1, description="Failed probes in a row that evict a replica.")
    startup_timeout_s: float = Field(900.0, gt=0, description="Deadline for a new replica to become ready.")
    restart_backoff_base_s: float = Field(1.0, ge=0, description="First restart delay.")
    restart_backoff_max_s: float = Field(60.0, ge=0, description="Largest restart delay.")
    restart_backoff_jitter: float = Field(0.2, ge=0, le=1, description="Random fraction added to delays.")
    crash_loop_budget: int = Field(5, ge=1, description="Failures within the window that mark it failed.")
    crash_loop_window_s: float = Field(600.0, gt=0, description="Window the crash-loop budget counts in.")
    drain_timeout_s: float = Field(30.0, ge=0, description="Time in-flight requests get on shutdown.")
    kill_timeout_s: float = Field(10.0, ge=0, description="Time between SIGTERM and SIGKILL.")
    abandon_after_s: float = Field(
        60.0, gt=0, description="Time a killed replica gets to exit before a new one starts beside it."
    )
    tick_s: float = Field(0.25, gt=0, description="Longest the supervisor loop waits between clock checks.")
    status_timeout_s: float = Field(1.0, gt=0, description="Deadline of each request `status` makes.")
    # A killed engine's GPU memory is released some seconds after its process exits; a replica
    # started before that fails vLLM's free-memory check and counts against the crash-loop budget.
    gpu_release_timeout_s: float = Field(
        120.0, ge=0, description="Longest a GPU replica's (re)start waits for its devices' memory to be free."
    )
    gpu_release_poll_s: float = Field(1.0, gt=0, description="Time between GPU memory checks while waiting.")
    # A GPU holds one engine: its replacement can only start once the old engine has let go of it.
    reload_order: Literal["auto", "surge", "drain_first"] = Field(
        "auto",
        description="How a reload replaces each replica: surge (the new one starts beside the old, which "
        "is drained once the new one is admitted) or drain_first (the old one is drained, then the new one "
        "starts on its devices); auto: drain_first for GPU replicas, surge on CPU.",
    )
    reload_wait_timeout_s: float = Field(
        3600.0, gt=0, description="Longest `hunyuan-serve reload` waits for the reload's outcome."
    )


class LogsConfig(Section):
    """How big the log files under the run directory (Nginx's, each replica's) may grow."""

    # One JSON line per request in Nginx's access log and again in the replica's: ~1 GB a day each at
    # 30 requests/s. The bound per log is rotate_at_bytes * (rotate_keep + 1).
    rotate_at_bytes: int = Field(
        64 * 1024 * 1024, ge=0, description="Size at which a log moves to .1 and starts empty (0: never)."
    )
    rotate_keep: int = Field(4, ge=1, description="Rotated copies kept per log (.1 newest ... .N oldest).")
    rotate_check_interval_s: float = Field(30.0, gt=0, description="Time between checks of the logs' sizes.")
