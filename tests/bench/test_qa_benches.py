"""The answer-check benches' own logic: planted faults counted, retry pairs planned and judged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench import qa_planted, qa_retry
from hunyuan_serve.config.qa import QaSettings

PAIRS = [
    ("Enter a valid email address.", "输入一个有效的电子邮件地址。"),
    ("Add %s", "增加 %s"),  # one word once its placeholder is out: no echo planted
    ("%s KB", "%s KB"),  # kept as it is by its translator: no echo planted
    (
        "Enter a valid “slug” consisting of letters, numbers, underscores or hyphens.",
        "输入由字母，数字，下划线或连字符号组成的有效“字段”。",
    ),
]


def test_the_planted_faults_are_counted_per_set() -> None:
    figures = qa_planted.measure(PAIRS, QaSettings())
    assert figures["pairs"] == 4 and figures["human"] == [0, 4]
    assert figures["echo"] == [2, 2]  # the two sources of two words or more, both flagged
    assert figures["cut"] == [1, 1]  # the one source of 40 characters or more
    lines = qa_planted.lines_of("set", figures)
    assert "| echo (the source) | 2 | 2 | 100.0% |" in lines and lines[-2].endswith("none.")


def test_a_catalog_is_named_by_its_package_and_locale() -> None:
    path = Path("/x/site-packages/weblate/locale/zh_Hans/LC_MESSAGES/django.mo")
    assert qa_planted.catalog_name(path) == "weblate zh_Hans django.mo"
    assert qa_planted.catalog_name(Path("/tmp/django.po")) == "/tmp/django.po"


def test_retry_pairs_span_the_fills_within_the_engine_window() -> None:
    planned = qa_retry.plan(5, 4.0, 0.01)  # 10 ms a token: 0.6 s to 2.4 s of answer
    assert planned == [60, 105, 150, 195, 240]
    assert qa_retry.plan(3, 4.0, 0.0001) == [qa_retry.MOST_TOKENS] * 3


def _pair(flag: int, retry: int, retry_s: float) -> dict[str, Any]:
    return {"max_tokens": 10, "flag": {"status": flag, "s": 1.0}, "retry": {"status": retry, "s": retry_s}}


def test_a_retry_that_fails_where_flag_answered_is_not_met() -> None:
    timeout = 4.0
    cut = timeout - qa_retry.RESERVE_S  # a retry cut short answers here
    ok = {"request_timeout_s": timeout, "longest_answer_planned_s": 3.6}
    row = {**ok, "pairs": [_pair(200, 200, 1.5), _pair(200, 200, cut), _pair(504, 504, 4.0)]}
    row["summary"] = qa_retry.summary(row)
    assert row["summary"]["retry_failed_where_flag_answered"] == []
    assert row["summary"]["retry_ran_into_the_deadline"] == 2
    assert qa_retry.verdict(row)[0].endswith(": met")
    lost = {**ok, "pairs": [_pair(200, 200, cut), _pair(200, 504, 4.0)]}
    lost["summary"] = qa_retry.summary(lost)
    assert lost["summary"]["retry_failed_where_flag_answered"] == [10]
    assert qa_retry.verdict(lost)[0].endswith("NOT met")
    never_cut = {**ok, "pairs": [_pair(200, 200, 1.0)]}
    never_cut["summary"] = qa_retry.summary(never_cut)
    assert qa_retry.verdict(never_cut)[0].endswith("NOT met")  # the deadline was never tested


def test_the_engine_speed_follows_the_flag_answers() -> None:
    assert qa_retry.measured(0.01, {"status": 200, "s": 3.0}, 100) == (0.01 + 0.03) / 2
    assert qa_retry.measured(0.01, {"status": 504, "s": 4.0}, 100) == 0.015  # slower, by how much unknown


def test_a_retry_504_is_told_apart_by_the_replica_log(tmp_path: Path) -> None:
    lines = [
        {"request_id": "qa-retry-0-retry", "status": 504, "answer_in_hand": True, "qa_retry_running": True},
        {"request_id": "qa-retry-1-retry", "status": 504, "answer_in_hand": False},
        {"request_id": "qa-retry-2-retry", "status": 200, "qa_retried": 0, "qa_retry_unfinished": 1},
        {"request_id": "someone-else", "status": 200},
    ]
    (tmp_path / "replica-0.log").write_text(
        "INFO started\n" + "".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8"
    )
    pairs = [_pair(200, 504, 4.0), _pair(200, 504, 4.0), _pair(200, 200, 3.5)]
    for n, pair in enumerate(pairs):
        pair["retry"]["request_id"] = f"qa-retry-{n}-retry"
    row = {"request_timeout_s": 4.0, "longest_answer_planned_s": 2.4, "pairs": pairs}
    qa_retry.logged(row, tmp_path)
    summary = qa_retry.summary(row)
    assert (summary["retry_504_answer_in_hand"], summary["retry_504_no_answer_yet"]) == (1, 1)
    assert summary["retry_cut_by_the_deadline"] == 1
