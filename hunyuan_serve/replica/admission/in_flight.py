"""The replica's admission: the count of requests in flight and the rule that admits, queues or refuses."""

from __future__ import annotations

from collections.abc import Mapping

from hunyuan_serve.replica.admission import priority, queue_wait
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.lifecycle import Lifecycle


class Admission:
    """The one count of requests in flight, by class and by key, and the rule that admits one more:
    ready, and a place to run (max_in_flight; for bulk under its cap and its key's share:
    priority.admits) or else one to wait in: the same rule over max_in_flight + max_queued, and the
    wait it would face, at the rate this replica served, within the bound (queue_wait.wait_refusal).

    A request admitted past max_in_flight is not held here: its engine calls wait in the replica's queue
    for engine room (admission/engine_room.py), people's first, bulk fair per key under the bulk width."""

    def __init__(
        self,
        lifecycle: Lifecycle,
        max_in_flight: int,
        retry_after_s: int,
        *,
        interactive_reserve: float = 0.0,
        bulk_key_share_min: int = 1,
        weights: Mapping[str | None, int] | None = None,
        waiting: priority.Waiting | None = None,
        queue: queue_wait.Queue | None = None,
        served: queue_wait.ServedRate | None = None,
    ) -> None:
        self.lifecycle = lifecycle
        self.max_in_flight = max_in_flight
        self.retry_after_s = retry_after_s
        self.retry_after = {"Retry-After": str(retry_after_s)}
        self.in_flight = 0
        self.by_class = dict.fromkeys(priority.CLASSES, 0)
        self.bulk_by_key: dict[str | None, int] = {}
        self.reserve = interactive_reserve
        self.key_share_min = bulk_key_share_min
        self.weights: Mapping[str | None, int] = weights or {}
        # Who was refused lately (replica.waiting_window_s): freed places go to them first.
        self.waiting = waiting or priority.Waiting(0.0)
        # None (or max_queued 0): no queue, a request past max_in_flight is refused at once.
        self.queue = queue
        self.served = served or queue_wait.ServedRate(float("inf"))

    def enter(self, cls: str = priority.INTERACTIVE, key: str | None = None, screened: bool = False) -> None:
        """Take a place, or raise a 503 (not ready, or none for this class and key); leave() gives it back.
        `screened`: its wait was judged when it came (screen), so it is not refused for its wait now."""
        if not self.lifecycle.ready:
            raise self._not_ready()
        refused = self._admits(cls, key, self.max_in_flight)
        headers = self.retry_after
        queue = self._queue()
        if refused is not None and queue is not None:
            refused = self._admits(cls, key, self.max_in_flight + queue.max_queued)
            if refused is not None:  # the same rule over the places and the queue: its message names both
                refused = refused.replace("max_in_flight", "max_in_flight + max_queued")
            elif not screened:
                refused, headers = self._wait_refusal(cls, queue)
        if refused is not None:
            self.waiting.refused(cls, key)
            raise ApiError(503, "overloaded", refused, headers)
        self.waiting.admitted(cls, key)
        self._take(cls, key)

    def screen(self, cls: str, key: str | None, ahead: int) -> ApiError | None:
        """The 503 a request of `cls` would get at enter() once the `ahead` requests that go before it
        into the replica (waiting in its intake: people's before everyone's) are taken in first: not
        ready, every place and the queue taken, or a wait past its bound. Asked as a request comes to
        wait in the intake, so that one bound to be refused is refused at once, not after the line;
        None: it waits its turn, and its wait is settled: enter() (screened) then holds it to the rest
        of the rule (classes' and keys' shares), never to a wait the rate learned meanwhile makes
        longer. A request refused after it waited would have waited for nothing."""
        if not self.lifecycle.ready:
            return self._not_ready()
        queue = self._queue()
        places = self.max_in_flight + (queue.max_queued if queue is not None else 0)
        if self.in_flight + ahead >= places:
            named = "max_in_flight + max_queued" if queue is not None else "max_in_flight"
            why = f"{self.in_flight} requests in flight and {ahead} being taken in ahead: {named}={places}"
            refused: ApiError | None = ApiError(503, "overloaded", why, self.retry_after)
        elif queue is None:
            return None
        else:
            why_wait, headers = self._wait_refusal(cls, queue, ahead)
            refused = ApiError(503, "overloaded", why_wait, headers) if why_wait is not None else None
        if refused is not None:
            self.waiting.refused(cls, key)
        return refused

    def _queue(self) -> queue_wait.Queue | None:
        """The queue for engine room, where this replica has one (max_queued above 0)."""
        return self.queue if self.queue is not None and self.queue.max_queued else None

    def _not_ready(self) -> ApiError:
        message = f"replica is {self.lifecycle.phase.value}: {self.lifecycle.reason}"
        return ApiError(503, "not_ready", message, self.retry_after)

    def _admits(self, cls: str, key: str | None, places: int) -> str | None:
        return priority.admits(
            cls,
            key,
            in_flight=self.in_flight,
            bulk_in_flight=self.bulk_by_key,
            weights=self.weights,
            max_in_flight=places,
            reserve=self.reserve,
            key_share_min=self.key_share_min,
            interactive_waiting=self.waiting.interactive(),
            waiting_keys=self.waiting.keys(),
        )

    def _wait_refusal(
        self, cls: str, queue: queue_wait.Queue, ahead: int = 0
    ) -> tuple[str | None, dict[str, str]]:
        """The wait rule over what is in flight and `ahead` more of those served before `cls`."""
        interactive = self.by_class[priority.INTERACTIVE] + ahead
        in_flight = self.in_flight + ahead
        refused = queue_wait.wait_refusal(cls, in_flight, interactive, queue, self.served.rate())
        if refused is None:
            return None, self.retry_after
        why, over_s = refused
        return why, {"Retry-After": str(queue_wait.retry_after_s(self.retry_after_s, over_s))}

    def move(self, was: str, to: str, key: str | None, screened: bool = False) -> None:
        """Change an admitted request's class; refused (and left as it was) where `to` has no place.
        `screened`: as enter's (its wait judged as it came is not judged again)."""
        self.leave(was, key)
        try:
            self.enter(to, key, screened)
        except ApiError:
            self._take(was, key)
            raise

    def _take(self, cls: str, key: str | None) -> None:
        self.in_flight += 1
        self.by_class[cls] += 1
        if cls == priority.BULK:
            self.bulk_by_key[key] = self.bulk_by_key.get(key, 0) + 1

    def answered(self) -> None:
        """A request was answered (before its leave): the served rate learns from it while every place
        is taken."""
        self.served.served(self.in_flight >= self.max_in_flight)

    def leave(self, cls: str = priority.INTERACTIVE, key: str | None = None) -> None:
        self.in_flight -= 1
        self.by_class[cls] -= 1
        if cls == priority.BULK:
            left = self.bulk_by_key.get(key, 0) - 1
            if left > 0:
                self.bulk_by_key[key] = left
            else:
                self.bulk_by_key.pop(key, None)
