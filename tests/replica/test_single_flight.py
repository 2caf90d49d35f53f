"""One read in flight per key: shared by the callers meanwhile, not cancelled by one that leaves."""

from __future__ import annotations

import asyncio

import pytest

from hunyuan_serve.replica.single_flight import SingleFlight


async def test_callers_while_a_read_runs_share_it_and_a_later_one_reads_again() -> None:
    flights: SingleFlight[str, int] = SingleFlight()
    reads = 0
    gate = asyncio.Event()

    async def read() -> int:
        nonlocal reads
        reads += 1
        await gate.wait()
        return reads

    waiting = [asyncio.ensure_future(flights.do("a", read)) for _ in range(50)]
    other = asyncio.ensure_future(flights.do("b", read))
    await asyncio.sleep(0)
    assert flights.running() == 2
    gate.set()
    assert set(await asyncio.gather(*waiting)) == {1} and await other == 2
    assert flights.running() == 0
    assert await flights.do("a", read) == 3


async def test_a_caller_that_leaves_does_not_cancel_the_others_read() -> None:
    flights: SingleFlight[str, str] = SingleFlight()
    gate = asyncio.Event()

    async def read() -> str:
        await gate.wait()
        return "v"

    leaving = asyncio.ensure_future(flights.do("k", read))
    staying = asyncio.ensure_future(flights.do("k", read))
    await asyncio.sleep(0)
    leaving.cancel()
    gate.set()
    assert await staying == "v"
    with pytest.raises(asyncio.CancelledError):
        await leaving


async def test_an_error_reaches_every_caller_of_that_read() -> None:
    flights: SingleFlight[str, str] = SingleFlight()

    async def read() -> str:
        await asyncio.sleep(0)
        raise OSError("store gone")

    outcomes = await asyncio.gather(*(flights.do("k", read) for _ in range(3)), return_exceptions=True)
    assert [str(o) for o in outcomes] == ["store gone"] * 3
    assert flights.running() == 0
