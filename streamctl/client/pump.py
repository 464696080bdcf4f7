"""The client's pump: the outbox of a :class:`~streamctl.client.client.CoordinatorClient` and
the task on the client's own loop that empties it.

Protocol
--------
Callers on any thread queue messages (:meth:`Pump.queue_request`, :meth:`Pump.queue_event`),
each holding one slot of its half of the bounded outbox until it is settled; an event with the
same compaction key as an unsent one folds into it. Queueing wakes the pump's task, which takes
batches (bounded in count and bytes) and sends requests as ``submit`` updates (at most
``max_inflight_updates`` at once) and events as ``events`` signals (one at a time, numbered by
``seq`` per sender), retries what Temporal turns away (:func:`_retryable`) with backoff, reads
the answers and settles every message it carries.

Guarantees
----------
* Every message queued is settled exactly once (:func:`~streamctl.client.outbox.settle`): by
  its answer, by its deadline's
  :class:`~streamctl.client.coordinator_errors.RequestTimeout`, or by a typed error; whatever goes
  wrong in a send reaches the callers of its batch.
* A request whose deadline passed or whose caller gave up is never sent; a retry of an update
  reuses its update id and its requests' ids, so nothing is applied twice. An answer asking
  again (:data:`~streamctl.error_codes.ASK_AGAIN`) queues its request again, first in line.
* An event batch is retried under its ``seq`` until accepted, or refused for good.
* A pump that died fails what is queued with its cause and refuses new messages with it.

The client's guarantees as its callers see them are :mod:`streamctl.client.client`'s.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import math
import random
import threading
import time
import zlib
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
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

from streamctl.client.coordinator_errors import (
    ClientClosed,
    ClientFailure,
    CoordinatorUnavailable,
    MissingPayloadKey,
    OutboxFull,
    TooLarge,
    UndecodableAnswer,
)
from streamctl.client.outbox import Outgoing, Slots, Waiter, expire, new_id, settle
from streamctl.compact_json import dumps_bytes
from streamctl.error_codes import ErrorCode, asks_again
from streamctl.limits import MAX_EVENT_BATCH_BYTES, MAX_REQUEST_BYTES
from streamctl.protocol import refusals
from streamctl.protocol.messages import (
    Envelope,
    EventBatch,
    Response,
    compaction_key,
    merge_events,
)
from streamctl.raw_payloads import JSON_ENCODING, json_payload
from streamctl.workflows.payload_crypto import PayloadKeyError, encrypted_with

log = logging.getLogger(__name__)

T = TypeVar("T")

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


async def within(call: Awaitable[T], timeout: float) -> T:
    """``call`` (a Temporal client call) in the current task, bounded by ``timeout`` seconds.

    Not :func:`asyncio.wait_for`: that runs the call in a task of its own, and Temporal's
    client turns a cancellation into ``WorkflowUpdateRPCTimeoutOrCancelledError``; when the
    caller is cancelled (the client closes, a waiter gives up), wait_for cancels that task
    and never reads the error it ends with, and asyncio reports "Task exception was never
    retrieved" when the task is collected. Here a timeout raises what the call raised on
    being cancelled (or TimeoutError), and a cancellation of the caller stays a
    cancellation."""
    task = asyncio.current_task()
    cancels_before = task.cancelling() if task is not None else 0
    try:
        async with asyncio.timeout(timeout):
            return await call
    except asyncio.CancelledError:
        raise
    except Exception as error:
        if task is not None and task.cancelling() > cancels_before:  # cancelled, not timed out
            raise asyncio.CancelledError from error
        raise


@dataclass
class ClientStats:
    updates_sent: int = 0
    update_retries: int = 0
    signals_sent: int = 0
    signal_retries: int = 0
    requests_answered: int = 0
    requests_asked_again: int = 0
    events_delivered: int = 0


class Pump:
    """The client's outbox and the task that empties it, on the client's loop.

    Callers on any thread queue messages with :meth:`queue_request` and :meth:`queue_event`;
    the pump's task (started by :meth:`start`) sends them and settles each. Its state is its
    own: the two queues and their room, the unsent events by compaction key, the sends in
    flight, the event batches' numbers, its stats, whether it was closed or died.
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        *,
        sender: str,
        max_outbox: int,
        max_requests_per_update: int,
        max_update_bytes: int,
        max_inflight_updates: int,
        max_events_per_signal: int,
    ) -> None:
        self.sender = sender
        """The name the event batches carry; the workflow numbers their ``seq`` per sender."""
        self.max_requests_per_update = max_requests_per_update
        self.max_update_bytes = max_update_bytes
        self.max_inflight_updates = max_inflight_updates
        self.max_events_per_signal = max_events_per_signal
        self.stats = ClientStats()
        self.request_slots = Slots(max_outbox)
        self.event_slots = Slots(max_outbox)
        self.requests: deque[Outgoing] = deque()
        """Requests waiting to be sent, oldest first (asked again: first in line)."""
        self.events: deque[Outgoing] = deque()
        """Events waiting to be sent, oldest first."""
        self.inflight_updates = 0
        """``submit`` updates under way (at most ``max_inflight_updates``)."""
        self._loop = loop
        """The client's loop: the pump's task runs there, and queueing wakes it there."""
        self._lock = threading.Lock()
        """Guards the queues, ``_unsent_events_by_key`` and ``_wake_scheduled``: callers queue
        from any thread while the pump takes on its loop."""
        self._unsent_events_by_key: dict[tuple[str, str], Outgoing] = {}
        self._sending_events = False
        self._wake_scheduled = False
        """A wake-up of the pump is on its way: queueing more needs no other."""
        self._closed = False
        self._broken: ClientFailure | None = None
        """Set when the pump died: queued messages failed with it, new ones are refused."""
        self._held_keys: tuple[str, ...] = ()
        """The ids of the payload keys the client decrypts with, for :class:`MissingPayloadKey`."""
        self._seq = itertools.count(1)
        self._wake: asyncio.Event | None = None
        self._handle: WorkflowHandle[Any, Any] | None = None
        self._task: asyncio.Task[None] | None = None
        """The pump's task, held here because the loop holds its tasks only weakly."""

    # --- on the client's loop: starting ----------------------------------------------------

    def start(self, handle: WorkflowHandle[Any, Any], held_keys: tuple[str, ...]) -> None:
        """Start sending to the workflow of ``handle`` (on the client's loop, once connected);
        ``held_keys`` are the ids of the payload keys the client decrypts with."""
        self._held_keys = held_keys
        self._handle = handle
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())
        self._task.add_done_callback(self._after_run)

    # --- from any thread: queueing, and what is left ----------------------------------------

    def queue_request(
        self,
        envelope: Envelope,
        timeout: float | None,
        deadline: float,
        budget: float,
        waiter: Waiter | None = None,
    ) -> Outgoing:
        """Queue a request until ``deadline`` (see :meth:`_queue`)."""
        return self._queue(
            envelope, self.request_slots, self.requests, timeout, deadline, budget, waiter
        )

    def queue_event(self, envelope: Envelope, timeout: float | None, *, awaited: bool) -> Outgoing:
        """Queue an event (see :meth:`_queue`); it has no deadline: it is retried until
        accepted."""
        return self._queue(
            envelope,
            self.event_slots,
            self.events,
            timeout,
            math.inf,
            math.inf,
            awaited=awaited,
        )

    def idle(self) -> bool:
        """Whether nothing is queued and no update is under way."""
        with self._lock:
            return not self.requests and not self.events and self.inflight_updates == 0

    def events_delivered(self) -> bool:
        """Whether every queued event has been accepted by the coordinator."""
        with self._lock:
            return not self.events and not self._sending_events

    def close(self) -> None:
        """Refuse new messages and fail what is still queued with :class:`ClientClosed`; sends
        under way end when the client cancels the tasks on its loop."""
        self._closed = True
        self._fail_queued(ClientClosed, "client closed before delivery")

    def _queue(
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
            if queue is not self.requests:
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
            if queue is self.events and self._merge_unsent_event(item):
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

    def _fail_queued(self, error: Callable[[str], BaseException], reason: str) -> None:
        """Settle everything still in the outbox with ``error(reason)``."""
        with self._lock:
            leftovers = list(self.requests) + list(self.events)
            self.requests.clear()
            self.events.clear()
            self._unsent_events_by_key.clear()
        settle(leftovers, lambda _item: error(reason))

    def _set_wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    # --- on the client's loop: sending ------------------------------------------------------

    async def _run(self) -> None:
        assert self._wake is not None
        inflight: set[asyncio.Task[None]] = set()
        event_task: asyncio.Task[None] | None = None
        while True:
            await self._wake.wait()
            self._wake.clear()
            with self._lock:
                self._wake_scheduled = False
            while len(inflight) < self.max_inflight_updates:
                batch = self.take(
                    self.requests, self.max_requests_per_update, self.max_update_bytes
                )
                if not batch:
                    break
                task = asyncio.create_task(self._carrying(batch, self._send_update))
                inflight.add(task)
                task.add_done_callback(lambda t: self._after_update(inflight, t))
            if event_task is None or event_task.done():
                batch = self.take(
                    self.events,
                    self.max_events_per_signal,
                    # Half the workflow's bound: it measures events by repr, not JSON.
                    min(4 * self.max_update_bytes, MAX_EVENT_BATCH_BYTES // 2),
                )
                if batch:
                    self._sending_events = True
                    event_task = asyncio.create_task(self._carrying(batch, self._send_events))
                    event_task.add_done_callback(lambda _t: self._after_send(events_done=True))
            self.inflight_updates = len(inflight)

    def _after_run(self, task: asyncio.Task[None]) -> None:
        """The pump ends only when the client cancels it on closing; if it died, nothing
        queued would ever move, so everything queued fails with the cause and new messages
        are refused with it."""
        if task.cancelled():
            return
        error = task.exception()
        if error is None:
            return
        log.error("the client's pump failed; failing every queued message", exc_info=error)
        self._broken = ClientFailure(f"the client's pump failed: {type(error).__name__}: {error}")
        self._fail_queued(ClientFailure, str(self._broken))

    async def _carrying(
        self,
        batch: list[Outgoing],
        send: Callable[[list[Outgoing]], Coroutine[Any, Any, None]],
    ) -> None:
        """``send(batch)``, so that whatever it raises reaches the batch's callers."""
        try:
            await send(batch)
        except asyncio.CancelledError:
            settle(batch, lambda _item: ClientClosed("client closed while sending"))
            raise
        except Exception as error:
            log.exception("sending %d messages failed inside the client", len(batch))
            reason = f"the client failed while sending: {type(error).__name__}: {error}"
            settle(batch, lambda _item: ClientFailure(reason))

    def _after_update(self, inflight: set[asyncio.Task[None]], task: asyncio.Task[None]) -> None:
        inflight.discard(task)
        self.inflight_updates = len(inflight)
        self._after_send()

    def _after_send(self, events_done: bool = False) -> None:
        if events_done:
            self._sending_events = False
        with self._lock:
            self._wake_scheduled = True
        self._set_wake()

    def take(self, queue: deque[Outgoing], max_count: int, max_bytes: int) -> list[Outgoing]:
        """The next batch from ``queue``; requests whose callers gave up or whose deadline
        passed are dropped unsent (expired ones get their timeout here)."""
        batch: list[Outgoing] = []
        expired: list[Outgoing] = []
        total = 0
        now = time.monotonic()
        with self._lock:
            while queue and len(batch) < max_count:
                if batch and total + len(queue[0].wire) > max_bytes:
                    break
                item = queue.popleft()
                key = compaction_key(item.envelope) if queue is self.events else None
                if key is not None and self._unsent_events_by_key.get(key) is item:
                    del self._unsent_events_by_key[key]
                if item.settled:
                    continue
                if item.deadline <= now:
                    expired.append(item)
                    continue
                total += len(item.wire)
                batch.append(item)
        expire(expired)
        return batch

    async def _send_update(self, batch: list[Outgoing]) -> None:
        assert self._handle is not None
        delay = 0.05
        # One update id for every attempt: a retry that reaches the same run attaches to the
        # update already accepted instead of running the handler again.
        update_id = f"u-{new_id()}"
        while True:
            now = time.monotonic()
            expire([item for item in batch if item.deadline <= now])
            batch = [item for item in batch if not item.settled]  # answered, or given up
            if not batch:
                return
            try:
                # Bounded by the batch's last deadline: with no worker polling, an update
                # waits for its answer indefinitely.
                answer: RawValue = await within(
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
                    settle(batch, _failing_with(undecodable))
                    return
                if not _retryable(error) or self._closed:
                    settle(batch, _unavailable(f"request batch failed: {error}"))
                    return
                self.stats.update_retries += 1
                for item in batch:
                    item.last_error = str(error) or type(error).__name__
                log.debug("retrying %d requests after %s", len(batch), error)
                await asyncio.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 2.0)
        try:
            responses = self._read_answer(answer)
        except UndecodableAnswer as error:
            log.warning("%s", error)
            settle(batch, _failing_with(error))
            return
        outcomes = pair_answers([item.envelope.id for item in batch], responses)
        by_item = {id(item): outcome for item, outcome in zip(batch, outcomes, strict=True)}
        again = [item for item in batch if _asks_again(by_item[id(item)])]
        if again:
            self._ask_again(again)
            asked = {id(item) for item in again}
            batch = [item for item in batch if id(item) not in asked]
        settle(batch, lambda item: by_item[id(item)])
        self.stats.requests_answered += len(batch)

    def _ask_again(self, items: list[Outgoing]) -> None:
        """Queue ``items`` again, first in line, under their ids: requests their pass could
        not answer now (:data:`~streamctl.error_codes.ASK_AGAIN`: a result that did not fit,
        a request it had no time for); their callers' deadlines still bound them."""
        if self._closed or self._broken is not None:
            reason = str(self._broken) if self._broken is not None else "client closed"
            settle(items, lambda _item: ClientClosed(reason))
            return
        self.stats.requests_asked_again += len(items)
        for item in items:
            item.last_error = "its pass could not answer it then (asked again)"
        with self._lock:
            self.requests.extendleft(reversed(items))
        self._after_send()

    def _undecodable(self, error: Exception) -> UndecodableAnswer:
        """The typed error for a payload the data converter could not decode."""
        if isinstance(error, PayloadKeyError) and error.key_id is not None:
            return MissingPayloadKey(error.key_id, self._held_keys)
        return UndecodableAnswer(f"{type(error).__name__}: {error}")

    def _read_answer(self, answer: RawValue) -> list[Response]:
        """The responses of a ``submit`` answer, in the batch's order; :class:`UndecodableAnswer`
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
            return [Response(**plain) for plain in orjson.loads(payload.data)]
        except (ValueError, TypeError, KeyError) as error:
            raise UndecodableAnswer(
                f"it is not a list of responses ({type(error).__name__}: {error})"
            ) from None

    async def _send_events(self, batch: list[Outgoing]) -> None:
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
                    settle(batch, lambda _item: ClientClosed("client closed"))
                    return
                if not _retryable(error):
                    # Retrying what can never be accepted would hang every sender waiting.
                    log.warning("dropping event batch %d: %s", seq, error)
                    settle(batch, _unavailable(f"event batch refused: {error}"))
                    return
                self.stats.signal_retries += 1
                log.debug("retrying event batch %d after %s", seq, error)
                await asyncio.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 2.0)
        settle(batch, lambda _item: None)
        self.stats.events_delivered += sum(item.merged + 1 for item in batch)


def pair_answers(
    ids: Sequence[str], responses: Sequence[Response]
) -> list[Response | UndecodableAnswer]:
    """Each request's answer, for the requests of one ``submit`` update (their ids in order):
    by position, as the pass writes them, where the answer's ids match the requests' in
    order; otherwise by id. By position, two requests under one id in one update get an
    answer each (the first its own, the second ``ID_REUSED``), not both the last one."""
    if len(responses) == len(ids) and all(
        response.id == request_id for response, request_id in zip(responses, ids, strict=True)
    ):
        return list(responses)
    by_id = {response.id: response for response in responses}
    return [
        by_id.get(request_id) or UndecodableAnswer(f"the answer lacks request {request_id}")
        for request_id in ids
    ]


def _asks_again(outcome: Response | UndecodableAnswer) -> bool:
    """Whether an answer stands in for one its pass could not give now (:data:`ASK_AGAIN`)."""
    return (
        isinstance(outcome, Response)
        and not outcome.ok
        and asks_again(outcome.error_code, outcome.error_message)
    )


def _failing_with(error: UndecodableAnswer) -> Callable[[Outgoing], BaseException]:
    """For :func:`settle`: a fresh error of the same kind and cause per message (one
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


def _unavailable(reason: str) -> Callable[[Outgoing], BaseException]:
    """For :func:`settle`: a fresh :class:`CoordinatorUnavailable` per message."""
    return lambda _item: CoordinatorUnavailable(reason)


def _retryable(error: BaseException) -> bool:
    if isinstance(error, WorkflowUpdateRPCTimeoutOrCancelledError):
        return True
    if isinstance(error, WorkflowUpdateFailedError):
        cause = error.cause
        return isinstance(cause, ApplicationError) and cause.type in refusals.RETRYABLE_REJECTIONS
    if isinstance(error, RPCError):
        return error.status in RETRYABLE_STATUS
    return isinstance(error, asyncio.TimeoutError | ConnectionError)
