"""`hunyuan-serve doctor`: the preflight of a new host, pure checks over facts gathered once."""

from hunyuan_serve.doctor.command import (
    CHECKS,
    add_parser,
    cmd_doctor,
    preflight,
    preflight_pools,
    run_checks,
)
from hunyuan_serve.doctor.gather import gather, installed_torch, installed_vllm
from hunyuan_serve.doctor.rows import Check, Facts, format_checks

__all__ = [
    "CHECKS",
    "Check",
    "Facts",
    "add_parser",
    "cmd_doctor",
    "format_checks",
    "gather",
    "installed_torch",
    "installed_vllm",
    "preflight",
    "preflight_pools",
    "run_checks",
]
