"""bench/fairness.py without a stack: verdicts, the report, the rounds, the person beside the job."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench import fairness
from bench.fairness import JOB_TARGETS, batch_bodies, parse_args, round_order
from bench.fairness_report import Figures, Job, Width, latencies, merged, ratio, report, shares, verdicts
from bench.fairness_stack import Stack, stack_config
from hunyuan_serve.config import build_config


def _figures(busy_p95: float, beside_texts: int, b_texts: int) -> Figures:
    return Figures(
        idle=latencies([100.0, 110.0, 120.0, 200.0], 0),
        alone=Job("ci-a", 1000, 20.0, 0, 0),
        busy=latencies([120.0, 130.0, 140.0, busy_p95], 1),
        beside=Job("ci-a", beside_texts, 20.0, 3, 0),
        pair=(Job("ci-a", 600, 20.0, 2, 0), Job("ci-b", b_texts, 20.0, 5, 0)),
        round_ratios=(0.75, 0.85),
    )


def test_latencies_ratio_and_shares() -> None:
    assert latencies([30.0, 10.0, 20.0], 2) == latencies([10.0, 20.0, 30.0], 2)
    assert latencies([30.0, 10.0, 20.0], 2).p50_ms == 20.0 and latencies([], 0).p95_ms == 0.0
    assert ratio(3.0, 2.0) == 1.5 and ratio(1.0, 0.0) == 0.0
    assert shares([Job("a", 30, 1, 0, 0), Job("b", 10, 1, 0, 0)]) == [0.75, 0.25]
    assert shares([Job("a", 0, 1, 0, 0), Job("b", 0, 1, 0, 0)]) == [0.0, 0.0]
    assert Job("a", 100, 20.0, 0, 0).per_s == 5.0 and Job("a", 1, 0.0, 0, 0).per_s == 0.0
    rounds = merged([Job("a", 100, 20.0, 1, 0), Job("a", 300, 20.0, 2, 1)])
    assert rounds == Job("a", 400, 40.0, 3, 1) and rounds.per_s == 10.0


def test_verdicts_against_the_targets() -> None:
    met = verdicts(_figures(busy_p95=250.0, beside_texts=950, b_texts=500))
    assert [row[3] for row in met] == [True, True, True, True, True]
    assert met[0][1] == pytest.approx(130 / 110) and met[2][1] == pytest.approx(0.95)
    missed = verdicts(_figures(busy_p95=400.0, beside_texts=500, b_texts=300))  # the job at 0.5x
    assert [row[3] for row in missed] == [True, False, False, True, False]
    assert missed[4][0] == "ci-b's share of two keys' texts/s" and missed[4][1] == pytest.approx(1 / 3)


def test_report_lists_every_phase_and_target() -> None:
    text = report(_figures(busy_p95=400.0, beside_texts=800, b_texts=300), parse_args([]))
    assert "| idle | 110 | 200 | 4 | 0 | - | - |" in text
    assert "| bulk + interactive | 130 | 400 | 4 | 1 | 40.0 | 3 |" in text
    assert "| two keys: ci-a / ci-b | - | - | - | - | 30.0 / 15.0 | 2 / 5 |" in text
    assert "| interactive p95, during the job / idle | 2.00x | <= 1.5x | NO |" in text
    assert "| ci-a's share of two keys' texts/s | 67% | >= 40% | yes |" in text
    assert "Each round's bulk with interactive / alone: 0.75x, 0.85x." in text


def test_the_width_columns_and_the_job_alone_never_held_back() -> None:
    widths = {"idle": Width(192, 0), "alone": Width(192, 0), "beside": Width(40, 17), "pair": Width(192, 3)}
    figures = replace(_figures(250.0, 950, 500), widths=widths, load=(3.5, 4.25))
    text = report(figures, parse_args([]))
    assert "| bulk + interactive | 130 | 250 | 4 | 1 | 47.5 | 3 | 40 | 17 |" in text
    assert "| bulk waiting in a replica, job alone | 0 | 0 | yes |" in text
    assert "Load average (1 min) 3.5 at the start, 4.2 at the end." in text
    held = replace(figures, widths={**widths, "alone": Width(96, 5)})
    assert ("bulk waiting in a replica, job alone", 5.0, "0", False) in verdicts(held)


def test_the_stack_it_starts_is_a_valid_config(tmp_path: Path) -> None:
    cfg = build_config(stack_config(tmp_path, tmp_path / "model", 8080, parse_args([])), {})
    assert cfg.replicas == 2 and cfg.engine.scheduling_policy == "priority" and cfg.replica.cache_entries == 0
    assert "priority=bulk" in (tmp_path / "keys").read_text()
    assert cfg.replica.interactive_window_s > 0  # the stack under test has the width on


def test_the_second_stack_differs_only_in_the_width_off(tmp_path: Path) -> None:
    args = parse_args([])
    on = stack_config(tmp_path, tmp_path / "model", 8080, args)
    off = stack_config(tmp_path, tmp_path / "model", 8080, args, width_off=True)
    assert build_config(off, {}).replica.interactive_window_s == 0
    assert {**on, "replica": {}, "base_port": 0} == {**off, "replica": {}, "base_port": 0}
    assert {**on["replica"], "interactive_window_s": 0} == off["replica"]
    # --width-off turns it off on the stack under test too
    both_off = stack_config(tmp_path, tmp_path / "model", 8080, parse_args(["--width-off"]))
    assert build_config(both_off, {}).replica.interactive_window_s == 0


def test_each_round_runs_the_four_phases_the_job_alone_beside_its_width_off_pair() -> None:
    orders = [round_order(n) for n in range(6)]
    for order in orders:
        assert sorted(order) == ["alone", "beside", "idle", "off"]
        on, off = order.index("alone"), order.index("off")
        assert abs(on - off) == 1  # neighbours in time: the same machine's load
    assert [o.index("alone") < o.index("off") for o in orders[:2]] == [True, False]  # the pair alternates
    assert len({tuple(o) for o in orders[:3]}) == 3  # and the phases rotate
    assert parse_args([]).interactive == 200  # a string every 0.2 s for two 20 s windows
    assert parse_args(["--interactive", "7"]).interactive == 7


def test_the_job_alone_with_the_width_on_against_off() -> None:
    figures = replace(
        _figures(250.0, 950, 500), off=Job("ci-a", 1050, 20.0, 0, 0), off_ratios=(0.93, 0.97), widths={}
    )
    rows = {row[0]: row for row in verdicts(figures)}
    assert rows["job alone, width on / width off"] == (
        "job alone, width on / width off",
        pytest.approx(1000 / 1050),
        ">= 0.9x",
        True,
    )
    text = report(figures, parse_args([]))
    assert "| bulk alone, width off | - | - | - | - | 52.5 | 0 | - | - |" in text
    assert "| job alone, width on / width off | 0.95x | >= 0.9x | yes |" in text
    assert "Each round's job alone, width on / width off: 0.93x, 0.97x." in text
    slow = replace(figures, off=Job("ci-a", 1200, 20.0, 0, 0))
    assert ("job alone, width on / width off", pytest.approx(1000 / 1200), ">= 0.9x", False) in verdicts(slow)
    without = report(_figures(250.0, 950, 500), parse_args([]))  # figures from before it was measured
    assert "| bulk alone, width off |" not in without and "width on / width off" not in without


def _answering(seen: list[float]) -> Any:
    """A `_client` whose every request is answered 200 at once, noting when it was sent."""

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(time.monotonic())
        return httpx.Response(200, json={"translatedText": "x"})

    def client(base: str, key: str, connections: int) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=base, transport=httpx.MockTransport(handler))

    return client


def test_the_person_keeps_sending_until_the_job_is_done(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[float] = []
    monkeypatch.setattr(fairness, "_client", _answering(sent))

    async def job(base: str, key: str, bodies: Iterator[Any], args: Any, until: float) -> Job:
        # The job's last batches end only after 30 of the person's strings, all past the window.
        for _ in range(100_000):  # bounded: a person who stopped at the window leaves it short
            if len(sent) >= 30:
                break
            await asyncio.sleep(0)
        return Job(key, 16, 1.0, 0, 0)

    monkeypatch.setattr(fairness, "_job", job)
    args = parse_args(["--interactive-every-s", "0", "--interactive", "100"])
    until = time.monotonic() - 1  # the window has passed: only the job's end stops the person
    stack = Stack("http://stack", (1, 2), Path("logs"))
    done, (samples, failed) = asyncio.run(
        fairness._beside(stack, args, iter([]), [f"s{i}" for i in range(100)], until)
    )
    assert done.texts == 16 and 30 <= len(sent) <= 31  # it sent until the job was done, then stopped
    assert samples == [] and failed == 0  # none was sent within the window: none counts
    few = asyncio.run(fairness._interactive("http://stack", ["a", "b"], lambda: True))
    assert len(few[0]) == 2  # and never more than its strings


def test_the_fairness_row_reports_into_the_runs_out_directory(tmp_path: Path) -> None:
    from bench import run_args

    args = run_args.parse_args(["--only", "fairness", "--out", str(tmp_path), "--start-timeout-s", "60"])
    assert run_args.fairness_args(args) == [
        "--start-timeout-s",
        "60.0",
        "--out",
        str(tmp_path / "report-fairness.md"),
    ]


def test_bulk_batches_repeat_no_prompt_until_texts_and_targets_run_out() -> None:
    bodies = batch_bodies([f"t{i}" for i in range(10)], 3)  # 3 batches a pass, t9 left out
    taken = [next(bodies) for _ in range(9)]
    prompts = [(b["target_lang"], text) for b in taken for text in b["texts"]]
    assert len(prompts) == len(set(prompts)) == 27  # none twice: coalescing would answer a repeat
    assert [b["target_lang"] for b in taken] == ["zh"] * 3 + ["ja"] * 3 + ["ko"] * 3
    assert taken[3]["texts"] == ["t0", "t1", "t2"]
    assert len(set(JOB_TARGETS)) == len(JOB_TARGETS) == 12
