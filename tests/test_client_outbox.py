"""The client's bounded outbox on its own (no coordinator): room, refusal, and closing.

A client that is never connected keeps everything queued, which makes the outbox's accounting
observable: each message holds one slot until it gets its outcome, merged events included.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamctl.client.client import CoordinatorClient
from streamctl.client.coordinator_errors import ClientClosed, OutboxFull
from streamctl.client.outbox import settle
from streamctl.error_codes import ErrorCode
from streamctl.protocol import messages as m

pytestmark = pytest.mark.quick


def test_a_full_event_outbox_refuses_then_frees_its_room_on_close():
    client = CoordinatorClient(max_outbox=2)
    client.try_send(m.RegisterWorker("a"))
    client.try_send(m.RegisterWorker("b"))
    with pytest.raises(OutboxFull):
        client.try_send(m.RegisterWorker("c"))
    with pytest.raises(TimeoutError):
        client.send_timeout(m.RegisterWorker("c"), 0.05)
    client.close(timeout=0)
    with pytest.raises(ClientClosed):
        client.try_send(m.RegisterWorker("d"))


def test_merged_heartbeats_each_hold_a_slot_and_all_resolve_on_close():
    client = CoordinatorClient(max_outbox=3)
    futures = [client._enqueue_awaited_event(m.Heartbeat("a"), 0) for _ in range(3)]
    with pytest.raises(OutboxFull):
        client.try_send(m.Heartbeat("a"))
    client.close(timeout=0)
    for future in futures:
        assert isinstance(future.exception(timeout=1), ClientClosed)


SENDS = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.booleans(), st.sampled_from(["beat", "reg"])),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(capacity=st.integers(1, 8), sends=SENDS)
def test_events_with_and_without_waiting_callers_each_hold_a_slot_until_settled(
    capacity: int, sends: list[tuple[str, bool, str]]
) -> None:
    """Mixed ``try_send`` (no future) and awaited events, merged or not: the outbox refuses
    exactly when ``capacity`` events are held, and settling what is queued frees every slot,
    resolves every awaited future and counts every event."""
    client = CoordinatorClient(max_outbox=capacity)
    held = 0
    futures = []
    for worker, awaited, kind in sends:
        event = m.Heartbeat(worker) if kind == "beat" else m.RegisterWorker(worker)
        try:
            if awaited:
                futures.append(client._enqueue_awaited_event(event, 0))
            else:
                client.try_send(event)
        except OutboxFull:
            assert held == capacity
            continue
        held += 1
    queued = list(client._pump.events)
    assert sum(item.merged + 1 for item in queued) == held
    assert sum(len(item.followers) + (item.future is not None) for item in queued) == len(futures)
    settle(queued, lambda _item: None)
    assert all(future.result(timeout=0) is None for future in futures)
    for _ in range(capacity):
        assert client._pump.event_slots.take(0)
    assert not client._pump.event_slots.take(0)
    client.close(timeout=0)


async def test_asyncio_callers_wait_for_room_and_learn_when_the_client_closes():
    client = CoordinatorClient(max_outbox=1)
    first = asyncio.create_task(client.ask_response(m.GetSink("x")))
    second = asyncio.create_task(client.ask_response(m.GetSink("y")))
    await asyncio.sleep(0.05)
    assert not first.done() and not second.done()  # the second waits for room
    closer = threading.Thread(target=client.close, kwargs={"timeout": 0})
    closer.start()
    with pytest.raises(ClientClosed):
        await first
    closer.join()
    with pytest.raises(ClientClosed):
        await second  # got room after the first was settled, then found the client closed


async def test_an_oversized_request_is_answered_at_once_without_using_the_outbox():
    client = CoordinatorClient(max_outbox=1)
    try:
        config = {"blob": "x" * 300_000}
        response = await client.ask_response(m.CreateSink("big", (), "Print", config))
        assert response.error_code == ErrorCode.TOO_LARGE and "bytes" in (
            response.error_message or ""
        )
        blocking = await asyncio.to_thread(
            client.ask_response_blocking, m.CreateSink("big", (), "Print", config)
        )
        assert blocking.error_code == ErrorCode.TOO_LARGE
    finally:
        client.close(timeout=0)
