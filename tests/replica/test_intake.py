"""The replica's intake limit (pure ASGI, a scripted app): requests past the limit wait, people's first,
each class in arrival order; a parked request's place goes on; /health and /metrics pass at once."""

from __future__ import annotations

import asyncio

from starlette.types import Message, Receive, Scope, Send

from hunyuan_serve.auth import KEY_ID_STATE
from hunyuan_serve.replica.admission import intake
from hunyuan_serve.replica.admission.intake import Intake


class Scripted:
    """An ASGI app whose requests each wait for their own event; it notes who got in, in order."""

    def __init__(self) -> None:
        self.entered: list[str] = []
        self.scopes: list[Scope] = []
        self.go: dict[str, asyncio.Event] = {}
        self.park: set[str] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = scope["path"]
        self.entered.append(name)
        self.scopes.append(scope)
        if name in self.park:
            intake.parked()
        await self.go.setdefault(name, asyncio.Event()).wait()

    def let(self, name: str) -> None:
        self.go.setdefault(name, asyncio.Event()).set()


def _call(
    limit: int,
    app: Scripted,
    path: str,
    gate: Intake | None = None,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> asyncio.Task[None]:
    scope: Scope = {"type": "http", "path": path, "headers": headers or []}
    return asyncio.ensure_future((gate or Intake(app, limit))(scope, _receive, _send))


async def _receive() -> Message:
    return {"type": "http.disconnect"}


async def _send(_message: Message) -> None:
    return None


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_past_the_limit_requests_wait_in_arrival_order_and_health_passes() -> None:
    async def scenario() -> None:
        app = Scripted()
        gate = Intake(app, 2)
        tasks = [_call(2, app, f"/r{i}", gate) for i in range(4)]
        await _settle()
        assert app.entered == ["/r0", "/r1"] and gate.waiting() == 2
        health = _call(2, app, "/health", gate)
        metrics = _call(2, app, "/metrics", gate)
        await _settle()
        assert app.entered[-2:] == ["/health", "/metrics"]  # past the two waiting, at once
        app.let("/r1")
        await _settle()
        assert app.entered[4] == "/r2" and gate.waiting() == 1 and gate.taking == 2
        for name in ("/r0", "/r2", "/r3", "/health", "/metrics"):
            app.let(name)
        await asyncio.gather(*tasks, health, metrics)
        assert app.entered[5] == "/r3" and gate.taking == 0 and gate.waiting() == 0

    asyncio.run(scenario())


def test_people_are_taken_in_before_bulk_that_waited_longer() -> None:
    async def scenario() -> None:
        app = Scripted()
        gate = Intake(app, 1, key_defaults={"job-key": "bulk"})
        header = [(b"x-priority", b"bulk")]
        tasks = [_call(1, app, "/first", gate), _call(1, app, "/bulk-header", gate, header)]
        # A key whose default is bulk, as the key check leaves it in the request's state.
        scope: Scope = {
            "type": "http",
            "path": "/bulk-key",
            "headers": [],
            "state": {KEY_ID_STATE: "job-key"},
        }
        tasks.append(asyncio.ensure_future(gate(scope, _receive, _send)))
        tasks.append(_call(1, app, "/person", gate))
        await _settle()
        assert gate.waiting() == 3
        app.let("/first")
        await _settle()
        assert app.entered == ["/first", "/person"]  # past the two bulk requests that came first
        for name in ("/person", "/bulk-header", "/bulk-key"):
            app.let(name)
            await _settle()
        await asyncio.gather(*tasks)
        assert app.entered == ["/first", "/person", "/bulk-header", "/bulk-key"]

    asyncio.run(scenario())


def test_a_parked_request_gives_its_place_on_once() -> None:
    async def scenario() -> None:
        app = Scripted()
        app.park = {"/r0"}
        gate = Intake(app, 1)
        tasks = [_call(1, app, f"/r{i}", gate) for i in range(3)]
        await _settle()
        # /r0 waits for engine room, holding no place: /r1 is taken in; /r2 still waits.
        assert app.entered == ["/r0", "/r1"] and gate.taking == 1 and gate.waiting() == 1
        app.let("/r0")  # its answer must not give its place back a second time
        await _settle()
        assert app.entered == ["/r0", "/r1"] and gate.taking == 1
        app.let("/r1")
        app.let("/r2")
        await asyncio.gather(*tasks)
        assert app.entered == ["/r0", "/r1", "/r2"] and gate.taking == 0

    asyncio.run(scenario())


def test_a_request_cancelled_while_waiting_leaves_the_line() -> None:
    async def scenario() -> None:
        app = Scripted()
        gate = Intake(app, 1)
        first, second, third = (_call(1, app, f"/r{i}", gate) for i in range(3))
        await _settle()
        second.cancel()
        await _settle()
        assert gate.waiting() == 1
        app.let("/r0")
        await _settle()
        assert app.entered == ["/r0", "/r2"]
        app.let("/r2")
        await asyncio.gather(first, third)
        assert gate.taking == 0

    asyncio.run(scenario())


def test_no_limit_takes_everything_in() -> None:
    async def scenario() -> None:
        app = Scripted()
        gate = Intake(app, 0)
        tasks = [_call(0, app, f"/r{i}", gate) for i in range(5)]
        await _settle()
        assert len(app.entered) == 5
        for i in range(5):
            app.let(f"/r{i}")
        await asyncio.gather(*tasks)

    asyncio.run(scenario())


class Refusal:
    """The refusal a screen gives: an ASGI app that notes it answered."""

    def __init__(self, answered: list[str]) -> None:
        self.answered = answered

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.answered.append(scope["path"])


def test_a_request_the_screen_refuses_is_answered_at_once_not_after_the_line() -> None:
    async def scenario() -> None:
        app = Scripted()
        asked: list[tuple[str, int]] = []
        refused: list[str] = []

        def screen(scope: Scope, ahead: int) -> Refusal | None:
            asked.append((scope["path"], ahead))
            return Refusal(refused) if scope["path"].startswith("/no") else None

        gate = Intake(app, 1, screen=screen)
        bulk = [(b"x-priority", b"bulk")]
        tasks = [
            _call(1, app, "/first", gate),
            _call(1, app, "/bulk", gate, bulk),
            _call(1, app, "/person", gate),
        ]
        tasks += [_call(1, app, "/no-bulk", gate, bulk), _call(1, app, "/no-person", gate)]
        await _settle()
        # Not asked while a place was free; then each with those taken in before it: people before bulk.
        assert asked == [("/bulk", 0), ("/person", 0), ("/no-bulk", 2), ("/no-person", 1)]
        assert refused == ["/no-bulk", "/no-person"] and gate.waiting() == 2  # answered, never in line
        assert all(task.done() for task in tasks[3:])
        # Those it let wait are marked so: their wait was judged as they came.
        assert [bool(s.get("state", {}).get(intake.SCREENED)) for s in app.scopes] == [False]
        for name in ("/first", "/person", "/bulk"):
            app.let(name)
            await _settle()
        await asyncio.gather(*tasks)
        assert app.entered == ["/first", "/person", "/bulk"] and gate.taking == 0
        assert [bool(s["state"].get(intake.SCREENED)) for s in app.scopes] == [False, True, True]

    asyncio.run(scenario())
