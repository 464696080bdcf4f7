"""Clients always return (issue 16, item 6; measurement 4).

Every ``ask``, ``ask_blocking`` and ``ask_many`` ends by its deadline with
:class:`~streamctl.client.coordinator_errors.RequestTimeout` when nothing answers: a client that
never
connected, a full outbox, a coordinator workflow that no worker polls. An answer the client
cannot decode (encrypted with a payload key it lacks, compressed by a codec it lacks) raises a
typed error at once, and a failure inside the client's background tasks reaches the caller.

Each test fails on f29f918, whose client checked the deadline only when an attempt raised and
lost the decoding error in a task nobody awaited: there the calls are still waiting when the
test's guard (:func:`outcome_of`) gives up, and the test says so. The behaviour is asserted
before any new error type is looked up, so the tests fail on behaviour there, not on imports.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import gc
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from conftest import DevServer, coordinator_worker, wait_until
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from temporalio.client import Client

import streamctl.client.client as client_module
import streamctl.client.pump as pump_module
from streamctl.client import coordinator_errors as errors
from streamctl.client.client import CoordinatorClient
from streamctl.client.query_wait import LAST_LOOK_S, QueryWaitTimeout
from streamctl.protocol import messages as m
from streamctl.worker.coordinator_worker import ensure_coordinator
from streamctl.workflows.payload_crypto import key_id
from streamctl.workflows.wire import connect

HUNG = "still waiting"
NO_SHRINKING = (Phase.explicit, Phase.reuse, Phase.generate)
"""The property tests' failure is a call that hangs until the guard: shrinking would repeat
such hangs for minutes, and the failing example is reported as found."""
SLACK_S = 1.0
"""How long after its deadline a call may take to return (scheduling on 2 busy cores)."""
STACK_KEY = base64.b64encode(b"s" * 32).decode()
OTHER_KEY = base64.b64encode(b"c" * 32).decode()
COLUMNS = (m.ColumnSpec("id", "UINT64", False), m.ColumnSpec("v", "INT64", False))


async def outcome_of(call: Awaitable[Any], guard: float) -> tuple[Any, float]:
    """What ``call`` returned or raised and after how many seconds; :data:`HUNG` if it was
    still waiting after ``guard`` seconds (then it is cancelled)."""
    started = time.monotonic()
    task = asyncio.ensure_future(call)
    done, _ = await asyncio.wait({task}, timeout=guard)
    elapsed = time.monotonic() - started
    if not done:
        task.cancel()
        return HUNG, elapsed
    return (task.exception() or task.result()), elapsed


def blocking_outcome_of(call: Callable[[], Any], guard: float) -> tuple[Any, float]:
    """:func:`outcome_of` for a blocking call, run in a daemon thread (one that hangs must
    not keep the test process alive)."""
    result: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def run() -> None:
        try:
            result.set_result(call())
        except BaseException as error:
            result.set_result(error)

    started = time.monotonic()
    threading.Thread(target=run, daemon=True).start()
    try:
        outcome = result.result(guard)
    except concurrent.futures.TimeoutError:
        outcome = HUNG
    return outcome, time.monotonic() - started


def assert_timed_out(outcome: Any, elapsed: float, budget: float) -> None:
    assert outcome is not HUNG, f"still waiting {elapsed:.1f}s after a {budget}s deadline"
    assert isinstance(outcome, errors.RequestTimeout), repr(outcome)
    assert isinstance(outcome, TimeoutError)  # callers catching the builtin see it too
    assert budget - 0.05 <= elapsed <= budget + SLACK_S, (elapsed, budget)


# --- without any coordinator: the deadline alone ---------------------------------------------

ASK_KINDS = ("ask", "ask_response", "ask_many", "ask_blocking", "ask_blocking_shorter", "full")


async def _ask_async(client: CoordinatorClient, kind: str, count: int) -> Any:
    if kind == "ask":
        return await client.ask(m.GetSink("s"))
    if kind == "ask_response":
        return await client.ask_response(m.GetSink("s"))
    if kind == "ask_many":
        return await client.ask_many([m.GetSink(f"s{i}") for i in range(count)])
    # "full": the outbox holds one request; the next waits for room, then for its answer.
    first = asyncio.ensure_future(client.ask(m.GetSink("first")))
    try:
        return await client.ask(m.GetSink("second"))
    finally:
        await asyncio.gather(first, return_exceptions=True)


@settings(max_examples=24, deadline=None, phases=NO_SHRINKING)
@given(
    timeout=st.floats(min_value=0.02, max_value=0.3),
    kind=st.sampled_from(ASK_KINDS),
    count=st.integers(min_value=1, max_value=4),
)
def test_every_ask_of_a_client_nobody_answers_ends_at_its_deadline(
    timeout: float, kind: str, count: int
) -> None:
    """A client that never connected answers nothing: each kind of ask ends with
    RequestTimeout at its deadline (on f29f918 every one of them waits forever)."""
    client = CoordinatorClient(request_timeout=timeout, max_outbox=1 if kind == "full" else 100)
    budget = timeout / 2 if kind == "ask_blocking_shorter" else timeout
    try:
        if kind.startswith("ask_blocking"):
            shorter = budget if kind == "ask_blocking_shorter" else None
            outcome, elapsed = blocking_outcome_of(
                lambda: client.ask_blocking(m.GetSink("s"), timeout=shorter), timeout + 1.5
            )
        else:
            outcome, elapsed = asyncio.run(
                outcome_of(_ask_async(client, kind, count), timeout + 1.5)
            )
    finally:
        client.close(timeout=0)
    assert_timed_out(outcome, elapsed, budget)
    assert "within" in str(outcome) or "outbox full" in str(outcome)


@pytest.mark.quick
def test_an_expired_request_is_never_sent() -> None:
    """A request whose caller gave up leaves the outbox unsent: the next batch skips it."""
    client = CoordinatorClient(request_timeout=0.05)
    try:
        outcome, elapsed = blocking_outcome_of(lambda: client.ask_blocking(m.GetSink("s")), 5)
        assert_timed_out(outcome, elapsed, 0.05)
        assert client._pump.take(client._pump.requests, 100, 1 << 20) == []
    finally:
        client.close(timeout=0)


# --- a coordinator that no worker polls ------------------------------------------------------


@pytest.fixture
async def unpolled_coordinator(temporal_client: Client) -> AsyncIterator[str]:
    """A coordinator workflow on a task queue that no worker polls: updates are never
    answered."""
    workflow_id = f"unpolled-{uuid.uuid4().hex[:10]}"
    handle = await ensure_coordinator(
        temporal_client, workflow_id=workflow_id, task_queue=f"nobody-polls-{workflow_id}"
    )
    yield workflow_id
    await handle.terminate("test over")


@pytest.fixture
async def unanswered_client(
    temporal: DevServer, unpolled_coordinator: str
) -> AsyncIterator[CoordinatorClient]:
    client = await CoordinatorClient(
        temporal.address, workflow_id=unpolled_coordinator, request_timeout=1.5
    ).connect()
    yield client
    await asyncio.to_thread(client.close, 0)


async def test_a_coordinator_that_never_answers_times_out_every_kind_of_ask(
    unanswered_client: CoordinatorClient,
) -> None:
    """No worker polls the coordinator's task queue, so its updates wait forever: ``ask``,
    ``ask_many`` and ``ask_blocking`` end with RequestTimeout within request_timeout + slack
    (on f29f918 they are still waiting when the guard gives up)."""
    budget = unanswered_client.request_timeout
    outcome, elapsed = await outcome_of(unanswered_client.ask(m.GetSink("s")), budget + 10)
    assert_timed_out(outcome, elapsed, budget)
    many = [m.GetSink(f"s{i}") for i in range(3)]
    outcome, elapsed = await outcome_of(unanswered_client.ask_many(many), budget + 10)
    assert_timed_out(outcome, elapsed, budget)
    outcome, elapsed = await asyncio.to_thread(
        blocking_outcome_of, lambda: unanswered_client.ask_blocking(m.GetSink("s")), budget + 10
    )
    assert_timed_out(outcome, elapsed, budget)
    # The update stays unanswered: its attempt ends at the deadline, holding no slot.
    await wait_until(lambda: unanswered_client._pump.inflight_updates == 0, timeout=5)


async def test_a_query_wait_on_a_coordinator_that_never_answers_ends_by_its_own_deadline(
    unanswered_client: CoordinatorClient,
) -> None:
    """``wait_for_query`` with a timeout far below ``request_timeout``: its ``wait_query``
    update is never answered and neither is the last look (``GetQuery``). It raises
    QueryWaitTimeout at most LAST_LOOK_S after its own deadline; the look was bounded by
    ``request_timeout`` alone, and a paused coordinator worker made a 3 s wait take 43 s (an
    adversarial review), a CLI ``--wait-running`` minutes."""
    unanswered_client.request_timeout = 60.0
    timeout = 1.0
    outcome, elapsed = await outcome_of(
        unanswered_client.wait_for_query(1, timeout=timeout), timeout + 20
    )
    assert outcome is not HUNG, f"still waiting {elapsed:.1f}s after a {timeout}s deadline"
    assert isinstance(outcome, QueryWaitTimeout), repr(outcome)
    assert timeout - 0.05 <= elapsed <= timeout + LAST_LOOK_S + SLACK_S, elapsed


@pytest.mark.parametrize("timeout", [float("nan"), -1.0])
async def test_an_ask_with_a_timeout_no_clock_passes_is_refused(
    unanswered_client: CoordinatorClient, timeout: float
) -> None:
    with pytest.raises(ValueError, match="timeout"):
        await unanswered_client.ask(m.GetSink("s"), timeout=timeout)


@settings(
    max_examples=8,
    deadline=None,
    phases=NO_SHRINKING,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(timeout=st.floats(min_value=0.1, max_value=1.0))
def test_random_deadlines_against_a_coordinator_that_never_answers(
    unanswered_client: CoordinatorClient, timeout: float
) -> None:
    """Property: whatever ``request_timeout``, an ask to a coordinator that never answers
    raises RequestTimeout no earlier than its deadline and at most SLACK_S after it."""
    unanswered_client.request_timeout = timeout
    outcome, elapsed = blocking_outcome_of(
        lambda: unanswered_client.ask_blocking(m.GetSink("s")), timeout + 10
    )
    assert_timed_out(outcome, elapsed, timeout)


def awaits(client: CoordinatorClient, name: str) -> bool:
    """Whether a task on the client's loop is suspended inside a coroutine called ``name``."""
    for task in asyncio.all_tasks(client._loop):
        step: Any = task.get_coro()
        while step is not None:
            if getattr(step, "__name__", "") == name:
                return True
            step = getattr(step, "cr_await", None)
    return False


async def test_a_waiter_that_gives_up_loses_no_task_exception(
    unanswered_client: CoordinatorClient, caplog: pytest.LogCaptureFixture
) -> None:
    """A wait_for_query caller cancelled while its wait_query update is in flight. Temporal's
    client turns the cancellation into WorkflowUpdateRPCTimeoutOrCancelledError; with the
    update in an asyncio.wait_for, nobody read that error, and asyncio reported "Task
    exception was never retrieved" whenever the task was collected (CI after stop 32, in a
    later test)."""
    caplog.set_level(logging.ERROR, logger="asyncio")
    waiting = asyncio.ensure_future(unanswered_client.wait_for_query(1, timeout=60))
    await wait_until(lambda: awaits(unanswered_client, "execute_update"), timeout=20)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    await wait_until(lambda: not awaits(unanswered_client, "execute_update"), timeout=20)
    del waiting
    assert not lost_task_reports(caplog)


# --- answers the client cannot decode --------------------------------------------------------


@pytest.fixture
async def keyed_coordinator(
    temporal: DevServer, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[str]:
    """A coordinator worker holding STACK_KEY, and a PostgreSQL sink in its catalog (so that
    answers about it carry the masked password and are encrypted)."""
    monkeypatch.setenv("STREAMCTL_PAYLOAD_KEY", STACK_KEY)
    worker_client = await connect(temporal.address)
    suffix = uuid.uuid4().hex[:10]
    task_queue, workflow_id = f"coordinator-{suffix}", f"coordinator-keys-{suffix}"
    async with coordinator_worker(worker_client, sqlite_url, task_queue):
        handle = await ensure_coordinator(
            worker_client, workflow_id=workflow_id, task_queue=task_queue
        )
        setup = await CoordinatorClient(temporal.address, workflow_id=workflow_id).connect()
        try:
            config = {"table": "t", "dbname": "app", "user": "u", "password": "hunter2"}
            await setup.ask(m.CreateSink("pg", COLUMNS, "PostgreSQL", config))
        finally:
            await asyncio.to_thread(setup.close)
        yield workflow_id
        await handle.terminate("test over")


def lost_task_reports(caplog: pytest.LogCaptureFixture) -> list[str]:
    """asyncio's reports of task exceptions nobody retrieved (made when such a task is
    collected)."""
    gc.collect()
    return [r.getMessage() for r in caplog.records if "never retrieved" in r.getMessage()]


async def test_an_answer_encrypted_with_another_key_raises_missing_payload_key_at_once(
    temporal: DevServer,
    keyed_coordinator: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The coordinator encrypts the answer about a PostgreSQL sink with its key; a client
    holding another key raises MissingPayloadKey naming the key it needs, at once (well
    before its request_timeout). On f29f918 the decoding error died in an unawaited task and
    the caller waited forever."""
    caplog.set_level(logging.ERROR, logger="asyncio")
    monkeypatch.setenv("STREAMCTL_PAYLOAD_KEY", OTHER_KEY)
    client = await CoordinatorClient(
        temporal.address, workflow_id=keyed_coordinator, request_timeout=60
    ).connect()
    try:
        outcome, elapsed = await outcome_of(client.ask(m.GetSink("pg")), 45)
        assert outcome is not HUNG, f"still waiting after {elapsed:.1f}s"
        assert elapsed < 20, elapsed  # at once, not by the deadline (60 s)
        assert isinstance(outcome, errors.MissingPayloadKey), repr(outcome)
        needed = key_id(base64.b64decode(STACK_KEY))
        assert outcome.key_id == needed and needed in str(outcome)
        assert outcome.held == (key_id(base64.b64decode(OTHER_KEY)),)
        # A request whose answer is not encrypted still works on the same client.
        assert await client.ask(m.ListLogicalSources()) == []
    finally:
        await asyncio.to_thread(client.close)
    del outcome
    assert not lost_task_reports(caplog)


async def test_an_answer_from_a_codec_the_client_lacks_raises_undecodable_answer_at_once(
    temporal: DevServer, keyed_coordinator: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client whose data converter has no payload codec gets the coordinator's compressed
    answer (``binary/zlib``) and raises UndecodableAnswer naming the encoding, at once; on
    f29f918 it waited forever."""

    async def without_codecs(address: str, namespace: str | None = None, **_: Any) -> Client:
        return await Client.connect(address, namespace=namespace or "default")

    monkeypatch.setattr(client_module, "connect", without_codecs)
    client = await CoordinatorClient(
        temporal.address, workflow_id=keyed_coordinator, request_timeout=60
    ).connect()
    wide = tuple(m.ColumnSpec(f"column_{i:03}", "UINT64", False) for i in range(150))
    try:
        outcome, elapsed = await outcome_of(client.ask(m.CreateLogicalSource("wide", wide)), 45)
    finally:
        await asyncio.to_thread(client.close)
    assert outcome is not HUNG, f"still waiting after {elapsed:.1f}s"
    assert elapsed < 20, elapsed  # at once, not by the deadline
    assert isinstance(outcome, errors.UndecodableAnswer), repr(outcome)
    assert "binary/zlib" in str(outcome)


# --- failures inside the client --------------------------------------------------------------


async def test_a_failure_inside_the_sender_reaches_the_caller(
    temporal: DevServer, keyed_coordinator: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug while reading an answer (here: building the response raises) fails the caller
    with ClientFailure and its cause; on f29f918 it was lost in the sender's task."""

    def broken_response(**_: Any) -> m.Response:
        raise RuntimeError("a bug in the client")

    client = await CoordinatorClient(
        temporal.address, workflow_id=keyed_coordinator, request_timeout=60
    ).connect()
    monkeypatch.setattr(pump_module, "Response", broken_response)
    try:
        outcome, elapsed = await outcome_of(client.ask(m.ListSinks()), 45)
    finally:
        await asyncio.to_thread(client.close)
    assert outcome is not HUNG, f"still waiting after {elapsed:.1f}s"
    assert elapsed < 20, elapsed  # at once, not by the deadline
    assert isinstance(outcome, errors.ClientFailure), repr(outcome)
    assert "a bug in the client" in str(outcome)


async def test_a_dead_pump_fails_what_is_queued_and_refuses_new_requests(
    unanswered_client: CoordinatorClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the pump itself dies, nothing queued would ever move: the queued requests fail at
    once with ClientFailure naming the cause, and later asks are refused with it (on
    f29f918 the pump died silently and every caller waited)."""

    def broken_take(*_: Any) -> Any:
        raise RuntimeError("pump bug")

    monkeypatch.setattr(unanswered_client._pump, "take", broken_take)
    unanswered_client.request_timeout = 60
    outcome, elapsed = await outcome_of(unanswered_client.ask(m.GetSink("s")), 45)
    assert outcome is not HUNG, f"still waiting after {elapsed:.1f}s"
    assert elapsed < 20, elapsed  # at once, not by the deadline
    assert isinstance(outcome, errors.ClientFailure) and "pump bug" in str(outcome), outcome
    with pytest.raises(errors.ClientFailure, match="pump bug"):
        await unanswered_client.ask(m.GetSink("s"))
