"""The client library: the sender API of DESIGN §3.

Protocol
--------
Callers on any thread or asyncio loop hand typed messages to one :class:`CoordinatorClient`.
The client owns a background thread running its own asyncio loop and Temporal client; it
packs waiting requests into ``submit`` updates (at most ``max_requests_per_update`` requests
and ``max_update_bytes`` bytes each, at most ``max_inflight_updates`` at once, below the
server's in-flight limit) and waiting events into ``events`` signals (sent one at a time per
client, numbered by ``seq``).

Guarantees
----------
* Every request id gets exactly one response, or a client-side error
  (:class:`~streamctl.client.errors.ClientError`). Retries reuse the request ids, so the
  coordinator never applies a request twice: ``Busy``/``ContinuingAsNew`` rejections,
  RESOURCE_EXHAUSTED, FAILED_PRECONDITION, UNAVAILABLE and update timeouts are retried with
  backoff.
* Every ``ask`` returns by its deadline: ``request_timeout`` after the call (or the call's own
  shorter ``timeout``), waiting for room in the outbox included. The caller itself watches its
  deadline, so a coordinator that never answers (no worker polling, a wedged workflow) or a
  failure inside the client still ends in :class:`~streamctl.client.errors.RequestTimeout` on
  time. An expired request still in the outbox is never sent.
* An answer this client cannot read fails its requests at once, never by timeout:
  :class:`~streamctl.client.errors.MissingPayloadKey` names the payload key it is encrypted
  with, :class:`~streamctl.client.errors.UndecodableAnswer` any other cause (another payload
  codec, a malformed answer).
* No failure is lost in a background task: every task of the client settles the messages it
  carries with a typed error, whatever goes wrong (:class:`~streamctl.client.errors.
  ClientFailure` for the client's own bugs), and a pump that died fails what is queued and
  refuses new messages with its cause.
* An event batch is retried with its sequence number until the signal is accepted; the
  workflow drops a batch it has seen, so an event counts once.
* The outbox is bounded (``max_outbox`` unanswered requests, ``max_outbox`` undelivered
  events): ``*_blocking`` calls block, async calls wait, ``try_send`` raises
  :class:`OutboxFull` at once, ``send_timeout`` raises ``TimeoutError``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import math
import random
import threading
import time
import uuid
import zlib
from collections import deque
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson
from google.protobuf.message import DecodeError
from temporalio.client import (
    WorkflowHandle,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError, TemporalError
from temporalio.service import RPCError, RPCStatusCode

from streamctl import config
from streamctl.client.errors import (
    ClientClosed,
    ClientFailure,
    CoordinatorUnavailable,
    MissingPayloadKey,
    OutboxFull,
    RequestTimeout,
    TooLarge,
    UndecodableAnswer,
    unwrap,
)
from streamctl.compact_json import dumps_bytes
from streamctl.limits import MAX_REQUEST_BYTES
from streamctl.workflows.coordinator import (
    COORDINATOR_WORKFLOW_ID,
    MAX_EVENT_BATCH_BYTES,
    MAX_EVENTS_PER_SIGNAL,
    MAX_REQUESTS_PER_UPDATE,
)
from streamctl.workflows.messages import (
    Envelope,
    ErrorCode,
    Event,
    EventBatch,
    Request,
    Response,
    compaction_key,
    merge_events,
)
from streamctl.workflows.passes import JSON_ENCODING, json_payload
from streamctl.workflows.payload_crypto import PayloadKeyError, encrypted_with, key_id
from streamctl.workflows.wire import connect

log = logging.getLogger(__name__)
T = TypeVar("T")

RETRYABLE_REJECTIONS = frozenset({"Busy", "ContinuingAsNew"})
RETRYABLE_STATUS = frozenset(
    {
        RPCStatusCode.RESOURCE_EXHAUSTED,
        RPCStatusCode.FAILED_PRECONDITION,
        RPCStatusCode.UNAVAILABLE,
        RPCStatusCode.DEADLINE_EXCEEDED,
        RPCStatusCode.NOT_FOUND,
        RPCStatusCode.ABORTED,
        RPCStatusCode.CANCELLED,
        RPCStatusCode.INTERNAL,
        RPCStatusCode.UNKNOWN,
    }
)


_ID_PREFIX = uuid.uuid4().hex[:16]
_id_counter = itertools.count(1)


async def _cancel_other_tasks() -> None:
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def new_id() -> str:
    """A request or event id unique across processes: a per-process random prefix and a counter.

    (A fresh UUID per message was a tenth of a busy client's CPU.)
    """
    return f"{_ID_PREFIX}-{next(_id_counter)}"


class _Slots:
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
class _Outgoing:
    """A message waiting in the outbox until :func:`_settle` gives it its outcome, once.

    Thread callers and events wait on ``future``; asyncio callers on ``waiter``. ``followers``
    are the futures of events merged into this one; each holds a slot in ``slots``.
    """

    envelope: Envelope
    wire: bytes
    """The envelope's JSON as a request batch carries it (events travel as objects and merge)."""
    deadline: float
    """When its caller stops waiting (``time.monotonic``; ``inf`` for events)."""
    budget: float
    """The seconds from the call to ``deadline``, for the timeout's message."""
    slots: _Slots
    future: concurrent.futures.Future[Response | None] | None = None
    waiter: _Waiter | None = None
    followers: list[concurrent.futures.Future[Response | None]] = field(default_factory=list)
    settled: bool = False
    last_error: str | None = None
    """Why the latest attempt to deliver it failed, for the timeout's message."""


_settle_lock = threading.Lock()


def _settle(items: Iterable[_Outgoing], outcome_of: Callable[[_Outgoing], Any]) -> None:
    """Resolve each item not yet settled with ``outcome_of(item)`` (a response, None for an
    event, or an exception), from any thread: futures directly, asyncio waiters with one
    hand-over per loop, and the outbox room in one step per half."""
    with _settle_lock:
        fresh = [item for item in items if not item.settled]
        for item in fresh:
            item.settled = True
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Response], Any]]] = {}
    released: dict[_Slots, int] = {}
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
        released[item.slots] = released.get(item.slots, 0) + 1 + len(item.followers)
    for loop, outcomes in by_loop.items():
        _hand_over(loop, outcomes)
    for slots, count in released.items():
        slots.give(count)


@dataclass(frozen=True)
class _Waiter:
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


@dataclass
class ClientStats:
    updates_sent: int = 0
    update_retries: int = 0
    signals_sent: int = 0
    signal_retries: int = 0
    requests_answered: int = 0
    events_delivered: int = 0


class CoordinatorClient:
    """Sends requests and events to the coordinator; safe from many threads and tasks.

    ``payload_keys`` are the keys its payload codec decrypts with (default:
    :func:`streamctl.config.payload_keys`); a frontend of a stack passes the stack's own.
    """

    def __init__(
        self,
        address: str = "localhost:7233",
        *,
        namespace: str | None = None,
        workflow_id: str = COORDINATOR_WORKFLOW_ID,
        max_outbox: int = 50_000,
        max_requests_per_update: int = 1000,
        max_update_bytes: int = 512 * 1024,
        max_inflight_updates: int = 8,
        max_events_per_signal: int = 2000,
        request_timeout: float = 300.0,
        sender: str | None = None,
        payload_keys: tuple[bytes, ...] | None = None,
    ) -> None:
        if not 0 < max_requests_per_update <= MAX_REQUESTS_PER_UPDATE:
            raise ValueError(
                f"max_requests_per_update must be from 1 to {MAX_REQUESTS_PER_UPDATE}, "
                f"got {max_requests_per_update}"
            )
        if not 0 < max_events_per_signal <= MAX_EVENTS_PER_SIGNAL:
            raise ValueError(
                f"max_events_per_signal must be from 1 to {MAX_EVENTS_PER_SIGNAL}, "
                f"got {max_events_per_signal}"
            )
        if not request_timeout > 0:
            raise ValueError(f"request_timeout must be positive, got {request_timeout}")
        self.address = address
        self.namespace = namespace
        self.workflow_id = workflow_id
        self.max_requests_per_update = max_requests_per_update
        self.max_update_bytes = max_update_bytes
        self.max_inflight_updates = max_inflight_updates
        self.max_events_per_signal = max_events_per_signal
        self.request_timeout = request_timeout
        self.sender = sender or f"client-{new_id()}"
        self.payload_keys = payload_keys
        self.stats = ClientStats()

        self._request_slots = _Slots(max_outbox)
        self._event_slots = _Slots(max_outbox)
        self._lock = threading.Lock()
        self._requests: deque[_Outgoing] = deque()
        self._events: deque[_Outgoing] = deque()
        self._unsent_events_by_key: dict[tuple[str, str], _Outgoing] = {}
        self._inflight_updates = 0
        self._sending_events = False
        self._wake_scheduled = False
        self._closed = False
        self._broken: ClientFailure | None = None
        """Set when the pump died: queued messages failed with it, new ones are refused."""
        self._held_keys: tuple[str, ...] = ()
        self._seq = itertools.count(1)

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="streamctl-client", daemon=True
        )
        self._thread.start()
        self._wake: asyncio.Event | None = None
        self._handle: WorkflowHandle[Any, Any] | None = None
        self._pump: asyncio.Task[None] | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def connect_blocking(self, timeout: float = 30.0) -> CoordinatorClient:
        self._call(self._connect(), timeout)
        return self

    async def connect(self) -> CoordinatorClient:
        await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._connect(), self._loop))
        return self

    async def _connect(self) -> None:
        keys = config.payload_keys() if self.payload_keys is None else self.payload_keys
        temporal = await connect(self.address, self.namespace, payload_keys=keys)
        self._held_keys = tuple(key_id(key) for key in keys)
        self._handle = temporal.get_workflow_handle(self.workflow_id)
        self._wake = asyncio.Event()
        self._pump = asyncio.get_running_loop().create_task(self._run_pump())
        self._pump.add_done_callback(self._after_pump)

    def close(self, timeout: float = 30.0) -> None:
        """Deliver what is queued (up to ``timeout``), then stop the background thread."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                idle = not self._requests and not self._events and self._inflight_updates == 0
            if idle:
                break
            time.sleep(0.01)
        self._closed = True
        self._fail_queued(ClientClosed, "client closed before delivery")
        if self._thread.is_alive():
            # Cancel and await the pump and its sends on their own loop, so none is destroyed
            # while still pending when the loop stops.
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(_cancel_other_tasks(), self._loop).result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)

    def __enter__(self) -> CoordinatorClient:
        return self.connect_blocking()

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- requests ----------------------------------------------------------------------------

    async def ask(self, request: Request, *, request_id: str | None = None) -> Any:
        """Send a request and return its result; raise its typed error if it failed, and
        :class:`RequestTimeout` if no answer came within ``request_timeout``."""
        response = await self.ask_response(request, request_id=request_id)
        return unwrap(response)

    def ask_blocking(
        self, request: Request, *, request_id: str | None = None, timeout: float | None = None
    ) -> Any:
        """:meth:`ask` for threads; ``timeout`` shortens the deadline below
        ``request_timeout``."""
        return unwrap(self.ask_response_blocking(request, request_id=request_id, timeout=timeout))

    async def ask_many(self, requests: Sequence[Request]) -> list[Response]:
        """Send many requests; return their responses in order (the coordinator's errors are
        not raised; a client-side error such as :class:`RequestTimeout` is)."""
        items: list[_Outgoing] = []
        try:
            for request in requests:
                items.append(await self._enqueue_request_async(request.to_envelope(new_id())))
            return [await self._outcome(item) for item in items]
        finally:
            # After an error nobody reads the others' outcomes (cancelling a read one is a
            # no-op), and asyncio would report each one's error as never retrieved.
            for item in items:
                if item.waiter is not None:
                    item.waiter.future.cancel()

    async def ask_response(self, request: Request, *, request_id: str | None = None) -> Response:
        envelope = request.to_envelope(request_id or new_id())
        return await self._outcome(await self._enqueue_request_async(envelope))

    def ask_response_blocking(
        self, request: Request, *, request_id: str | None = None, timeout: float | None = None
    ) -> Response:
        envelope = request.to_envelope(request_id or new_id())
        budget = self.request_timeout if timeout is None else min(timeout, self.request_timeout)
        deadline = time.monotonic() + budget
        try:
            item = self._enqueue(
                envelope, self._request_slots, self._requests, budget, deadline, budget
            )
        except OutboxFull:
            raise _outbox_timeout(envelope, budget) from None
        future = item.future
        assert future is not None
        try:
            response = future.result(max(0.0, deadline - time.monotonic()))
        except concurrent.futures.TimeoutError:
            # Ours to settle now; if the answer won the race, result() returns it instead.
            self._expire([item])
            response = future.result()
        assert response is not None
        return response

    async def ask_envelope(self, envelope: Envelope) -> Response:
        """Send a raw envelope (for tools and tests that speak the wire format)."""
        return await self._outcome(await self._enqueue_request_async(envelope))

    async def _enqueue_request_async(self, envelope: Envelope) -> _Outgoing:
        """Queue a request once the outbox has room (waiting at most until its deadline)."""
        loop = asyncio.get_running_loop()
        waiter = _Waiter(loop, loop.create_future())
        deadline = time.monotonic() + self.request_timeout
        while True:
            try:
                return self._enqueue(
                    envelope,
                    self._request_slots,
                    self._requests,
                    0,
                    deadline,
                    self.request_timeout,
                    waiter,
                )
            except OutboxFull:
                if time.monotonic() >= deadline:
                    raise _outbox_timeout(envelope, self.request_timeout) from None
                await asyncio.sleep(0.002)

    async def _outcome(self, item: _Outgoing) -> Response:
        """The answer of a queued request, by its deadline at the latest."""
        assert item.waiter is not None
        future = item.waiter.future
        try:
            await asyncio.wait([future], timeout=max(0.0, item.deadline - time.monotonic()))
        except asyncio.CancelledError:
            future.cancel()  # nobody will read its outcome now
            raise
        if not future.done():
            self._expire([item])
        # Settled by now (the hand-over to this loop is queued); the answer if it won the race.
        return await future

    @staticmethod
    def _expire(items: Sequence[_Outgoing]) -> None:
        """Fail ``items`` that are still unanswered with :class:`RequestTimeout`."""

        def timeout(item: _Outgoing) -> RequestTimeout:
            envelope = item.envelope
            last = f"; last error: {item.last_error}" if item.last_error else ""
            return RequestTimeout(
                f"no answer to {envelope.kind} {envelope.id} within {item.budget:g}s{last} (the "
                "request may have been applied: asking again with the same request id gets "
                "its answer)",
                request_id=envelope.id,
            )

        _settle(items, timeout)

    # --- events ------------------------------------------------------------------------------

    async def send(self, event: Event) -> None:
        """Queue an event and wait until the coordinator has accepted it."""
        while True:
            try:
                future = self._enqueue_event(event, 0)
                break
            except OutboxFull:
                await asyncio.sleep(0.002)
        await asyncio.wrap_future(future)

    def send_blocking(self, event: Event) -> None:
        self._enqueue_event(event, None).result()

    def try_send(self, event: Event) -> None:
        """Queue an event without waiting; :class:`OutboxFull` when the outbox is full."""
        self._enqueue_event(event, 0)

    def send_timeout(self, event: Event, timeout: float) -> None:
        """Queue an event, waiting at most ``timeout`` seconds for room in the outbox."""
        try:
            self._enqueue_event(event, timeout)
        except OutboxFull:
            raise TimeoutError(f"outbox still full after {timeout}s") from None

    async def send_many(self, events: Iterable[Event]) -> None:
        futures = []
        for event in events:
            while True:
                try:
                    futures.append(self._enqueue_event(event, 0))
                    break
                except OutboxFull:
                    await asyncio.sleep(0.002)
        for future in futures:
            await asyncio.wrap_future(future)

    def _enqueue_event(
        self, event: Event, timeout: float | None
    ) -> concurrent.futures.Future[Response | None]:
        # Events have no deadline: they are retried until accepted (module docstring).
        item = self._enqueue(
            event.to_envelope(new_id()),
            self._event_slots,
            self._events,
            timeout,
            math.inf,
            math.inf,
        )
        assert item.future is not None  # only asyncio request callers pass a waiter
        return item.future

    def flush_events(self, timeout: float = 60.0) -> None:
        """Block until every queued event has been accepted by the coordinator."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if not self._events and not self._sending_events:
                    return
            time.sleep(0.005)
        raise TimeoutError("events still queued")

    # --- the outbox --------------------------------------------------------------------------

    def _enqueue(
        self,
        envelope: Envelope,
        slots: _Slots,
        queue: deque[_Outgoing],
        timeout: float | None,
        deadline: float,
        budget: float,
        waiter: _Waiter | None = None,
    ) -> _Outgoing:
        """Queue ``envelope`` until ``deadline`` (monotonic, ``budget`` seconds after the call);
        its outcome goes to ``waiter`` if given, else to the item's future. :class:`OutboxFull`
        when no slot frees within ``timeout``."""
        if self._closed:
            raise ClientClosed("client is closed")
        if self._broken is not None:
            raise ClientFailure(str(self._broken))
        wire = dumps_bytes(envelope)
        future: concurrent.futures.Future[Response | None] | None = (
            concurrent.futures.Future() if waiter is None else None
        )
        item = _Outgoing(envelope, wire, deadline, budget, slots, future=future, waiter=waiter)
        if len(wire) > MAX_REQUEST_BYTES:
            error = TooLarge(
                f"{envelope.kind} is {len(wire)} bytes; "
                f"the limit for one message is {MAX_REQUEST_BYTES}",
                request_id=envelope.id,
            )
            if queue is not self._requests:
                raise error
            refused = Response(
                id=envelope.id,
                ok=False,
                error_code=ErrorCode.TOO_LARGE,
                error_message=error.message,
            )
            # Answered here, holding no slot: settled without going through the outbox.
            item.settled = True
            if waiter is not None:
                waiter.future.set_result(refused)  # the caller's own loop: no hand-over needed
            else:
                assert future is not None
                future.set_result(refused)
            return item
        if not slots.take(timeout):
            raise OutboxFull("the client's outbox is full")
        with self._lock:
            if queue is self._events and self._merge_unsent_event(item):
                return item
            queue.append(item)
            wake = not self._wake_scheduled
            self._wake_scheduled = True
        if wake:
            self._loop.call_soon_threadsafe(self._set_wake)
        if self._broken is not None:
            self._fail_queued(ClientFailure, str(self._broken))  # the pump died meanwhile
        return item

    def _fail_queued(self, error: Callable[[str], BaseException], reason: str) -> None:
        """Settle everything still in the outbox with ``error(reason)``."""
        with self._lock:
            leftovers = list(self._requests) + list(self._events)
            self._requests.clear()
            self._events.clear()
            self._unsent_events_by_key.clear()
        _settle(leftovers, lambda _item: error(reason))

    def _merge_unsent_event(self, item: _Outgoing) -> bool:
        """Fold ``item`` into an unsent event with the same compaction key (caller holds the lock).

        The coordinator would compact them anyway; doing it here keeps signals (and the
        workflow's history) small under high heartbeat rates. Counts add up, so nothing is lost.
        """
        key = compaction_key(item.envelope)
        if key is None:
            return False
        older = self._unsent_events_by_key.get(key)
        merged = merge_events(older.envelope, item.envelope) if older is not None else None
        if older is None or merged is None:
            self._unsent_events_by_key[key] = item
            return False
        older.envelope = merged
        assert item.future is not None
        older.followers.append(item.future)
        return True

    def _set_wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _call(self, coroutine: Coroutine[Any, Any, T], timeout: float | None) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    # --- the pump (runs on the client's loop) -----------------------------------------------

    async def _run_pump(self) -> None:
        assert self._wake is not None
        inflight: set[asyncio.Task[None]] = set()
        event_task: asyncio.Task[None] | None = None
        while True:
            await self._wake.wait()
            self._wake.clear()
            with self._lock:
                self._wake_scheduled = False
            while len(inflight) < self.max_inflight_updates:
                batch = self._take(
                    self._requests, self.max_requests_per_update, self.max_update_bytes
                )
                if not batch:
                    break
                task = asyncio.create_task(self._carrying(batch, self._send_update))
                inflight.add(task)
                task.add_done_callback(lambda t: self._after_update(inflight, t))
            if event_task is None or event_task.done():
                batch = self._take(
                    self._events,
                    self.max_events_per_signal,
                    # Half the workflow's bound: it measures events by repr, not JSON.
                    min(4 * self.max_update_bytes, MAX_EVENT_BATCH_BYTES // 2),
                )
                if batch:
                    self._sending_events = True
                    event_task = asyncio.create_task(self._carrying(batch, self._send_events))
                    event_task.add_done_callback(lambda _t: self._after_send(events_done=True))
            self._inflight_updates = len(inflight)

    def _after_pump(self, pump: asyncio.Task[None]) -> None:
        """The pump ends only when cancelled by :meth:`close`; if it died, nothing queued
        would ever move, so everything queued fails with the cause and new messages are
        refused with it."""
        if pump.cancelled():
            return
        error = pump.exception()
        if error is None:
            return
        log.error("the client's pump failed; failing every queued message", exc_info=error)
        self._broken = ClientFailure(f"the client's pump failed: {type(error).__name__}: {error}")
        self._fail_queued(ClientFailure, str(self._broken))

    async def _carrying(
        self,
        batch: list[_Outgoing],
        send: Callable[[list[_Outgoing]], Coroutine[Any, Any, None]],
    ) -> None:
        """``send(batch)``, so that whatever it raises reaches the batch's callers."""
        try:
            await send(batch)
        except asyncio.CancelledError:
            _settle(batch, lambda _item: ClientClosed("client closed while sending"))
            raise
        except Exception as error:
            log.exception("sending %d messages failed inside the client", len(batch))
            reason = f"the client failed while sending: {type(error).__name__}: {error}"
            _settle(batch, lambda _item: ClientFailure(reason))

    def _after_update(self, inflight: set[asyncio.Task[None]], task: asyncio.Task[None]) -> None:
        inflight.discard(task)
        self._inflight_updates = len(inflight)
        self._after_send()

    def _after_send(self, events_done: bool = False) -> None:
        if events_done:
            self._sending_events = False
        with self._lock:
            self._wake_scheduled = True
        self._set_wake()

    def _take(self, queue: deque[_Outgoing], max_count: int, max_bytes: int) -> list[_Outgoing]:
        """The next batch from ``queue``; requests whose callers gave up or whose deadline
        passed are dropped unsent (expired ones get their timeout here)."""
        batch: list[_Outgoing] = []
        expired: list[_Outgoing] = []
        total = 0
        now = time.monotonic()
        with self._lock:
            while queue and len(batch) < max_count:
                if batch and total + len(queue[0].wire) > max_bytes:
                    break
                item = queue.popleft()
                key = compaction_key(item.envelope) if queue is self._events else None
                if key is not None and self._unsent_events_by_key.get(key) is item:
                    del self._unsent_events_by_key[key]
                if item.settled:
                    continue
                if item.deadline <= now:
                    expired.append(item)
                    continue
                total += len(item.wire)
                batch.append(item)
        self._expire(expired)
        return batch

    async def _send_update(self, batch: list[_Outgoing]) -> None:
        assert self._handle is not None
        delay = 0.05
        # One update id for every attempt: a retry that reaches the same run attaches to the
        # update already accepted instead of running the handler again.
        update_id = f"u-{new_id()}"
        while True:
            now = time.monotonic()
            self._expire([item for item in batch if item.deadline <= now])
            batch = [item for item in batch if not item.settled]  # answered, or given up
            if not batch:
                return
            try:
                # Bounded by the batch's last deadline: with no worker polling, an update
                # waits for its answer indefinitely.
                answer: RawValue = await asyncio.wait_for(
                    self._handle.execute_update(
                        "submit",
                        args=[
                            [item.envelope.id for item in batch],
                            json_payload(b"[" + b",".join(item.wire for item in batch) + b"]"),
                        ],
                        id=update_id,
                        result_type=RawValue,
                    ),
                    max(item.deadline for item in batch) - now,
                )
                self.stats.updates_sent += 1
                break
            except Exception as error:
                if _decoding_failed(error):
                    undecodable = self._undecodable(error)
                    log.warning("%s", undecodable)
                    _settle(batch, _failing_with(undecodable))
                    return
                if not _retryable(error) or self._closed:
                    _settle(batch, _unavailable(f"request batch failed: {error}"))
                    return
                self.stats.update_retries += 1
                for item in batch:
                    item.last_error = str(error) or type(error).__name__
                log.debug("retrying %d requests after %s", len(batch), error)
                await asyncio.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 2.0)
        try:
            by_id = self._read_answer(answer)
        except UndecodableAnswer as error:
            log.warning("%s", error)
            _settle(batch, _failing_with(error))
            return
        _settle(
            batch,
            lambda item: (
                by_id.get(item.envelope.id)
                or UndecodableAnswer(f"the answer lacks request {item.envelope.id}")
            ),
        )
        self.stats.requests_answered += len(batch)

    def _undecodable(self, error: Exception) -> UndecodableAnswer:
        """The typed error for a payload the data converter could not decode."""
        if isinstance(error, PayloadKeyError) and error.key_id is not None:
            return MissingPayloadKey(error.key_id, self._held_keys)
        return UndecodableAnswer(f"{type(error).__name__}: {error}")

    def _read_answer(self, answer: RawValue) -> dict[str, Response]:
        """The responses of a ``submit`` answer by request id; :class:`UndecodableAnswer`
        (:class:`MissingPayloadKey` for an encrypted one) when this client cannot read it."""
        payload = answer.payload
        needed = encrypted_with(payload)
        if needed is not None:  # the codec leaves what it cannot decrypt as it is
            raise MissingPayloadKey(needed, self._held_keys)
        encoding = payload.metadata.get("encoding", b"")
        if encoding != JSON_ENCODING:
            raise UndecodableAnswer(
                f"its payload has encoding {encoding.decode(errors='replace')!r}, not JSON: the "
                "coordinator uses a payload codec or converter this client lacks"
            )
        try:
            return {plain["id"]: Response(**plain) for plain in orjson.loads(payload.data)}
        except (ValueError, TypeError, KeyError) as error:
            raise UndecodableAnswer(
                f"it is not a list of responses ({type(error).__name__}: {error})"
            ) from None

    async def _send_events(self, batch: list[_Outgoing]) -> None:
        assert self._handle is not None
        seq = next(self._seq)
        events = EventBatch(self.sender, seq, [item.envelope for item in batch])
        delay = 0.05
        while True:
            try:
                await self._handle.signal("events", events)
                self.stats.signals_sent += 1
                break
            except Exception as error:
                if self._closed:
                    _settle(batch, lambda _item: ClientClosed("client closed"))
                    return
                if not _retryable(error):
                    # Retrying what can never be accepted would hang every sender waiting.
                    log.warning("dropping event batch %d: %s", seq, error)
                    _settle(batch, _unavailable(f"event batch refused: {error}"))
                    return
                self.stats.signal_retries += 1
                log.debug("retrying event batch %d after %s", seq, error)
                await asyncio.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 2.0)
        _settle(batch, lambda _item: None)
        self.stats.events_delivered += sum(len(item.followers) + 1 for item in batch)


def _outbox_timeout(envelope: Envelope, waited: float) -> RequestTimeout:
    return RequestTimeout(
        f"{envelope.kind} {envelope.id} found the client's outbox full for {waited:g}s; "
        "it was not sent",
        request_id=envelope.id,
    )


def _failing_with(error: UndecodableAnswer) -> Callable[[_Outgoing], BaseException]:
    """For :func:`_settle`: a fresh error of the same kind and cause per message (one
    instance raised in many callers would pile up their tracebacks)."""
    if isinstance(error, MissingPayloadKey):
        return lambda _item: MissingPayloadKey(error.key_id, error.held)
    return lambda _item: UndecodableAnswer(error.cause)


_DECODING_ERRORS = (zlib.error, DecodeError, ValueError, TypeError, KeyError)
"""What the payload codecs (``zlib``, ``Payload.ParseFromString``) and converters raise on a
payload they cannot read (``PayloadKeyError`` is a ``ValueError``); none of Temporal's RPC
errors is one, and retrying would meet the same payload again."""


def _decoding_failed(error: BaseException) -> bool:
    return isinstance(error, _DECODING_ERRORS) and not isinstance(error, TemporalError)


def _unavailable(reason: str) -> Callable[[_Outgoing], BaseException]:
    """For :func:`_settle`: a fresh :class:`CoordinatorUnavailable` per message."""
    return lambda _item: CoordinatorUnavailable(reason)


def _retryable(error: BaseException) -> bool:
    if isinstance(error, WorkflowUpdateRPCTimeoutOrCancelledError):
        return True
    if isinstance(error, WorkflowUpdateFailedError):
        cause = error.cause
        return isinstance(cause, ApplicationError) and cause.type in RETRYABLE_REJECTIONS
    if isinstance(error, RPCError):
        return error.status in RETRYABLE_STATUS
    return isinstance(error, asyncio.TimeoutError | ConnectionError)


@contextlib.asynccontextmanager
async def connected(address: str, **kwargs: Any) -> Any:
    """``async with connected(address) as client:`` for short scripts."""
    client = CoordinatorClient(address, **kwargs)
    await client.connect()
    try:
        yield client
    finally:
        await asyncio.to_thread(client.close)
