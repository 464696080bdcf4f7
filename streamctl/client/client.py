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

Structure
---------
The client owns its thread, its loop and its connection (the workflow handle), and one
:class:`~streamctl.client.pump.Pump`, which owns the outbox and the task on that loop that
empties it (batches, retries, stats); the client makes each caller's message, queues it with
the pump and waits for its outcome. The outbox's items and their settlement are
:mod:`streamctl.client.outbox`'s; waiting for a query's state is
:mod:`streamctl.client.query_wait`'s.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
import time
from collections.abc import Coroutine, Iterable, Sequence
from typing import Any, TypeVar

from temporalio.client import WorkflowHandle

from streamctl import config
from streamctl.client.coordinator_errors import OutboxFull, RequestTimeout, unwrap
from streamctl.client.outbox import Outgoing, Waiter, expire, new_id
from streamctl.client.paging import PAGE_ROWS, first_page, next_page
from streamctl.client.pump import ClientStats, Pump, within
from streamctl.client.query_wait import SETTLED_STATES, wait_pushed
from streamctl.limits import MAX_EVENTS_PER_SIGNAL, MAX_REQUESTS_PER_UPDATE
from streamctl.protocol.coordinator_config import COORDINATOR_WORKFLOW_ID
from streamctl.protocol.messages import Envelope, Event, Request, Response
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
        self.request_timeout = request_timeout
        self.payload_keys = payload_keys

        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="streamctl-client", daemon=True
        )
        self._thread.start()
        self._handle: WorkflowHandle[Any, Any] | None = None
        """The coordinator workflow's, once connected (the pump gets it too)."""
        self._pump = Pump(
            self._loop,
            sender=sender or f"client-{new_id()}",
            max_outbox=max_outbox,
            max_requests_per_update=max_requests_per_update,
            max_update_bytes=max_update_bytes,
            max_inflight_updates=max_inflight_updates,
            max_events_per_signal=max_events_per_signal,
        )

    @property
    def sender(self) -> str:
        """The name this client's event batches carry."""
        return self._pump.sender

    @property
    def stats(self) -> ClientStats:
        """What the pump has sent, retried and had answered so far."""
        return self._pump.stats

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
        self._handle = temporal.get_workflow_handle(self.workflow_id)
        self._pump.start(self._handle, tuple(key_id(key) for key in keys))

    def close(self, timeout: float = 30.0) -> None:
        """Deliver what is queued (up to ``timeout``), then stop the background thread."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._pump.idle():
                break
            time.sleep(0.01)
        self._pump.close()
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
            item = self._pump.queue_request(envelope, budget, deadline, budget)
        except OutboxFull:
            raise _outbox_timeout(envelope, budget) from None
        future = item.future
        assert future is not None
        try:
            response = future.result(max(0.0, deadline - time.monotonic()))
        except concurrent.futures.TimeoutError:
            # Ours to settle now; if the answer won the race, result() returns it instead.
            expire([item])
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
                return self._pump.queue_request(envelope, 0, deadline, budget, waiter)
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
            max(0.0, item.deadline - time.monotonic()), expire, [item]
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
        # One nobody waits for gets no future: making one was a third of try_send's time.
        return self._pump.queue_event(event.to_envelope(new_id()), timeout, awaited=awaited)

    def flush_events(self, timeout: float = 60.0) -> None:
        """Block until every queued event has been accepted by the coordinator."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._pump.events_delivered():
                return
            time.sleep(0.005)
        raise TimeoutError("events still queued")

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
