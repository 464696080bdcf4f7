"""What waits in a coordinator run for a pass: request batches and events, in arrival order.

Protocol
--------
* Request batches (one ``submit`` update's requests, raw: :class:`.RequestBatch`) wait in the
  run only; events wait in the carried state (``CoordinatorState.pending``), which the buffer
  works on in place. Each message takes the next arrival number (``CoordinatorState.arrivals``)
  as it arrives: a pass applies a stage's messages by that number, so an event a client sent
  before a request is applied first even when one workflow task took in both.
* Events of the same kind and entity compact (:func:`~streamctl.protocol.messages.
  compaction_key`: the latest statistics per query, heartbeats adding their counts): the merged
  event keeps the older one's place, arrival time and number, so it never delays its batch, and
  the buffer is bounded by entities, not by rate.
* A pass takes (:meth:`MessageBuffer.take_pass`) whole request batches up to ``batch_size``
  requests and ``max_batch_bytes`` bytes (always at least one) and up to ``batch_size`` events;
  with :data:`~streamctl.workflows.patches.BOUNDED_PASS_EVENTS`, events only up to
  :data:`~streamctl.limits.MAX_PASS_EVENT_BYTES` (one at least). Events a pass hands back
  (``PassResult.events_not_applied``) go back to the front, in their order
  (:meth:`MessageBuffer.put_back`).

Guarantees
----------
Every request batch is answered exactly once (:meth:`MessageBuffer.answer`; a batch split to
find a failing request answers once all its parts have), and ``pending_requests`` counts the
requests not answered yet. Deterministic: sizes are estimates from the envelopes, times are
handed in.
"""

from __future__ import annotations

from collections.abc import Callable

from temporalio.api.common.v1 import Payload

from streamctl import limits
from streamctl.protocol.messages import Envelope, compaction_key, merge_events
from streamctl.protocol.pass_io import PendingMessage
from streamctl.workflows.request_batches import RequestBatch
from streamctl.workflows.state import CoordinatorState


def envelope_size(envelope: Envelope) -> int:
    """About how many bytes an event takes (in a pass's input and in the carried state)."""
    body = envelope.body
    return 64 + len(envelope.id) + (len(repr(body)) if isinstance(body, dict) else 0)


def within_bytes(events: list[PendingMessage], budget: int) -> list[PendingMessage]:
    """The first of ``events`` whose sizes add up to at most ``budget`` (one at least)."""
    total = 0
    for count, event in enumerate(events):
        total += event.size
        if count and total > budget:
            return events[:count]
    return events


class MessageBuffer:
    """Request batches and events waiting for a pass."""

    def __init__(self, state: CoordinatorState) -> None:
        self._state = state
        self.request_batches: list[RequestBatch] = []
        self.pending_requests = 0
        """Requests accepted and not answered yet (in batches waiting or in a pass)."""
        self._compaction_index: dict[tuple[str, str], int] = {}
        self._reindex()

    @property
    def events(self) -> list[PendingMessage]:
        """The events waiting (the carried state's ``pending``)."""
        return self._state.pending

    def next_arrival(self) -> int:
        """The next arrival number (``CoordinatorState.arrivals``). Replay-safe: it rides only
        in activity inputs and the carried state, never in a command."""
        self._state.arrivals += 1
        return self._state.arrivals

    def add_requests(self, ids: list[str], payload: Payload, now: float) -> RequestBatch:
        """Take in one ``submit`` update's requests."""
        batch = RequestBatch(ids, payload, now, self.next_arrival())
        self.request_batches.append(batch)
        self.pending_requests += len(ids)
        return batch

    def add_event(self, envelope: Envelope, now: float) -> None:
        """Take in one event arrived at ``now``, merged into a pending one of its entity if
        there is one."""
        pending = self._state.pending
        key = compaction_key(envelope)
        if key is not None and key in self._compaction_index:
            index = self._compaction_index[key]
            older = pending[index]
            # Replay-safe: this changes only the merged body (an activity's input), no command.
            merged = merge_events(older.envelope, envelope, now)
            if merged is not None:
                # Keeps the older arrival time: a merged event must not delay its batch. A
                # heartbeat carries its newest arrival inside, which liveness counts from.
                pending[index] = PendingMessage(
                    merged, older.received_at, envelope_size(merged), older.seq
                )
                return
        if key is not None:
            self._compaction_index[key] = len(pending)
        pending.append(PendingMessage(envelope, now, envelope_size(envelope), self.next_arrival()))

    def has_messages(self) -> bool:
        return bool(self._state.pending or self.request_batches)

    def full(self, batch_size: int) -> bool:
        """Whether ``batch_size`` requests or events are pending."""
        return self.pending_requests >= batch_size or len(self._state.pending) >= batch_size

    def oldest_arrival(self) -> float:
        """When the oldest message waiting arrived (some must wait)."""
        arrivals = [p.received_at for p in self._state.pending[:1]]
        arrivals += [b.received_at for b in self.request_batches[:1]]
        return min(arrivals)

    def carried_bytes(self) -> int:
        """About how large the pending events are that continue-as-new would carry."""
        return sum(pending.size for pending in self._state.pending)

    def take_pass(
        self, batch_size: int, max_batch_bytes: int, bounded_events: Callable[[], bool]
    ) -> tuple[list[RequestBatch], list[PendingMessage]]:
        """The messages of the next pass, out of the buffer. ``bounded_events``: whether the run
        bounds a pass's events in bytes (its patch), asked only when they exceed the bound."""
        request_batches: list[RequestBatch] = []
        requests = 0
        request_bytes = 0
        for batch in self.request_batches:
            if request_batches and (
                requests + len(batch.ids) > batch_size
                or request_bytes + len(batch.payload.data) > max_batch_bytes
            ):
                break
            request_batches.append(batch)
            requests += len(batch.ids)
            request_bytes += len(batch.payload.data)
        del self.request_batches[: len(request_batches)]
        pending = self._state.pending
        events = pending[:batch_size]
        budget = limits.MAX_PASS_EVENT_BYTES
        if sum(e.size for e in events) > budget and bounded_events():
            events = within_bytes(events, budget)
        del pending[: len(events)]
        self._reindex()
        return request_batches, events

    def put_back(self, events: list[PendingMessage]) -> None:
        """Events a pass did not apply, back to the front of the buffer in their order."""
        self._state.pending[:0] = events
        self._reindex()

    def answer(self, batch: RequestBatch, answer: str) -> None:
        """Answer a request batch (or a part of one split to find a failing request: the whole
        answers once all its parts do)."""
        if batch.whole is None:
            batch.answer = answer
            self.pending_requests -= len(batch.ids)
            return
        whole = batch.whole.part_answered(batch, answer)
        if whole is not None:
            self.pending_requests -= len(whole.ids)

    def _reindex(self) -> None:
        self._compaction_index = {}
        for index, pending in enumerate(self._state.pending):
            key = compaction_key(pending.envelope)
            if key is not None:
                self._compaction_index[key] = index
