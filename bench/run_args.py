"""The flags of bench/run.py, and the plan they size."""

from __future__ import annotations

import argparse
import shlex
from dataclasses import replace
from pathlib import Path

from bench import names, targets
from bench.procs import REPO
from bench.session import LIKEFORLIKE_ONLY, Plan


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.run", description="k6 against the stack and its baselines in one run."
    )
    parser.add_argument("--quick", action="store_true", help="The under-3-minutes version.")
    parser.add_argument("--model", help="Checkpoint to serve (default: a freshly built tiny checkpoint).")
    parser.add_argument(
        "--replicas", type=int, default=2, help="Replicas of the stack (default 2); on GPUs, one per device."
    )
    parser.add_argument(
        "--device",
        choices=targets.DEVICES,
        default="auto",
        help="cpu, cuda (one replica per GPU), or auto: cuda where nvidia-smi lists GPUs (default).",
    )
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results", help="Report directory.")
    parser.add_argument("--work", type=Path, help="Raw outputs (default bench/.runs/<time>).")
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=(*names.STEPS, *names.STEPS_APART),
        help="A setup to leave out (repeatable).",
    )
    parser.add_argument(
        "--start-timeout-s", type=float, default=900.0, help="How long every setup may take to start."
    )
    parser.add_argument(
        "--only",
        choices=(names.OVERLOAD, names.LIKEFORLIKE, *LIKEFORLIKE_ONLY, names.FAIRNESS),
        help="overload: only the stack's ramp and then the overload, sized from the ramp "
        "(report-full-overload.md); likeforlike, or one of its rows job, single, assembled: only "
        "that (report-likeforlike.md, report-likeforlike-<row>.md); fairness: only bench/fairness.py "
        "(report-fairness.md).",
    )
    _add_row_flags(parser)
    return parser.parse_args(argv)


def _add_row_flags(parser: argparse.ArgumentParser) -> None:
    """The sizes of the rows, the client's and the stack's extra flags, and the soak's."""
    parser.add_argument(
        "--strings", type=int, help="Distinct strings of the job row (default 2000; QUICK 200)."
    )
    parser.add_argument("--rounds", type=int, help="Rounds of each setup in a like-for-like row (default 3).")
    parser.add_argument(
        "--k6-nice", type=int, default=0, help="k6's nice value (it shares the cores; below 0 needs root)."
    )
    parser.add_argument(
        "--k6-cores",
        type=_cores,
        default=(),
        help="Cores for k6 and the stack's Nginx, e.g. '1'; the stack's replicas get the other cores.",
    )
    parser.add_argument(
        "--stack-flags",
        default="",
        help="More `up` flags for the stacks, one string (e.g. '--max-conns 256 --worker-priority 0').",
    )
    parser.add_argument(
        "--translate-flags",
        default="",
        help="More `translate` flags for the job row, one string (e.g. '--concurrency 8'): the client's "
        "settings against the same stack and engines.",
    )
    parser.add_argument("--soak", action="store_true", help="Only the soak run: see bench/soak.py.")
    parser.add_argument("--soak-minutes", type=float, default=60.0, help="Length of the soak run.")
    parser.add_argument("--soak-kill-every-min", type=float, default=10.0, help="Minutes between kills.")
    parser.add_argument("--soak-rate", type=int, default=4, help="Steady requests/s of the soak run.")


def sized(plan: Plan, args: argparse.Namespace) -> Plan:
    """--strings and --rounds over the plan's own sizes."""
    if args.strings:
        plan = replace(plan, lfl_strings=args.strings)
    if args.translate_flags:
        plan = replace(plan, translate_flags=tuple(shlex.split(args.translate_flags)))
    return replace(plan, lfl_rounds=args.rounds) if args.rounds else plan


def _cores(text: str) -> tuple[int, ...]:
    """'1' or '0,2': a comma-separated list of core numbers."""
    try:
        cores = tuple(sorted({int(part) for part in text.split(",")}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of core numbers: {text!r}") from None
    if any(core < 0 for core in cores):
        raise argparse.ArgumentTypeError(f"core numbers are 0 or more: {text!r}")
    return cores


def fairness_args(args: argparse.Namespace) -> list[str]:
    """bench/fairness.py's own flags from this run's: its report lands in this run's --out too."""
    return ["--start-timeout-s", str(args.start_timeout_s), "--out", str(args.out / "report-fairness.md")]
