"""Requests in flight: sized from the service's X-Hunyuan-Bulk-Texts (pure), and the resizable limit."""

from __future__ import annotations

import asyncio

import pytest

from hunyuan_serve.client import ClientSettings
from hunyuan_serve.client.width import parse_bulk_texts, requests_in_flight
from hunyuan_serve.localization.batches import Width


@pytest.mark.parametrize(
    ("value", "count"),
    [("384", 384), (" 96 ", 96), (None, None), ("", None), ("0", None), ("-5", None), ("many", None)],
)
def test_the_header_is_a_positive_count_or_nothing(value: str | None, count: int | None) -> None:
    assert parse_bulk_texts(value) == count


@pytest.mark.parametrize(
    ("fields", "bulk_texts", "width"),
    [
        ({}, None, 8),  # the service has not said: start_concurrency
        ({}, 384, 24),  # two CPU replicas' bulk share of 2 x 256, batches of 16
        ({}, 100, 7),  # rounded up: the engines get all they batch
        ({}, 5000, 64),  # at most max_connections (more would wait for a pooled connection)
        ({"max_connections": 10}, 384, 10),
        ({"batch_size": 128}, 384, 3),
        ({}, 3, 1),
        ({"concurrency": 3}, 384, 3),  # set: fixed, whatever the service says
        ({"concurrency": 100}, None, 100),
        ({"priority": "interactive"}, 384, 8),  # a person's tool does not fill the bulk share
        ({"start_concurrency": 2}, None, 2),
    ],
)
def test_requests_in_flight(fields: dict[str, object], bulk_texts: int | None, width: int) -> None:
    assert requests_in_flight(ClientSettings.model_validate(fields), bulk_texts) == width


async def _holders(width: Width, count: int, release: asyncio.Event) -> list[asyncio.Task[None]]:
    async def hold() -> None:
        async with width:
            await release.wait()

    tasks = [asyncio.ensure_future(hold()) for _ in range(count)]
    for _ in range(5):
        await asyncio.sleep(0)
    return tasks


async def test_a_wider_limit_lets_waiters_in_at_once_and_a_narrower_one_nothing_new() -> None:
    width, release = Width(2), asyncio.Event()
    tasks = await _holders(width, 6, release)
    assert width.held == 2
    width.resize(5)
    await asyncio.sleep(0)
    assert width.held == 5
    width.resize(1)
    await asyncio.sleep(0)
    assert width.held == 5  # held work is not taken back
    release.set()
    await asyncio.gather(*tasks)
    assert width.held == 0


async def test_a_woken_waiter_cancelled_passes_its_place_on() -> None:
    width, release = Width(1), asyncio.Event()
    await width.__aenter__()  # the test holds the one place
    second, third = await _holders(width, 2, release)
    # The test gives the place back: `second` is offered it, and is cancelled before it runs.
    await width.__aexit__(None, None, None)
    second.cancel()
    for _ in range(5):
        await asyncio.sleep(0)
    assert second.cancelled() and width.held == 1  # `third` took the place `second` was offered
    release.set()
    await third
    assert width.held == 0
