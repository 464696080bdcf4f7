"""The coordinator's buffer of messages waiting for a pass
(:mod:`streamctl.workflows.message_buffer`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from temporalio.api.common.v1 import Payload

from streamctl.compact_json import dumps
from streamctl.limits import MAX_PASS_EVENT_BYTES
from streamctl.protocol.messages import Envelope
from streamctl.protocol.pass_io import PendingMessage
from streamctl.raw_payloads import JSON_ENCODING
from streamctl.workflows.message_buffer import MessageBuffer, envelope_size, within_bytes
from streamctl.workflows.state import CoordinatorState

pytestmark = pytest.mark.quick


def payload(ids: list[str]) -> Payload:
    envelopes = [{"id": i, "kind": "ListQueries", "body": {}} for i in ids]
    return Payload(metadata={"encoding": JSON_ENCODING}, data=dumps(envelopes).encode())


def heartbeat(event_id: str, name: str, count: int = 1) -> Envelope:
    return Envelope(event_id, "Heartbeat", {"name": name, "count": count})


def test_arrivals_are_numbered_across_requests_and_events_in_the_carried_state() -> None:
    state = CoordinatorState(arrivals=10)
    buffer = MessageBuffer(state)
    buffer.add_event(heartbeat("e1", "a"), now=1.0)
    batch = buffer.add_requests(["r1", "r2"], payload(["r1", "r2"]), now=2.0)
    buffer.add_event(Envelope("e2", "CheckLiveness", {}), now=3.0)
    assert [p.seq for p in state.pending] == [11, 13]
    assert batch.seq == 12 and batch.received_at == 2.0
    assert state.arrivals == 13
    assert buffer.pending_requests == 2
    assert buffer.oldest_arrival() == 1.0
    assert buffer.has_messages()


def test_events_of_one_entity_merge_in_the_older_ones_place() -> None:
    state = CoordinatorState()
    buffer = MessageBuffer(state)
    buffer.add_event(heartbeat("e1", "a"), now=1.0)
    buffer.add_event(heartbeat("e2", "b"), now=2.0)
    buffer.add_event(heartbeat("e3", "a", count=2), now=5.0)
    assert [p.envelope.id for p in state.pending] == ["e3", "e2"]
    merged = state.pending[0]
    assert (merged.received_at, merged.seq) == (1.0, 1)
    assert merged.envelope.body["count"] == 3
    assert merged.envelope.body["arrived_last"] == 5.0
    assert merged.size == envelope_size(merged.envelope)


def test_a_buffer_made_from_a_carried_state_merges_into_its_events() -> None:
    carried = [PendingMessage(heartbeat("e1", "a"), 1.0, 80, 4)]
    state = CoordinatorState(pending=carried, arrivals=4)
    buffer = MessageBuffer(state)
    buffer.add_event(heartbeat("e2", "a"), now=2.0)
    assert len(state.pending) == 1
    assert state.pending[0].envelope.body["count"] == 2


def test_a_pass_takes_whole_request_batches_within_its_size_and_bytes() -> None:
    buffer = MessageBuffer(CoordinatorState())
    first = buffer.add_requests(["a", "b", "c"], payload(["a", "b", "c"]), now=1.0)
    second = buffer.add_requests(["d", "e"], payload(["d", "e"]), now=2.0)
    third = buffer.add_requests(["f"], payload(["f"]), now=3.0)
    batches, events = buffer.take_pass(batch_size=4, max_batch_bytes=10**6, bounded_events=bool)
    assert batches == [first] and events == []
    batches, _ = buffer.take_pass(batch_size=3, max_batch_bytes=10**6, bounded_events=bool)
    assert batches == [second, third]
    # A batch larger than batch_size still goes, alone.
    big = buffer.add_requests(["g", "h"], payload(["g", "h"]), now=4.0)
    batches, _ = buffer.take_pass(batch_size=1, max_batch_bytes=1, bounded_events=bool)
    assert batches == [big]
    assert not buffer.request_batches


def test_a_pass_takes_events_within_its_bytes_only_in_a_bounded_run() -> None:
    asked: list[bool] = []

    def bounded() -> bool:
        asked.append(True)
        return True

    state = CoordinatorState()
    buffer = MessageBuffer(state)
    body = {"name": "x" * (MAX_PASS_EVENT_BYTES // 3)}
    for n in range(5):
        buffer.add_event(Envelope(f"e{n}", "Statistics", {**body, "query_id": n}), now=n)
    _, events = buffer.take_pass(batch_size=100, max_batch_bytes=1, bounded_events=bounded)
    assert [e.envelope.id for e in events] == ["e0", "e1"]
    assert sum(e.size for e in events) <= MAX_PASS_EVENT_BYTES
    assert asked == [True]
    _, events = buffer.take_pass(batch_size=100, max_batch_bytes=1, bounded_events=lambda: False)
    assert [e.envelope.id for e in events] == ["e2", "e3", "e4"]
    _, events = buffer.take_pass(batch_size=100, max_batch_bytes=1, bounded_events=bounded)
    assert events == [] and asked == [True]  # asked only when over the bound


def test_events_put_back_go_first_and_merge_again() -> None:
    state = CoordinatorState()
    buffer = MessageBuffer(state)
    buffer.add_event(heartbeat("e1", "a"), now=1.0)
    _, taken = buffer.take_pass(batch_size=10, max_batch_bytes=1, bounded_events=bool)
    buffer.add_event(heartbeat("e2", "b"), now=2.0)
    buffer.put_back(taken)
    assert [p.envelope.id for p in state.pending] == ["e1", "e2"]
    buffer.add_event(heartbeat("e3", "a"), now=3.0)
    assert [p.envelope.id for p in state.pending] == ["e3", "e2"]


def test_a_split_batch_is_answered_once_all_its_parts_are() -> None:
    buffer = MessageBuffer(CoordinatorState())
    batch = buffer.add_requests(["a", "b", "c"], payload(["a", "b", "c"]), now=1.0)
    left, right = batch.split()
    buffer.answer(left, dumps([{"id": "a"}]))
    assert batch.answer is None and buffer.pending_requests == 3
    buffer.answer(right, dumps([{"id": "b"}, {"id": "c"}]))
    assert batch.answer is not None and buffer.pending_requests == 0
    whole = buffer.add_requests(["d"], payload(["d"]), now=2.0)
    buffer.answer(whole, "[]")
    assert whole.answer == "[]" and buffer.pending_requests == 0


def test_full_counts_requests_or_events() -> None:
    buffer = MessageBuffer(CoordinatorState())
    assert not buffer.full(2)
    buffer.add_requests(["a", "b"], payload(["a", "b"]), now=1.0)
    assert buffer.full(2)
    other = MessageBuffer(CoordinatorState())
    other.add_event(heartbeat("e1", "a"), now=1.0)
    other.add_event(heartbeat("e2", "b"), now=1.0)
    assert other.full(2) and other.carried_bytes() > 0


@given(st.lists(st.integers(1, 1000), min_size=1, max_size=30), st.integers(0, 5000))
def test_within_bytes_takes_the_longest_prefix_that_fits_and_one_at_least(
    sizes: list[int], budget: int
) -> None:
    events = [PendingMessage(Envelope(f"e{i}", "X"), 0.0, size) for i, size in enumerate(sizes)]
    taken = within_bytes(events, budget)
    assert taken == events[: len(taken)] and taken
    if len(taken) > 1:
        assert sum(e.size for e in taken) <= budget
    if len(taken) < len(events):
        assert sum(e.size for e in events[: len(taken) + 1]) > budget
