"""bench/fairness_frontier.py without a stack: quartiles, the rounds' order, a width's point, the verdict."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import fairness_stack
from bench.fairness import phase_order
from bench.fairness_frontier import FLOOR_RATIO, parse_args, point, report
from bench.fairness_gauges import quartiles
from bench.fairness_report import Job
from bench.fairness_stack import stack_config
from hunyuan_serve.config import build_config


def _round(idle: list[float], busy: list[float], alone: int, beside: int) -> dict[str, object]:
    return {
        "idle": (idle, 0),
        "busy": (busy, 1),
        "alone": Job("ci-a", alone, 10.0, 0, 0),
        "beside": Job("ci-a", beside, 10.0, 2, 0),
    }


def test_quartiles_of_the_reads_and_of_none() -> None:
    assert quartiles([4.0, 1.0, 3.0, 2.0]) == (2.0, 3.0, 4.0)
    assert quartiles([]) == (0.0, 0.0, 0.0)


def test_each_phase_runs_first_in_one_of_three_rounds() -> None:
    firsts = {phase_order(n)[0] for n in range(3)}
    assert firsts == {"idle", "alone", "beside"}
    assert all(sorted(phase_order(n)) == ["alone", "beside", "idle"] for n in range(5))


@pytest.mark.parametrize(
    ("busy", "beside", "meets"),
    [
        ([42.0] * 20, 700, True),  # 1.05x the person, 0.7x the job
        ([42.0] * 20, 500, False),  # the job under 0.6x
        ([70.0] * 20, 900, False),  # the person at 1.75x
        ([42.0] * 18 + [90.0] * 2, 900, False),  # p50 fine, p95 at 2.25x
    ],
)
def test_a_width_meets_both_targets_only_when_the_person_and_the_job_do(
    busy: list[float], beside: int, meets: bool
) -> None:
    got = [_round([40.0] * 20, busy, 1000, beside)]
    found = point(4, got, [4.0, 4.0, 5.0, 4.0])
    assert found.meets() is meets
    assert found.read == (4.0, 4.0, 5.0)
    assert found.busy.failed == 1 and found.beside.refused == 2


def test_the_rounds_of_one_width_add_up() -> None:
    got = [_round([40.0], [60.0], 1000, 300), _round([40.0], [60.0], 1000, 500)]
    found = point(8, got, [])
    assert found.alone.texts == 2000 and found.beside.texts == 800
    assert found.job_ratio == pytest.approx(0.4) and found.p50_ratio == pytest.approx(1.5)


def test_the_report_names_the_widths_that_meet_both_or_none() -> None:
    args = parse_args(["--widths", "2,4", "--rounds", "1", "--seconds", "5"])
    args.concurrency = 12
    good = point(2, [_round([40.0] * 4, [44.0] * 4, 1000, 700)], [2.0])
    bad = point(4, [_round([40.0] * 4, [80.0] * 4, 1000, 900)], [4.0])
    text = report([good, bad], args)
    assert "| 2 | 2 / 2 / 2 | 40 / 44 | 1.10x | 1.10x | 100 / 70 | 0.70x | yes |" in text
    assert "**2**" in text and "--widths 2,4 --rounds 1 --seconds 5" in text
    assert "**none**" in report([bad], args)


def test_the_arguments_refuse_a_width_under_zero() -> None:
    with pytest.raises(SystemExit):
        parse_args(["--widths", "-1,4"])
    assert parse_args(["--widths", "0,4"]).widths == [0, 4]


def test_a_widths_stack_holds_the_floor_while_people_are_active(tmp_path: Path) -> None:
    args = parse_args([])
    replica = {"bulk_width_min": 8, "interactive_step_ratio": FLOOR_RATIO}
    cfg = stack_config(tmp_path, tmp_path / "model", 8080, args, False, replica)
    loaded = build_config(cfg, {})
    assert loaded.replica.bulk_width_min == 8 and loaded.replica.interactive_step_ratio == FLOOR_RATIO
    assert loaded.replica.interactive_window_s > 0


def test_a_stack_whose_up_found_a_port_busy_starts_again_on_new_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tried: list[str] = []

    def start(started: object, work: Path, *rest: object) -> str:
        tried.append(work.name)
        work.mkdir()
        if len(tried) < 3:
            (work / "up.log").write_text(
                "port 48440 on 127.0.0.1 is in use by a process this user cannot see"
            )
            raise RuntimeError("stack exited with 1")
        return "started"

    monkeypatch.setattr(fairness_stack, "_start", start)
    assert fairness_stack.start_stack(None, tmp_path / "on", tmp_path, parse_args([]), False) == "started"  # type: ignore[arg-type,comparison-overlap]
    assert tried == ["on", "on-1", "on-2"]


def test_a_stack_that_failed_for_another_reason_is_not_started_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tried: list[str] = []

    def start(started: object, work: Path, *rest: object) -> None:
        tried.append(work.name)
        work.mkdir()
        (work / "up.log").write_text("FAIL  model  cannot tell the prompt family")
        raise RuntimeError("stack exited with 1")

    monkeypatch.setattr(fairness_stack, "_start", start)
    with pytest.raises(RuntimeError, match="exited with 1"):
        fairness_stack.start_stack(None, tmp_path / "on", tmp_path, parse_args([]), False)  # type: ignore[arg-type]
    assert tried == ["on"]
