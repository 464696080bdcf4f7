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
  (:class:`~streamctl.client.coordinator_errors.ClientError`). Retries reuse the request ids, so the
  coordinator never applies a request twice: ``Busy``/``ContinuingAsNew`` rejections,
  RESOURCE_EXHAUSTED, FAILED_PRECONDITION, UNAVAILABLE and update timeouts are retried with
  backoff. A request answered ``UNAVAILABLE ... ask again`` (its pass could not answer it
  then: :data:`~streamctl.error_codes.ASK_AGAIN`) is asked again under the same id, first in
  line. Such a request may be applied after requests sent after it: a request that depends on
  another waits for that one's answer before it is sent.
* Every ``ask`` returns by its deadline: ``request_timeout`` after the call (or the call's own
  shorter ``timeout``), waiting for room in the outbox included. The caller itself watches its
  deadline, so a coordinator that never answers (no worker polling, a wedged workflow) or a
  failure inside the client still ends in
  :class:`~streamctl.client.coordinator_errors.RequestTimeout` on
  time. An expired request still in the outbox is never sent.
* An answer this client cannot read fails its requests at once, never by timeout:
  :class:`~streamctl.client.coordinator_errors.MissingPayloadKey` names the payload key it is
  encrypted
  with, :class:`~streamctl.client.coordinator_errors.UndecodableAnswer` any other cause (another
  payload
  codec, a malformed answer).
* No failure is lost in a background task: every task of the client settles the messages it
  carries with a typed error, whatever goes wrong (:class:`~streamctl.client.coordinator_errors.
  ClientFailure` for the client's own bugs), and a pump that died fails what is queued and
  refuses new messages with its cause.
* An event batch is retried with its sequence number until the signal is accepted; the
  workflow drops a batch it has seen, so an event counts once.
* The outbox is bounded (``max_outbox`` unanswered requests, ``max_outbox`` undelivered
  events): ``*_blocking`` calls block, async calls wait, ``try_send`` raises
  :class:`OutboxFull` at once, ``send_timeout`` raises ``TimeoutError``.

The outbox's items and their settlement are :mod:`streamctl.client.outbox`'s; the sending half,
which runs on the client's loop, is :mod:`streamctl.client.pump`'s.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import itertools
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from temporalio.client import WorkflowHandle

from streamctl import config
from streamctl.client.coordinator_errors import (
    ClientClosed,
    ClientFailure,
    OutboxFull,
    RequestTimeout,
    TooLarge,
    unwrap,
)
from streamctl.client.outbox import Outgoing, Slots, Waiter, new_id
from streamctl.client.paging import PAGE_ROWS, first_page, next_page
from streamctl.client.pump import ClientStats, Pump, within
from streamctl.client.query_wait import SETTLED_STATES, wait_pushed
from streamctl.compact_json import dumps_bytes
from streamctl.error_codes import ErrorCode
from streamctl.limits import (
    MAX_EVENTS_PER_SIGNAL,
    MAX_REQUEST_BYTES,
    MAX_REQUESTS_PER_UPDATE,
)
from streamctl.protocol.coordinator_config import COORDINATOR_WORKFLOW_ID
from streamctl.protocol.messages import (
    Envelope,
    Event,
    Request,
    Response,
    compaction_key,
    merge_events,
)
from streamctl.workflows.payload_crypto import key_id
from streamctl.workflows.query_waits import QueryWait
from streamctl.workflows.wire import connect

log = logging.getLogger(__name__)

T = TypeVar("T")

WAIT_UPDATE_GRACE_S = 10.0
"""How much longer than its own timeout a ``wait_query`` update may take to answer (the
workflow task that times it out, the round trip) before the client gives up on it."""


async def _cancel_other_tasks() -> None:
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class CoordinatorClient(Pump):
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

        self._request_slots = Slots(max_outbox)
        self._event_slots = Slots(max_outbox)
        self._lock = threading.Lock()
        self._requests: deque[Outgoing] = deque()
        self._events: deque[Outgoing] = deque()
        self._unsent_events_by_key: dict[tuple[str, str], Outgoing] = {}
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

    async def ask(
        self, request: Request, *, request_id: str | None = None, timeout: float | None = None
    ) -> Any:
        """Send a request and return its result; raise its typed error if it failed, and
        :class:`RequestTimeout` if no answer came within ``request_timeout`` (or ``timeout``,
        when that is shorter)."""
        response = await self.ask_response(request, request_id=request_id, timeout=timeout)
        return unwrap(response)

    def ask_blocking(
        self, request: Request, *, request_id: str | None = None, timeout: float | None = None
    ) -> Any:
        """:meth:`ask` for threads; ``timeout`` shortens the deadline below
        ``request_timeout``."""
        return unwrap(self.ask_response_blocking(request, request_id=request_id, timeout=timeout))

    async def list_all(self, request: Request, *, page_rows: int = PAGE_ROWS) -> list[Any]:
        """Every item of a ``List*`` listing, asked for page by page (:mod:`.paging`); each page
        is one request with its own deadline."""
        items: list[Any] = []
        ask: Request | None = first_page(request, page_rows)
        while ask is not None:
            page = await self.ask(ask)
            items.extend(page["items"])
            ask = next_page(ask, page)
        return items

    def list_all_blocking(self, request: Request, *, page_rows: int = PAGE_ROWS) -> list[Any]:
        """:meth:`list_all` for threads."""
        items: list[Any] = []
        ask: Request | None = first_page(request, page_rows)
        while ask is not None:
            page = self.ask_blocking(ask)
            items.extend(page["items"])
            ask = next_page(ask, page)
        return items

    async def wait_for_query(
        self, query_id: int, states: frozenset[str] = SETTLED_STATES, timeout: float = 120.0
    ) -> dict[str, Any]:
        """The query's fields (``GetQuery``'s but the statement, sources and plan) once its
        state is one of ``states`` (by default RUNNING or ended: what ``--wait-running`` waits
        for), pushed by the pass that records it; :class:`QueryWaitTimeout` after ``timeout``
        seconds, :class:`NotFound` if there is no such query (:mod:`.query_wait`)."""
        return await wait_pushed(self, query_id, states, time.monotonic() + timeout)

    async def wait_query_update(
        self, query_id: int, states: frozenset[str], timeout: float
    ) -> QueryWait | None:
        """One ``wait_query`` update (:mod:`streamctl.workflows.query_waits`); ``None`` when
        the coordinator refused or could not answer it (the caller polls instead)."""

        async def wait() -> QueryWait | None:
            # Errors end here, on the client's loop: when the caller gives up, the future it
            # waits on is cancelled, and an error this task ended with would be lost.
            assert self._handle is not None
            try:
                return await within(
                    self._handle.execute_update(
                        "wait_query",
                        args=[query_id, sorted(states), timeout],
                        result_type=QueryWait,
                    ),
                    timeout + WAIT_UPDATE_GRACE_S,
                )
            except Exception as error:  # Busy, continuing as new, unreachable: poll instead
                log.debug("wait_query for query %s refused (%s); polling", query_id, error)
                return None

        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(wait(), self._loop))

    def wait_for_query_blocking(
        self, query_id: int, states: frozenset[str] = SETTLED_STATES, timeout: float = 120.0
    ) -> dict[str, Any]:
        """:meth:`wait_for_query` for threads."""
        return self._call(self.wait_for_query(query_id, states, timeout), None)

    async def ask_many(self, requests: Sequence[Request]) -> list[Response]:
        """Send many requests; return their responses in order (the coordinator's errors are
        not raised; a client-side error such as :class:`RequestTimeout` is)."""
        items: list[Outgoing] = []
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

    async def ask_response(
        self, request: Request, *, request_id: str | None = None, timeout: float | None = None
    ) -> Response:
        envelope = request.to_envelope(request_id or new_id())
        return await self._outcome(await self._enqueue_request_async(envelope, timeout))

    def _budget(self, timeout: float | None) -> float:
        """How long a request may take: ``request_timeout``, or a call's shorter ``timeout``."""
        if timeout is None:
            return self.request_timeout
        if not timeout >= 0:  # NaN too: no clock passes it
            raise ValueError(f"a request's timeout must be a number of seconds >= 0, not {timeout}")
        return min(timeout, self.request_timeout)

    def ask_response_blocking(
        self, request: Request, *, request_id: str | None = None, timeout: float | None = None
    ) -> Response:
        envelope = request.to_envelope(request_id or new_id())
        budget = self._budget(timeout)
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

    async def _enqueue_request_async(
        self, envelope: Envelope, timeout: float | None = None
    ) -> Outgoing:
        """Queue a request once the outbox has room (waiting at most until its deadline)."""
        budget = self._budget(timeout)
        loop = asyncio.get_running_loop()
        waiter = Waiter(loop, loop.create_future())
        deadline = time.monotonic() + budget
        while True:
            try:
                return self._enqueue(
                    envelope,
                    self._request_slots,
                    self._requests,
                    0,
                    deadline,
                    budget,
                    waiter,
                )
            except OutboxFull:
                if time.monotonic() >= deadline:
                    raise _outbox_timeout(envelope, budget) from None
                await asyncio.sleep(0.002)

    async def _outcome(self, item: Outgoing) -> Response:
        """The answer of a queued request, by its deadline at the latest."""
        assert item.waiter is not None
        future = item.waiter.future
        # One timer that settles the item with its timeout (the hand-over to this loop is
        # queued then, unless the answer won the race), not asyncio.wait, whose waiter future
        # and callbacks cost ~12 us more per request (100,000 awaits: 33 against 20 us each).
        deadline = item.waiter.loop.call_later(
            max(0.0, item.deadline - time.monotonic()), self._expire, [item]
        )
        try:
            # Cancelled here, the future is cancelled too: nobody will read its outcome now.
            return await future
        finally:
            deadline.cancel()

    # --- events ------------------------------------------------------------------------------

    async def send(self, event: Event) -> None:
        """Queue an event and wait until the coordinator has accepted it."""
        while True:
            try:
                future = self._enqueue_awaited_event(event, 0)
                break
            except OutboxFull:
                await asyncio.sleep(0.002)
        await asyncio.wrap_future(future)

    def send_blocking(self, event: Event) -> None:
        self._enqueue_awaited_event(event, None).result()

    def try_send(self, event: Event) -> None:
        """Queue an event without waiting; :class:`OutboxFull` when the outbox is full."""
        self._enqueue_event(event, 0, awaited=False)

    def send_timeout(self, event: Event, timeout: float) -> None:
        """Queue an event, waiting at most ``timeout`` seconds for room in the outbox."""
        try:
            self._enqueue_event(event, timeout, awaited=False)
        except OutboxFull:
            raise TimeoutError(f"outbox still full after {timeout}s") from None

    async def send_many(self, events: Iterable[Event]) -> None:
        futures = []
        for event in events:
            while True:
                try:
                    futures.append(self._enqueue_awaited_event(event, 0))
                    break
                except OutboxFull:
                    await asyncio.sleep(0.002)
        for future in futures:
            await asyncio.wrap_future(future)

    def _enqueue_awaited_event(
        self, event: Event, timeout: float | None
    ) -> concurrent.futures.Future[Response | None]:
        """Queue an event whose caller waits for it: the future settles when it is accepted."""
        future = self._enqueue_event(event, timeout, awaited=True).future
        assert future is not None
        return future

    def _enqueue_event(self, event: Event, timeout: float | None, *, awaited: bool) -> Outgoing:
        # Events have no deadline: they are retried until accepted (module docstring). One
        # nobody waits for gets no future: making one was a third of try_send's time.
        return self._enqueue(
            event.to_envelope(new_id()),
            self._event_slots,
            self._events,
            timeout,
            math.inf,
            math.inf,
            awaited=awaited,
        )

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
        slots: Slots,
        queue: deque[Outgoing],
        timeout: float | None,
        deadline: float,
        budget: float,
        waiter: Waiter | None = None,
        *,
        awaited: bool = True,
    ) -> Outgoing:
        """Queue ``envelope`` until ``deadline`` (monotonic, ``budget`` seconds after the call);
        its outcome goes to ``waiter`` if given, else to the item's future. :class:`OutboxFull`
        when no slot frees within ``timeout``. An event not ``awaited`` gets no future."""
        if self._closed:
            raise ClientClosed("client is closed")
        if self._broken is not None:
            raise ClientFailure(str(self._broken))
        wire = dumps_bytes(envelope)
        future: concurrent.futures.Future[Response | None] | None = (
            concurrent.futures.Future() if waiter is None and awaited else None
        )
        item = Outgoing(envelope, wire, deadline, budget, slots, future=future, waiter=waiter)
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

    def _merge_unsent_event(self, item: Outgoing) -> bool:
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
        older.merged += 1
        if item.future is not None:
            older.followers.append(item.future)
        return True

    def _call(self, coroutine: Coroutine[Any, Any, T], timeout: float | None) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)


def _outbox_timeout(envelope: Envelope, waited: float) -> RequestTimeout:
    return RequestTimeout(
        f"{envelope.kind} {envelope.id} found the client's outbox full for {waited:g}s; "
        "it was not sent",
        request_id=envelope.id,
    )


@contextlib.asynccontextmanager
async def connected(address: str, **kwargs: Any) -> Any:
    """``async with connected(address) as client:`` for short scripts."""
    client = CoordinatorClient(address, **kwargs)
    await client.connect()
    try:
        yield client
    finally:
        await asyncio.to_thread(client.close)
