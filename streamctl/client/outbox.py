"""The client's outbox: the ids messages carry (:func:`new_id`), a message waiting for its
outcome (:class:`Outgoing`), the room it holds (:class:`Slots`), :func:`settle`, which gives
each message its outcome exactly once, from any thread, and :func:`expire`, the outcome of one
whose deadline passed (the protocol and guarantees are :mod:`streamctl.client.client`'s; the
queues themselves are :class:`~streamctl.client.pump.Pump`'s)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamctl.client.coordinator_errors import RequestTimeout
from streamctl.protocol.messages import Envelope, Response

_ID_PREFIX = uuid.uuid4().hex[:16]
_id_counter = itertools.count(1)


def new_id() -> str:
    """A request or event id unique across processes: a per-process random prefix and a counter.

    (A fresh UUID per message was a tenth of a busy client's CPU.)
    """
    return f"{_ID_PREFIX}-{next(_id_counter)}"


class Slots:
    """Room in one half of the outbox: a counter, and a condition only for callers that wait.

    (A ``threading.Semaphore`` per message was a tenth of a busy client's CPU.)
    """

    def __init__(self, capacity: int) -> None:
        self._free = capacity
        self._room = threading.Condition()

    def take(self, timeout: float | None) -> bool:
        """Take one slot: ``timeout`` 0 never waits, None waits as long as it takes."""
        with self._room:
            if self._free <= 0 and (
                timeout == 0 or not self._room.wait_for(lambda: self._free > 0, timeout)
            ):
                return False
            self._free -= 1
            return True

    def give(self, count: int) -> None:
        with self._room:
            self._free += count
            self._room.notify(count)


@dataclass
class Outgoing:
    """A message waiting in the outbox until :func:`settle` gives it its outcome, once.

    Thread callers and events wait on ``future`` (an event queued with ``try_send`` has
    none: nobody waits for it); asyncio callers on ``waiter``. ``merged`` events were folded
    into this one, each holding a slot in ``slots``; ``followers`` are the futures of those
    whose callers wait.
    """

    envelope: Envelope
    wire: bytes
    """The envelope's JSON as a request batch carries it (events travel as objects and merge)."""
    deadline: float
    """When its caller stops waiting (``time.monotonic``; ``inf`` for events)."""
    budget: float
    """The seconds from the call to ``deadline``, for the timeout's message."""
    slots: Slots
    future: concurrent.futures.Future[Response | None] | None = None
    waiter: Waiter | None = None
    followers: list[concurrent.futures.Future[Response | None]] = field(default_factory=list)
    merged: int = 0
    settled: bool = False
    last_error: str | None = None
    """Why the latest attempt to deliver it failed, for the timeout's message."""


_settle_lock = threading.Lock()


def settle(items: Iterable[Outgoing], outcome_of: Callable[[Outgoing], Any]) -> None:
    """Resolve each item not yet settled with ``outcome_of(item)`` (a response, None for an
    event, or an exception), from any thread: futures directly, asyncio waiters with one
    hand-over per loop, and the outbox room in one step per half."""
    with _settle_lock:
        fresh = [item for item in items if not item.settled]
        for item in fresh:
            item.settled = True
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Response], Any]]] = {}
    released: dict[Slots, int] = {}
    for item in fresh:
        outcome = outcome_of(item)
        futures = [item.future, *item.followers] if item.future is not None else item.followers
        for future in futures:
            if future.done():
                continue
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)
        if item.waiter is not None:
            by_loop.setdefault(item.waiter.loop, []).append((item.waiter.future, outcome))
        released[item.slots] = released.get(item.slots, 0) + 1 + item.merged
    for loop, outcomes in by_loop.items():
        _hand_over(loop, outcomes)
    for slots, count in released.items():
        slots.give(count)


def expire(items: Sequence[Outgoing]) -> None:
    """Fail ``items`` that are still unanswered with :class:`RequestTimeout`."""

    def timeout(item: Outgoing) -> RequestTimeout:
        envelope = item.envelope
        last = f"; last error: {item.last_error}" if item.last_error else ""
        return RequestTimeout(
            f"no answer to {envelope.kind} {envelope.id} within {item.budget:g}s{last} (the "
            "request may have been applied: asking again with the same request id gets "
            "its answer)",
            request_id=envelope.id,
        )

    settle(items, timeout)


@dataclass(frozen=True)
class Waiter:
    """An asyncio caller's future on its own loop.

    Answers arrive on the client's thread a batch at a time. ``asyncio.wrap_future`` would wake
    the caller's loop once per request (a write to its self-pipe each); answers are handed to
    each caller loop in one call per batch instead.
    """

    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Response]


def _hand_over(
    loop: asyncio.AbstractEventLoop, outcomes: list[tuple[asyncio.Future[Response], Any]]
) -> None:
    """Resolve waiters on their loop; a closed loop has nobody left waiting."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(_settle_waiters, outcomes)


def _settle_waiters(outcomes: list[tuple[asyncio.Future[Response], Any]]) -> None:
    """Runs on the caller's loop: resolve each waiter with its response or error."""
    for future, outcome in outcomes:
        if future.done():
            continue  # the caller was cancelled
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)
