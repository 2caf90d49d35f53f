"""k6 against the stack and its baselines in one run, then a Markdown report with plots (bench/questions.py
names which of its rows answer which question)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

if __package__ in (None, ""):  # `python bench/run.py` as well as `python -m bench.run`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import ensemble, fairness, layer, likeforlike_run, multihost, names, soak, targets
from bench.k6run import find_k6
from bench.procs import REPO, running, tree_cpu_s, warm_up
from bench.run_args import fairness_args, parse_args, sized
from bench.scenarios import (
    Started,
    bench_one_replica,
    bench_serial,
    bench_stack,
    bench_vllm,
    start_serial,
    start_stack,
    start_vllm,
)
from bench.session import Bench, Plan, lfl_only, only, split_cores
from bench.setups import SetupPlan, plan_setups
from bench.targets import Hardware
from bench.workload import build_items, translate_body
from bench.write_report import write_likeforlike_report, write_report

Step = tuple[str, Callable[[], Started], Callable[[Started], None]]


def make_steps(b: Bench, hw: Hardware, setup: SetupPlan) -> list[Step]:
    """The steps the setup plan names, in its order."""
    table: dict[str, Step] = {
        names.STEP_STACK: (
            names.STEP_STACK,
            lambda: start_stack(b, setup.stack_flags, setup.replicas, "stack-run"),
            lambda s: bench_stack(b, s, setup),
        ),
        names.STEP_STACK_1: (
            names.STEP_STACK_1,
            lambda: start_stack(b, setup.one_replica_flags, 1, "stack1-run"),
            lambda s: bench_one_replica(b, s),
        ),
        names.STEP_VLLM: (names.STEP_VLLM, lambda: start_vllm(b, hw), lambda s: bench_vllm(b, s)),
        names.STEP_SERIAL: (names.STEP_SERIAL, lambda: start_serial(b, hw), lambda s: bench_serial(b, s)),
    }
    return [table[step] for step in setup.steps]


def run_steps(b: Bench, steps: Sequence[Step], start_timeout_s: float, *, together: bool) -> dict[str, float]:
    """Start setups, wait until they are ready, then measure them one after another.

    On CPU every setup starts at once: engine start-up is most of a run's time and mostly
    single-threaded, so starting together saves minutes, and measuring only once all are up keeps
    start-up off the cores while k6 runs. On GPUs each setup would claim the same device memory,
    so there they start one at a time. Each setup stops after its own measurements.
    """
    timings: dict[str, float] = {}
    for group in [list(steps)] if together else [[step] for step in steps]:
        with contextlib.ExitStack() as stack:
            started = {name: stack.enter_context(_stopping(start())) for name, start, _ in group}
            failed = _wait_all_ready(started, start_timeout_s, timings)
            for name, _, measure in group:
                _measure(b, name, started, measure, failed.get(name), timings)
    return timings


def _wait_all_ready(
    started: dict[str, Started], timeout_s: float, timings: dict[str, float]
) -> dict[str, str]:
    """Wait for every started setup within one deadline; returns why each one that failed did."""
    t0 = time.monotonic()
    failed: dict[str, str] = {}
    for name, setup in started.items():
        try:
            setup.wait_ready(max(1.0, timeout_s - (time.monotonic() - t0)))
        except (RuntimeError, TimeoutError) as err:
            failed[name] = str(err)
    label = "start of " + ", ".join(started)
    timings[label] = time.monotonic() - t0
    print(f"[bench] {label}: {timings[label]:.0f} s", flush=True)
    return failed


def _measure(
    b: Bench,
    name: str,
    started: dict[str, Started],
    measure: Callable[[Started], None],
    failure: str | None,
    timings: dict[str, float],
) -> None:
    """Measure one setup, note how much CPU the setups waiting their turn took meanwhile, stop it."""
    t1 = time.monotonic()
    others = [s for other, s in started.items() if other != name]
    idle = [s.server.proc.pid for s in others if s.server.proc.poll() is None]
    idle_cpu = sum(tree_cpu_s(pid) for pid in idle)
    try:
        if failure is not None:
            raise RuntimeError(failure)
        measure(started[name])
    except (RuntimeError, TimeoutError, OSError, subprocess.SubprocessError) as err:
        b.notes.append(f"{name}: failed: {err}")
        print(f"[bench] {name} failed: {err}", flush=True)
    timings[name] = time.monotonic() - t1
    if idle:
        # The setups waiting their turn share the cores: say how much they took.
        used = sum(tree_cpu_s(pid) for pid in idle) - idle_cpu
        b.notes.append(
            f"While {name} was measured, the setups waiting their turn used {used:.1f} CPU-s "
            f"({100 * used / max(timings[name], 1e-9):.1f}% of one core)."
        )
    started[name].server.stop()
    print(f"[bench] {name} done in {timings[name]:.0f} s (total {b.elapsed()})", flush=True)


@contextlib.contextmanager
def _stopping(s: Started) -> Iterator[Started]:
    with running(s.server):
        yield s


def run_soak(b: Bench, setup: SetupPlan, args: argparse.Namespace) -> int:
    """The stack alone, under the soak run's steady load and kills; the report lands beside the others."""
    s = start_stack(b, setup.stack_flags, setup.replicas, "soak-run")
    with _stopping(s):
        s.wait_ready(args.start_timeout_s)
        warm_up(f"{s.url}/translate", translate_body())
        path = soak.bench_soak(
            b,
            s.url,
            s.run_dir or b.work,
            args.out / "soak",
            minutes=args.soak_minutes,
            kill_every_min=args.soak_kill_every_min,
            rate=args.soak_rate,
        )
    print(f"[bench] soak report: {path} (total {b.elapsed()})", flush=True)
    return 0


def prepare_model(args: argparse.Namespace, work: Path) -> Path:
    if args.model:
        return Path(args.model)
    # In-process (what `hunyuan-serve tiny-model` runs): one transformers import serves the prompts too.
    from hunyuan_serve.families import HUNYUAN_MT
    from hunyuan_serve.tiny_model import build_tiny_model

    # Named like its family, so that the replicas and the baselines detect it as they would the real one.
    return build_tiny_model(work / f"tiny-{HUNYUAN_MT}")


def _setup_of(args: argparse.Namespace) -> tuple[Plan, Hardware, SetupPlan] | str:
    """The run's plan, hardware and setups from its flags, or why they cannot be had."""
    plan = replace(only(Plan.quick() if args.quick else Plan(), args.only), k6_nice=args.k6_nice)
    plan = sized(plan, args)
    try:
        if args.k6_cores:
            rest = split_cores(sorted(os.sched_getaffinity(0)), args.k6_cores)
            plan = replace(plan, k6_cores=args.k6_cores, stack_cores=rest)
        hw = targets.detect_hardware(args.device)
    except ValueError as err:
        return str(err)
    setup = plan_setups(hw, args.replicas, plan, args.skip)
    if args.stack_flags:
        extra = tuple(shlex.split(args.stack_flags))
        setup = replace(setup, stack_flags=setup.stack_flags + extra)
        setup = replace(setup, notes=(*setup.notes, f"The stacks ran with `up {' '.join(extra)}`."))
    return plan, hw, setup


def _bench_of(args: argparse.Namespace, plan: Plan, setup: SetupPlan) -> Bench:
    # Absolute: k6 resolves the items file's path from its script's folder, not from here.
    work = (args.work or REPO / "bench" / ".runs" / time.strftime("%Y%m%d-%H%M%S")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    model = prepare_model(args, work)
    items = work / "items.json"
    build_items(model, items)
    b = Bench(plan, work, model, items, find_k6(), targets.model_sampling(str(model)))
    b.notes.extend(setup.notes)
    if plan.k6_nice:
        b.notes.append(f"k6 ran at nice {plan.k6_nice}.")
    return b


def _timed(timings: dict[str, float], name: str, step: Callable[[], object]) -> None:
    t0 = time.monotonic()
    step()
    timings[name] = time.monotonic() - t0


def _rows_apart(b: Bench, args: argparse.Namespace, hw: Hardware, timings: dict[str, float]) -> None:
    """The rows that run after the setups, each alone on the cores, unless skipped."""
    skip, plan = set(args.skip), b.plan
    if plan.hosts and names.STEP_HOSTS not in skip:  # it needs every core
        multihost.bench_hosts(b, hw, args.start_timeout_s, timings)
    if not args.quick and names.STEP_LAYER not in skip:  # the stack on core 0, k6 on core 1
        _timed(timings, "layer", lambda: _layer_row(b, args.out))
    if not args.quick and names.STEP_ENSEMBLE not in skip:  # two pools, one per core
        out = ["--out", str(args.out / "report-ensemble.md")]
        _timed(
            timings, "ensemble", lambda: ensemble.main(["--start-timeout-s", str(args.start_timeout_s), *out])
        )
        b.notes.append("Ensemble requests against single ones: report-ensemble.md beside this one.")
    if not args.quick and names.STEP_FAIRNESS not in skip:  # its own two-replica stack
        _timed(timings, "fairness", lambda: fairness.main(fairness_args(args)))
        b.notes.append("Interactive and bulk work: report-fairness.md beside this one.")
    if plan.likeforlike and names.STEP_LIKEFORLIKE not in skip:  # last, each row alone on the cores
        _timed(timings, "like for like", lambda: _likeforlike_rows(b, hw, args))


def _likeforlike_rows(b: Bench, hw: Hardware, args: argparse.Namespace) -> None:
    b.alike = likeforlike_run.run_rows(b, hw, b.plan.likeforlike, args.start_timeout_s)


def _layer_row(b: Bench, out: Path) -> None:
    figures = layer.measure(layer.LayerPlan())
    (out / "layer-figures.json").write_text(json.dumps(figures, indent=1), encoding="utf-8")
    b.notes.append("The serving layer alone (engine stand-in): " + layer.format_figures(figures))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.only == names.FAIRNESS:  # its own stack and workload: nothing of the rest is needed
        return fairness.main(fairness_args(args))
    found = _setup_of(args)
    if isinstance(found, str):
        print(f"[bench] {found}", file=sys.stderr)
        return 2
    plan, hw, setup = found
    b = _bench_of(args, plan, setup)
    if args.soak:
        return run_soak(b, setup, args)
    if lfl_only(plan):
        _likeforlike_rows(b, hw, args)
        shown = sys.argv[1:] if argv is None else argv
        path = write_likeforlike_report(b, args.out, hw, quick=args.quick, argv=shown)
    else:
        timings = run_steps(b, make_steps(b, hw, setup), args.start_timeout_s, together=setup.together)
        _rows_apart(b, args, hw, timings)
        path = write_report(b, args.out, timings, quick=args.quick, hardware=hw)
    print(f"[bench] report: {path} (total {b.elapsed()})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
