"""The replica's admission: the count of requests in flight and the rule that admits, queues or refuses."""

from __future__ import annotations

from collections.abc import Mapping

from hunyuan_serve.replica import priority, queue_wait
from hunyuan_serve.replica.errors import ApiError
from hunyuan_serve.replica.lifecycle import Lifecycle


class Admission:
    """The one count of requests in flight, by class and by key, and the rule that admits one more:
    ready, and a place to run (max_in_flight; for bulk under its cap and its key's share:
    priority.admits) or else one to wait in: the same rule over max_in_flight + max_queued, and the
    wait it would face, at the rate this replica served, within the bound (queue_wait.wait_refusal).

    A request admitted past max_in_flight is not held here: its engine call waits, bulk in the bulk
    width's queue (fair per key, replica/bulk_gate.py), interactive first in the engine's priority queue."""

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

    def enter(self, cls: str = priority.INTERACTIVE, key: str | None = None) -> None:
        """Take a place, or raise a 503 (not ready, or none for this class and key); leave() gives it back."""
        lifecycle = self.lifecycle
        if not lifecycle.ready:
            message = f"replica is {lifecycle.phase.value}: {lifecycle.reason}"
            raise ApiError(503, "not_ready", message, self.retry_after)
        refused = self._admits(cls, key, self.max_in_flight)
        headers = self.retry_after
        if refused is not None and self.queue is not None and self.queue.max_queued:
            refused = self._admits(cls, key, self.max_in_flight + self.queue.max_queued)
            if refused is None:
                refused, headers = self._wait_refusal(cls, self.queue)
            else:  # the same rule over the places and the queue: its message names both
                refused = refused.replace("max_in_flight", "max_in_flight + max_queued")
        if refused is not None:
            self.waiting.refused(cls, key)
            raise ApiError(503, "overloaded", refused, headers)
        self.waiting.admitted(cls, key)
        self._take(cls, key)

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

    def _wait_refusal(self, cls: str, queue: queue_wait.Queue) -> tuple[str | None, dict[str, str]]:
        interactive = self.by_class[priority.INTERACTIVE]
        refused = queue_wait.wait_refusal(cls, self.in_flight, interactive, queue, self.served.rate())
        if refused is None:
            return None, self.retry_after
        why, over_s = refused
        return why, {"Retry-After": str(queue_wait.retry_after_s(self.retry_after_s, over_s))}

    def move(self, was: str, to: str, key: str | None) -> None:
        """Change an admitted request's class; refused (and left as it was) where `to` has no place."""
        self.leave(was, key)
        try:
            self.enter(to, key)
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
