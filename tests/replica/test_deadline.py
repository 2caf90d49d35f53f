"""A request's deadline and the answers in hand: a retry cut short, never a 504 while an answer exists.

Fakes for the engine call and the request; a deadline already passed where one should fall, so no
test waits for a clock.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from hunyuan_serve.families.base import Prompt, user_prompt
from hunyuan_serve.languages import find_language
from hunyuan_serve.replica import deadline
from hunyuan_serve.replica.deadline import Deadline
from hunyuan_serve.replica.engine.interface import Generation, Sampling
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.http import guarded
from hunyuan_serve.replica.metrics import Metrics
from hunyuan_serve.replica.review import Review, Verdicts
from hunyuan_serve.replica.schema import TranslateRequest
from tests.support.replica_fakes import FakeEngine, make_config

SOURCE = "Delete 3 files from https://example.com/x now"
FIRST = "删除文件"  # the number and the URL lost: flagged
GOOD = "立即从 https://example.com/x 删除 3 个文件"
GREEDY = Sampling(temperature=0.0, top_p=1.0, top_k=-1, repetition_penalty=1.0, max_tokens=32)
FAR = 3600.0  # a deadline that does not fall during a test


class Retries:
    """The second engine call of a retry, as the test says: answers, never ends, or fails."""

    def __init__(self, how: str) -> None:
        self.how = how
        self.started = asyncio.Event()
        self.cancelled = 0

    async def generate(self, prompt: Prompt, sampling: Sampling, request_id: str) -> Generation:
        self.started.set()
        if self.how == "fails":
            raise RuntimeError("engine core died")
        if self.how == "never":
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        return Generation(GOOD, 10, 9, "stop")


def _retried(
    retries: Retries, due: Deadline | None, cut: Callable[[], Awaitable[None]] | None = None
) -> tuple[Verdicts, list[Any]]:
    """One flagged text's retry under `due` (None: no deadline); `cut` runs beside it."""
    review = Review(make_config(qa_retry_reserve_s=0.5).replica, Metrics(FakeEngine(), lambda: 0))
    req = TranslateRequest((SOURCE,), False, find_language("en"), find_language("zh"), GREEDY, qa="retry")
    verdicts = review.judge(req, [FIRST], ["stop"])
    assert verdicts.flags[0], "the first answer must be flagged for a retry to run"

    async def both() -> list[Any]:
        retry = review.retry(retries.generate, req, [user_prompt(SOURCE)], verdicts, "r1")
        if due is not None:
            deadline.CURRENT.set(due)
        if cut is None:
            return await retry
        return list((await asyncio.gather(retry, cut()))[0])

    return verdicts, asyncio.run(both())


def test_a_first_answer_that_comes_inside_the_reserve_goes_out_at_once_flagged() -> None:
    retries = Retries("never")
    # The deadline is here: less than qa_retry_reserve_s is left once the first answer is in.
    verdicts, seconds = _retried(retries, Deadline(time.monotonic()))
    assert seconds == [] and verdicts.unfinished == 1 and verdicts.retried == 0
    assert [flag.check for flag in verdicts.flags[0]], "the first answer stands, flagged"


def test_the_deadline_cut_stops_a_running_retry_and_the_first_answer_stands() -> None:
    retries = Retries("never")
    due = Deadline(time.monotonic() + FAR)

    async def cut() -> None:
        await retries.started.wait()
        assert due.retrying == 1  # the retry says it runs, so a deadline falling now cuts it
        due.cut.set()

    verdicts, seconds = _retried(retries, due, cut)
    assert seconds == [] and verdicts.unfinished == 1
    assert retries.cancelled == 1 and due.retrying == 0  # its engine call aborted


def test_a_failed_retry_is_no_reason_to_lose_the_first_answer() -> None:
    verdicts, seconds = _retried(Retries("fails"), Deadline(time.monotonic() + FAR))
    assert seconds == [] and verdicts.unfinished == 1
    assert verdicts.flags[0] and verdicts.log()["qa_retry_unfinished"] == 1


def test_a_second_answer_in_time_is_kept() -> None:
    verdicts, seconds = _retried(Retries("answers"), Deadline(time.monotonic() + FAR))
    assert [(each.text, each.kept) for each in seconds] == [(GOOD, True)]
    assert verdicts.unfinished == 0


class _Request:
    """A request whose client stays: receive() never says http.disconnect."""

    async def receive(self) -> dict[str, Any]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def _in_retry(heeds_cut: bool) -> str:
    """Work that has its answer in hand and retries: until the deadline's cut, or for ever."""
    deadline.answered()
    due = deadline.CURRENT.get()
    assert due is not None, "the work's task carries its deadline"
    with due.retry():
        await (due.cut.wait() if heeds_cut else asyncio.Event().wait())
    return FIRST


async def _no_answer() -> str:
    await asyncio.Event().wait()
    return FIRST


def _guarded(work: Callable[[], Any], grace_s: float) -> tuple[str | ApiError, dict[str, Any]]:
    """guarded() of `work` with a deadline that falls at once: its answer or its ApiError, and its log."""
    log: dict[str, Any] = {}

    async def run() -> str | ApiError:
        try:
            return await guarded(_Request(), work(), 0.0, grace_s, log)  # type: ignore[arg-type]
        except ApiError as err:
            return err

    return asyncio.run(run()), log


def test_at_the_deadline_a_retry_still_running_is_cut_and_the_answer_in_hand_goes_out() -> None:
    # The retry's own reserve did not fire (an event loop too busy): the deadline cuts it instead.
    answer, log = _guarded(lambda: _in_retry(heeds_cut=True), grace_s=FAR)
    assert answer == FIRST and log == {}


@pytest.mark.parametrize(
    ("work", "in_hand"),
    [(_no_answer, False), (lambda: _in_retry(heeds_cut=False), True)],
    ids=["no-answer-yet", "answer-in-hand-past-the-grace"],
)
def test_a_504_says_whether_an_answer_was_in_hand(work: Callable[[], Any], in_hand: bool) -> None:
    answer, log = _guarded(work, grace_s=0.0)
    assert isinstance(answer, ApiError) and answer.status == 504
    assert log == {"answer_in_hand": in_hand, "qa_retry_running": in_hand}


def test_a_deadline_counts_down_on_the_clock_it_is_given() -> None:
    now = [100.0]
    due = Deadline.after(4.0, clock=lambda: now[0])
    assert due.left(0.5, clock=lambda: now[0]) == 3.5
    now[0] = 103.9
    assert due.left(0.5, clock=lambda: now[0]) == 0.0
