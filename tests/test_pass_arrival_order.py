"""A pass applies a stage's messages in the order they arrived, events and requests alike.

The workflow numbers each message as it takes it in (``PendingMessage.seq``,
``PassInput.request_batch_seqs``). Messages one workflow task takes in share an arrival time,
so the number is what orders them: a client that sends ``RegisterWorker`` and then asks
``GetWorker`` must find the worker. Before the numbers, a tie went to the requests, and the
answer was NOT_FOUND.

The reference is the agent lifecycle as DESIGN states it, applied in arrival order: no worker
until one registers, ALIVE after a registration, UNREGISTERED after the agent says goodbye.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamctl.activities.pass_activity import CatalogWork
from streamctl.client.outbox import new_id
from streamctl.protocol import messages as m
from streamctl.protocol.pass_io import PassInput, PendingMessage, request_batches_json

pytestmark = pytest.mark.quick

ARRIVED = 1000.0

operations = st.lists(st.sampled_from(["register", "unregister", "get"]), min_size=1, max_size=12)


def _answers_in_arrival_order(
    catalog_url: str, worker: str, ops: list[str], times: list[float]
) -> list[dict[str, Any]]:
    """One pass over ``ops`` (each arriving in that order, at ``times``), each request in a
    batch of its own; the answers to the gets, in order."""
    events: list[PendingMessage] = []
    batches: list[list[m.Envelope]] = []
    arrivals: list[float] = []
    seqs: list[int] = []
    for seq, (op, at) in enumerate(zip(ops, times, strict=True), start=1):
        if op == "get":
            batches.append([m.GetWorker(worker).to_envelope(new_id())])
            arrivals.append(at)
            seqs.append(seq)
            continue
        event = m.RegisterWorker(worker) if op == "register" else m.UnregisterWorker(worker)
        events.append(PendingMessage(event.to_envelope(f"e-{new_id()}"), at, 0, seq))
    result = CatalogWork(catalog_url).apply_pass(
        PassInput(
            f"order-{new_id()}",
            1,
            ARRIVED + 1,
            events,
            arrivals,
            30.0,
            60.0,
            request_batch_seqs=seqs,
        ),
        request_batches_json(batches),
    )
    return [json.loads(answer)[0] for answer in result.responses]


def _expected(ops: list[str]) -> list[str]:
    """What each get finds, by the lifecycle applied in arrival order."""
    state: str | None = None
    found: list[str] = []
    for op in ops:
        if op == "register":
            state = "ALIVE"
        elif op == "unregister" and state is not None:
            state = "UNREGISTERED"
        elif op == "get":
            found.append(state or "NOT_FOUND")
    return found


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=operations, data=st.data())
def test_events_and_requests_apply_in_arrival_order(catalog_url, ops, data):
    # Arrival times never decrease with the numbers, and mostly tie (one workflow task).
    steps = data.draw(st.lists(st.sampled_from([0.0, 0.0, 0.0, 0.5]), min_size=len(ops)))
    times = [ARRIVED + sum(steps[: i + 1]) for i in range(len(ops))]
    answers = _answers_in_arrival_order(catalog_url, "w_" + new_id().replace("-", "_"), ops, times)
    found = [a["result"]["state"] if a["ok"] else a["error_code"] for a in answers]
    assert found == _expected(ops)


def test_a_registration_sent_before_a_get_in_one_workflow_task_is_found(sqlite_url):
    [answer] = _answers_in_arrival_order(sqlite_url, "w1", ["register", "get"], [ARRIVED, ARRIVED])
    assert answer["ok"], answer
    assert answer["result"]["state"] == "ALIVE"
