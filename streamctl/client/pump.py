"""The client's pump: the half of :class:`~streamctl.client.client.CoordinatorClient` that runs on
the client's own loop. It takes batches from the outbox, sends requests as ``submit`` updates and
events as ``events`` signals, retries what Temporal turns away (:func:`_retryable`), reads the
answers and settles every message it carries (the protocol and guarantees are
:mod:`streamctl.client.client`'s)."""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import time
import zlib
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
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
    RequestTimeout,
    UndecodableAnswer,
)
from streamctl.client.outbox import Outgoing, new_id, settle
from streamctl.error_codes import asks_again
from streamctl.limits import MAX_EVENT_BATCH_BYTES
from streamctl.protocol import refusals
from streamctl.protocol.messages import EventBatch, Response, compaction_key
from streamctl.raw_payloads import JSON_ENCODING, json_payload
from streamctl.workflows.payload_crypto import PayloadKeyError, encrypted_with

log = logging.getLogger(__name__)

T = TypeVar("T")

RETRYABLE_REJECTIONS = refusals.RETRYABLE_REJECTIONS
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
    """The sending half of :class:`~streamctl.client.client.CoordinatorClient`, whose
    constructor sets the state declared here; every method but :meth:`_fail_queued` and
    :meth:`_expire` runs on the client's loop."""

    sender: str
    stats: ClientStats
    max_requests_per_update: int
    max_update_bytes: int
    max_inflight_updates: int
    max_events_per_signal: int
    _lock: threading.Lock
    _requests: deque[Outgoing]
    _events: deque[Outgoing]
    _unsent_events_by_key: dict[tuple[str, str], Outgoing]
    _inflight_updates: int
    _sending_events: bool
    _wake_scheduled: bool
    _closed: bool
    _broken: ClientFailure | None
    _held_keys: tuple[str, ...]
    _seq: Iterator[int]
    _wake: asyncio.Event | None
    _handle: WorkflowHandle[Any, Any] | None

    @staticmethod
    def _expire(items: Sequence[Outgoing]) -> None:
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

    def _fail_queued(self, error: Callable[[str], BaseException], reason: str) -> None:
        """Settle everything still in the outbox with ``error(reason)``."""
        with self._lock:
            leftovers = list(self._requests) + list(self._events)
            self._requests.clear()
            self._events.clear()
            self._unsent_events_by_key.clear()
        settle(leftovers, lambda _item: error(reason))

    def _set_wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

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
        self._inflight_updates = len(inflight)
        self._after_send()

    def _after_send(self, events_done: bool = False) -> None:
        if events_done:
            self._sending_events = False
        with self._lock:
            self._wake_scheduled = True
        self._set_wake()

    def _take(self, queue: deque[Outgoing], max_count: int, max_bytes: int) -> list[Outgoing]:
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

    async def _send_update(self, batch: list[Outgoing]) -> None:
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
            self._requests.extendleft(reversed(items))
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
        return isinstance(cause, ApplicationError) and cause.type in RETRYABLE_REJECTIONS
    if isinstance(error, RPCError):
        return error.status in RETRYABLE_STATUS
    return isinstance(error, asyncio.TimeoutError | ConnectionError)
