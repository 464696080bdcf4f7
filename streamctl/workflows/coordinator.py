"""The coordinator workflow: the message bus in front of the catalog.

Protocol
--------
* Clients send requests with the ``submit(ids, requests)`` update: the request ids and the list
  of request :class:`Envelope` objects; the update returns the list of :class:`Response`
  objects, one per request, in order. Events travel in the ``events`` signal (an
  :class:`EventBatch`). The ``status`` query reports snapshot version, pending count, passes
  run and the last pass's duration. The ``wait_query(query_id, states, timeout)`` update
  returns once a pass reports the query in one of ``states`` (:mod:`.query_waits`): every pass
  reports the rows of the queries waited on, so a waiter learns a state from the pass that
  records it, with no request of its own.
* The workflow buffers request batches and events in arrival order, each numbered as it
  arrives (``CoordinatorState.arrivals``): a pass applies a stage's messages by that number,
  so an event a client sent before a request is applied first even when one workflow task
  took in both. It runs a **pass** when
  ``batch_size`` messages are pending or ``timeout`` has passed since the oldest pending one
  (a wait shorter than :data:`MIN_TIMER_WAIT` is not worth a workflow timer: the pass runs at
  once, and what arrives during it forms the next batch).
  A pass takes whole request batches up to ``batch_size`` requests (always at least one) and
  up to ``batch_size`` events. A pass is one ``apply_pass`` activity (one catalog
  transaction); the next batch gathers while it runs. A small pass without events
  (``LOCAL_PASS_MAX_MESSAGES``) runs as a local activity inside the workflow task that decides
  it, which saves an idle request the activity's round trips; should that task run again
  after the pass committed, the catalog hands back the events the task gave the same pass
  number since (``PassResult.events_not_applied``), and they are buffered again.
* Request payloads stay raw in the workflow: the update's ``requests`` argument is handed to
  the pass activity and the activity's per-batch answer back to the update, byte for byte
  (:mod:`streamctl.protocol.pass_io`). Parsing thousands of bodies per second in workflow
  code was most of the coordinator worker's CPU.
* Update validation refuses a batch (before it enters history) when the buffer is full
  (``Busy``) or the run is closing for continue-as-new (``ContinuingAsNew``); clients retry
  those with the same ids after a backoff.
* Limits (:mod:`streamctl.limits`): a request batch holds at most ``MAX_REQUESTS_PER_UPDATE``
  requests and ``max_batch_bytes`` bytes (else ``InvalidBatch``, refused before history); one
  request at most ``MAX_REQUEST_BYTES`` (its own ``TOO_LARGE`` answer,
  :mod:`streamctl.domain.decode`); an event batch at most ``MAX_EVENTS_PER_SIGNAL`` events of
  ``MAX_EVENT_BATCH_BYTES`` in all (a signal cannot be refused, so a larger one is dropped and
  logged as ``TOO_LARGE``; the client library never sends one).

Guarantees
----------
* Every accepted request is answered exactly once: the pass activity answers an id it has
  answered before from the catalog, and a repeat inside one pass from its first occurrence.
* Events of the same worker compact (heartbeats add their counts), so the buffer is bounded by
  entities, not by rate; a signal batch seen before from the same sender is dropped.
* Nothing a client sends is interpreted here beyond an envelope's kind and id: bodies are
  decoded in the activity, so bad input can fail only its own request, never a workflow task.
  The ``events`` signal takes its arguments raw and decodes them strictly
  (:func:`~streamctl.workflows.wire.decode_event_batch`), the ``submit`` validator refuses a
  payload whose envelopes do not match its ids, and both count what they refuse
  (``streamctl_refused_messages``).
* No input is retried forever: a pass ends after :data:`PASS_ATTEMPTS` attempts, and one that
  failed for good is split in halves, each run as a pass of its own, down to the one message
  that fails alone, which is answered ``INTERNAL`` (a request) or dropped (an event) and kept
  aside by ``quarantine_message``. A half names the passes it was split from
  (``PassInput.split_from``): when one of them committed after all (its last attempt's process
  died after the commit), the half answers from that pass's stored answers and applies nothing
  again. A pass that failed because the catalog could not be reached
  (``CatalogUnavailable``) is tried again, as long as the outage lasts.
* Everything carried stays under Temporal's 2 MB payload limit: pass results by the pass's
  own budgets (:mod:`streamctl.limits`), a pass's events by ``MAX_PASS_EVENT_BYTES``, events
  over ``MAX_REQUEST_BYTES`` or nested deeper than ``MAX_NESTING_DEPTH`` are dropped on
  arrival, and continue-as-new waits until the pending events fit
  :data:`~streamctl.limits.MAX_CARRIED_EVENT_BYTES`.
* Agent actions (start, stop, reconcile) run as activities beside the loop
  (:mod:`streamctl.workflows.agent_calls`); each outcome comes back as a ``QueryStatusChanged``
  event into a later pass. At most ``max_actions_under_way`` run at once (Temporal fails a
  workflow task past 2,000 pending activities); later ones wait in the workflow, in the order
  they came, and count against the room for starts a pass gets. One workflow task schedules
  at most ``MAX_ACTIONS_PER_TASK`` of them (a longer task risks the SDK's deadlock detection);
  the rest follow in the next tasks. An action is never lost: before continue-as-new the run
  waits up to ``action_drain_timeout`` for the actions under way (an activity completing while
  the run closes would fail that workflow task), and carries the ones still running or
  waiting (at most ``MAX_CARRIED_WAITING_ACTIONS`` of these) to the next run, which runs them
  again (every action is idempotent on the agent: a start of a query it runs reports it, a
  stop of one it does not run reports ``STOPPED``, a stale stop is ignored).
* Continue-as-new happens after ``passes_per_run`` passes, at ``max_history_events`` or when
  Temporal suggests it (put off while the last pass left queries waiting to be started, up to
  ``STARTS_DEFER_LIMIT`` times ``max_history_events``), in two phases. **Draining**: the run
  decides no new starts (few actions to carry) and waits for its actions under way, up to
  ``action_drain_timeout``; it goes on accepting and answering requests and events meanwhile,
  so the control plane stays available (runs recorded before
  :data:`SERVE_WHILE_DRAINING_PATCH` refused requests for the whole drain: under ``bench
  scale``'s failover that was ~30 s without answers or restarts). **Closing**: the run
  refuses new updates (``ContinuingAsNew``), answers every accepted request, waits for its
  handlers, and continues as new only from a quiet task: a
  signal that arrives while the closing workflow task runs fails it (UnhandledCommand), and
  the retry replays the whole run; retried from that replay under a steady stream of events
  it failed again and again. A quiet task is one that began with nothing but a short timer's
  firing (:meth:`CoordinatorWorkflow._quiet_for_continue_as_new`; after ``QUIET_ATTEMPTS``
  timers, one with few other events, never a replaying retry's). It carries
  :class:`~streamctl.workflows.state.CoordinatorState` (version, pass number, pending events,
  sender marks, actions under way) to the next run, which begins with a pass. No request
  batch is pending at that point, so no raw payload needs carrying.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from temporalio.common import RawValue

    from streamctl.activities.pass_activity import CatalogActivities
    from streamctl.compact_json import dumps
    from streamctl.error_codes import ErrorCode
    from streamctl.limits import (
        ACTION_RELEASE_DELAY,
        INT64_MAX,
        INT64_MIN,
        LOCAL_PASS_MAX_MESSAGES,
        MAX_ACTIONS_PER_TASK,
        MAX_ACTIONS_UNDER_WAY,
        MAX_CARRIED_EVENT_BYTES,
        MAX_CARRIED_SENDER_BYTES,
        MAX_CARRIED_WAITING_ACTIONS,
        MAX_EVENT_BATCH_BYTES,
        MAX_EVENTS_PER_SIGNAL,
        MAX_NESTING_DEPTH,
        MAX_PASS_EVENT_BYTES,
        MAX_QUERY_WAIT_SECONDS,
        MAX_QUERY_WAITERS,
        MAX_REQUEST_BYTES,
        MAX_REQUESTS_PER_UPDATE,
        MIN_QUERY_WAIT_SECONDS,
    )
    from streamctl.protocol import refusals
    from streamctl.protocol.agent_contract import (
        AgentAction,
    )
    from streamctl.protocol.coordinator_config import (
        COORDINATOR_TASK_TIMEOUT,
        CoordinatorConfig,
        CoordinatorStatus,
    )
    from streamctl.protocol.messages import (
        CheckLiveness,
        Envelope,
        Response,
        StartQuery,
        compaction_key,
        merge_events,
    )
    from streamctl.protocol.pass_io import (
        PassInput,
        PassResult,
        PendingMessage,
        QuarantineInput,
    )
    from streamctl.raw_payloads import JSON_ENCODING, join_request_batches, json_payload
    from streamctl.workflows.agent_calls import run_action
    from streamctl.workflows.query_waits import QueryWait, QueryWaiter
    from streamctl.workflows.request_batches import RequestBatch, halves, only_envelope
    from streamctl.workflows.state import CoordinatorInput, CoordinatorState
    from streamctl.workflows.web_ui import (
        PassFacts,
        WebUiView,
        config_memo,
        pass_details,
        pass_summary,
        waiting_details,
    )
    from streamctl.workflows.wire import (
        decode_event_batch,
        nests_deeper_than,
        request_batch_kinds,
        request_batch_problem,
    )

PASS_ISOLATION_PATCH = "pass-isolation"
"""Passes end after :data:`PASS_ATTEMPTS` and a failed one is split (older runs retried
forever): the ``workflow.patched`` id that keeps older histories replaying as they ran."""
PASS_ATTEMPTS = 4
LOCAL_SMALL_PASS_PATCH = "local-small-passes"
"""Small passes (:data:`~streamctl.limits.LOCAL_PASS_MAX_MESSAGES`) run as local activities;
older runs ran every pass as an activity."""
BOUNDED_EVENT_NESTING_PATCH = "bounded-event-nesting"
"""Events nested deeper than ``MAX_NESTING_DEPTH`` are dropped on arrival (older runs buffered
them, and one nested ~950 levels deep failed every workflow task)."""
BOUNDED_PASS_EVENTS_PATCH = "bounded-pass-events"
"""A pass takes events up to ``MAX_PASS_EVENT_BYTES`` (older runs took ``batch_size`` of any
size, and a pass's input could outgrow Temporal's 2 MB payload limit)."""
CATALOG_OUTAGE_MAX_PAUSE = 60.0
"""Seconds between rounds of a pass whose catalog cannot be reached (1, 2, 4 ... up to this):
about 300 history events an hour of outage."""
MIN_TIMER_WAIT = 0.02
"""Shorter batching waits run the pass at once: a workflow timer fired 100-200 ms late on the dev
server here, which made an idle coordinator answer in 300 ms instead of 100. Messages that
arrive while a pass runs still form the next batch."""

SENDER_MEMORY_SECONDS = 24 * 3600.0

QUIET_CONTINUE_AS_NEW_PATCH = "quiet-continue-as-new"
"""Continue-as-new only from a workflow task that holds nothing but a short timer's firing
(:meth:`CoordinatorWorkflow._quiet_for_continue_as_new`); older runs continued at once."""
QUIET_WAIT = timedelta(milliseconds=10)
QUIET_EVENTS = 5
"""A timer armed at history length L fires in a task starting at L + 5 when nothing else
happened: WorkflowTaskCompleted, TimerStarted, TimerFired, WorkflowTaskScheduled and -Started."""
QUIET_ATTEMPTS = 30
"""Timers armed before a run continues as new all the same (senders that never pause)."""
CALM_CONTINUE_AS_NEW_PATCH = "calm-continue-as-new"
"""Past :data:`QUIET_ATTEMPTS`, continue-as-new only from a calm task (:data:`CALM_EVENTS`);
older runs continued from any timer's task."""
CALM_EVENTS = 20
"""Past :data:`QUIET_ATTEMPTS`, how many more events than the calmest timer task of the run so
far a task may begin with and still continue as new: the signals of a cached run's timer task
(tens of milliseconds), not the many more that arrive while a worker replays a long run after a
refusal."""
RUN_LENGTH_BACKSTOP = 4
"""A run whose history reaches this many times ``max_history_events`` (at most
:data:`RUN_LENGTH_BACKSTOP_EVENTS`) continues as new from the next timer's task, calm or not:
senders so fast that no task is ever calm must not grow the run to Temporal's hard limit
(51,200 events), which terminates the workflow."""
RUN_LENGTH_BACKSTOP_EVENTS = 40_000
SERVE_WHILE_DRAINING_PATCH = "serve-while-draining"
"""A run due to continue as new goes on answering requests while its actions under way drain
(``action_drain_timeout``) and refuses them only while it closes; it schedules at most
:data:`~streamctl.limits.MAX_ACTIONS_PER_TASK` actions per workflow task. Older runs refused
requests for the whole drain and scheduled every action at once."""
DEFER_FOR_STARTS_PATCH = "defer-continue-as-new-for-starts"
"""A run whose last pass left queries waiting to be started puts off continue-as-new at
``max_history_events`` (up to :data:`STARTS_DEFER_LIMIT` times that): a draining run starts
nothing, so a continue-as-new in the middle of a failover's thousand restarts held half of them
back by 10-20 s (``bench scale``). Older runs continued as new at ``max_history_events``."""
STARTS_WAIT_FOR_NEXT_RUN = frozenset({StartQuery.kind})
"""Requests a draining run refuses (``ContinuingAsNew``): they start a query now or fail."""
STARTS_DEFER_LIMIT = 3
"""How many times ``max_history_events`` a run may grow to while a wave of starts lasts (a
thousand starts write ~4,000 events), and never past :data:`STARTS_DEFER_MAX_EVENTS` events or
:data:`STARTS_DEFER_MAX_BYTES` of history."""
STARTS_DEFER_MAX_EVENTS = 8000
"""Under Temporal's history warning (10,240 events), whatever ``max_history_events`` is."""
STARTS_DEFER_MAX_BYTES = 4 * 1024 * 1024
"""Start plans ride in the activities' inputs: a run's history grows in bytes as well."""


def _within_bytes(events: list[PendingMessage], budget: int) -> list[PendingMessage]:
    """The first of ``events`` whose sizes add up to at most ``budget`` (one at least)."""
    total = 0
    for count, event in enumerate(events):
        total += event.size
        if count and total > budget:
            return events[:count]
    return events


def _size(envelope: Envelope) -> int:
    body = envelope.body
    return 64 + len(envelope.id) + (len(repr(body)) if isinstance(body, dict) else 0)


@workflow.defn(name="Coordinator")
class CoordinatorWorkflow:
    @workflow.init
    def __init__(self, workflow_input: CoordinatorInput) -> None:
        self.state = workflow_input.state or CoordinatorState(
            config=workflow_input.config or CoordinatorConfig()
        )
        # A raw client's configuration (streamctl refuses to start one), or one carried from a
        # run that began before the knobs were checked: the default takes each bad knob's place.
        for problem in self.state.config.problems():
            workflow.logger.warning("configuration: %s; the default is used", problem)
        self.state.config = self.state.config.usable()
        self.request_batches: list[RequestBatch] = []
        self.pending_requests = 0
        self.compaction_index: dict[tuple[str, str], int] = {}
        self.sender_bytes: int | None = None
        """What ``state``'s sender memory takes (:func:`_sender_bytes`), once counted."""
        self.draining = False
        """Continue-as-new is due: the run decides no starts and lets its actions drain."""
        self.closing = False
        """The drain is over: the run refuses new requests and continues as new once the
        accepted ones are answered (runs without :data:`SERVE_WHILE_DRAINING_PATCH`: from
        the moment it drains, see :meth:`_closing`)."""
        self.serve_while_draining = False
        self.defer_for_starts = False
        self.starts_waiting = False
        """The last pass left queries waiting to be started (``PassResult.starts_waiting``)."""
        self.launched_in_task = 0
        self.launch_task = -1
        """The history length of the workflow task that ``launched_in_task`` counts for."""
        self.quiet_continue_as_new = False
        self.calm_continue_as_new = False
        self.calmest_timer_task: int | None = None
        """The fewest events a quiet check's timer task of this run began with (since armed)."""
        self.quiet_attempts = 0
        """Timers armed so far in this run to find a quiet task to continue as new from."""
        self.drain_deadline: float | None = None
        """When this run stops waiting for its actions under way before continuing as new."""
        self.passes_this_run = 0
        self.actions_under_way: dict[asyncio.Task[None], AgentAction] = {}
        self.actions_waiting: list[AgentAction] = []
        """Actions past ``max_actions_under_way`` (or, with :data:`SERVE_WHILE_DRAINING_PATCH`,
        past this workflow task's :data:`~streamctl.limits.MAX_ACTIONS_PER_TASK`), in the
        order they came; they start as actions under way end (:meth:`_action_ended`) and as
        the loop comes round (:meth:`_release_waiting_actions`)."""
        self.query_waiters: list[QueryWaiter] = []
        self.web_ui = WebUiView(workflow.info().typed_search_attributes)
        self._reindex()

    # --- messages in ---------------------------------------------------------------------

    @workflow.update
    async def submit(self, ids: list[str], requests: RawValue) -> RawValue:
        self._heard()
        batch = RequestBatch(ids, requests.payload, workflow.now().timestamp(), self._arrival())
        self.request_batches.append(batch)
        self.pending_requests += len(ids)
        await workflow.wait_condition(lambda: batch.answer is not None)
        assert batch.answer is not None
        return json_payload(batch.answer.encode())

    @submit.validator
    def validate_submit(self, ids: list[str], requests: RawValue) -> None:
        try:
            self._check_submit(ids, requests)
        except ApplicationError as refusal:
            if refusal.type == refusals.INVALID_BATCH:
                _count_refused("submit", "invalid")
            raise

    def _check_submit(self, ids: list[str], requests: RawValue) -> None:
        config = self.state.config
        if self._closing():
            raise ApplicationError(
                "coordinator is continuing as new; retry", type=refusals.CONTINUING_AS_NEW
            )
        if not ids or not all(isinstance(i, str) and i for i in ids):
            raise ApplicationError(
                "a request batch needs at least one request, each with a non-empty string id",
                type=refusals.INVALID_BATCH,
            )
        if len(ids) > MAX_REQUESTS_PER_UPDATE:
            raise ApplicationError(
                f"a request batch holds at most {MAX_REQUESTS_PER_UPDATE} requests, got {len(ids)}",
                type=refusals.INVALID_BATCH,
            )
        payload = requests.payload
        if payload.metadata.get("encoding") == b"binary/encrypted":
            # The codec leaves a payload it cannot decrypt as it is (payload_crypto).
            raise ApplicationError(
                "the request batch is encrypted with a payload key this coordinator worker "
                "does not hold; give every process the same STREAMCTL_PAYLOAD_KEY",
                type=refusals.INVALID_BATCH,
            )
        if payload.metadata.get("encoding") != JSON_ENCODING:
            raise ApplicationError("request batches must be JSON", type=refusals.INVALID_BATCH)
        if len(payload.data) > config.max_batch_bytes:
            raise ApplicationError(
                f"a request batch may hold at most {config.max_batch_bytes} bytes, "
                f"got {len(payload.data)}",
                type=refusals.INVALID_BATCH,
            )
        problem = request_batch_problem(ids, payload.data)
        if problem is not None:
            raise ApplicationError(problem, type=refusals.INVALID_BATCH)
        if self.draining and STARTS_WAIT_FOR_NEXT_RUN & request_batch_kinds(payload.data):
            # A draining run decides no starts: the pass would leave the query waiting for
            # the next run. Refused, the client retries this batch with the same ids, and the
            # next run answers it with the query started.
            raise ApplicationError(
                "coordinator is continuing as new; retry", type=refusals.CONTINUING_AS_NEW
            )
        if self.pending_requests and self.pending_requests + len(ids) > config.max_pending:
            # An empty buffer takes any batch: one larger than max_pending was refused
            # Busy forever, its client retrying until its deadline.
            raise ApplicationError("coordinator buffer is full; retry later", type=refusals.BUSY)

    @workflow.update
    async def wait_query(self, query_id: int, states: list[str], timeout: float) -> QueryWait:
        """Until a pass reports the query in one of ``states`` (:mod:`.query_waits`)."""
        waiter = QueryWaiter(query_id, frozenset(states), since_pass=self.state.pass_no)
        self.query_waiters.append(waiter)
        try:
            await workflow.wait_condition(
                lambda: waiter.settled or self._closing(),
                timeout=min(timeout, MAX_QUERY_WAIT_SECONDS),
            )
        except TimeoutError:
            pass
        finally:
            self.query_waiters.remove(waiter)
        return waiter.answer

    @wait_query.validator
    def validate_wait_query(self, query_id: int, states: list[str], timeout: float) -> None:
        if self._closing():
            raise ApplicationError(
                "coordinator is continuing as new; retry", type=refusals.CONTINUING_AS_NEW
            )
        if (
            type(query_id) is not int
            or not INT64_MIN <= query_id <= INT64_MAX  # a pass looks it up in the catalog
            or not isinstance(states, list)
            or not all(isinstance(state, str) for state in states)
            or type(timeout) not in (int, float)
            or not timeout >= MIN_QUERY_WAIT_SECONDS  # a shorter timer is a zero one, refused
        ):
            _count_refused("wait_query", "invalid")
            raise ApplicationError(
                "wait_query takes a query id, a list of state names and a timeout of at least "
                f"{MIN_QUERY_WAIT_SECONDS} s",
                type=refusals.INVALID_BATCH,
            )
        if len(self.query_waiters) >= MAX_QUERY_WAITERS:
            raise ApplicationError(
                f"{MAX_QUERY_WAITERS} waits are open; ask GetQuery instead", type=refusals.BUSY
            )

    @workflow.signal
    def events(self, *args: Any) -> None:
        """``events(batch: EventBatch)``, taken raw: see :func:`decode_event_batch`."""
        self._heard()
        batch, problem = decode_event_batch(args)
        if problem:
            workflow.logger.warning("events signal: %s", problem)
            _count_refused("events", "malformed")
        if batch is None:
            return
        if batch.seq <= self.state.sender_seqs.get(batch.sender, 0):
            return  # delivered before
        if not INT64_MIN <= batch.seq <= INT64_MAX and workflow.patched("bounded-sender-memory"):
            # Remembered in the carried state, a number of thousands of digits would make it
            # outgrow its payload (MAX_CARRIED_SENDER_BYTES counts 64-bit ones).
            workflow.logger.warning("events signal: seq %.40s... is beyond 64 bits", batch.seq)
            _count_refused("events", "malformed")
            return
        events = batch.events  # a list of Envelopes: decode_event_batch checked it
        deep = [e for e in events if nests_deeper_than(e.body, MAX_NESTING_DEPTH)]
        if deep and workflow.patched(BOUNDED_EVENT_NESTING_PATCH):
            # A pass would refuse such a body anyway; nested some 950 levels deep, it made
            # encoding the pass's input overflow the stack, and every workflow task failed.
            _count_refused("events", "too_deep")
            workflow.logger.warning(
                "dropping %d event(s) of %s nested deeper than %d levels",
                len(deep),
                batch.sender,
                MAX_NESTING_DEPTH,
            )
            events = [e for e in events if not nests_deeper_than(e.body, MAX_NESTING_DEPTH)]
        size = sum(_size(e) for e in events)
        if len(events) > MAX_EVENTS_PER_SIGNAL or size > MAX_EVENT_BATCH_BYTES:
            workflow.logger.warning(
                "TOO_LARGE: dropping event batch %d of %s: %d events, ~%d bytes; the limits "
                "are %d events and %d bytes",
                batch.seq,
                batch.sender,
                len(events),
                size,
                MAX_EVENTS_PER_SIGNAL,
                MAX_EVENT_BATCH_BYTES,
            )
            return
        now = workflow.now().timestamp()
        self._remember_sender(batch.sender, batch.seq, now)
        for envelope in events:
            if _size(envelope) > MAX_REQUEST_BYTES and workflow.patched("drop-oversized-events"):
                _count_refused("events", "too_large")
                workflow.logger.warning(
                    "TOO_LARGE: dropping event %s of %s: ~%d bytes, the limit is %d",
                    envelope.id,
                    batch.sender,
                    _size(envelope),
                    MAX_REQUEST_BYTES,
                )
                continue
            self._enqueue_event(envelope, now)

    @workflow.query
    def status(self) -> CoordinatorStatus:
        return CoordinatorStatus(
            version=self.state.version,
            pending=len(self.state.pending) + self.pending_requests,
            pending_requests=self.pending_requests,
            passes_run=self.state.pass_no,
            passes_this_run=self.passes_this_run,
            last_pass_ms=self.state.last_pass_ms,
            draining=self.draining,
            runs=self.state.runs,
            config=self.state.config,
        )

    # --- the loop --------------------------------------------------------------------------

    @workflow.run
    async def run(self, workflow_input: CoordinatorInput) -> None:
        continued = self.state.position_loaded
        if not self.state.position_loaded:
            position = await workflow.execute_activity_method(
                CatalogActivities.catalog_position,
                workflow.info().workflow_id,
                start_to_close_timeout=timedelta(seconds=self.state.config.pass_timeout),
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=5)),
            )
            self.state.version = max(self.state.version, position.version)
            self.state.pass_no = max(self.state.pass_no, position.last_pass_no)
            self.state.position_loaded = True
            self._enqueue_liveness_check()
        self.serve_while_draining = workflow.patched(SERVE_WHILE_DRAINING_PATCH)
        self.defer_for_starts = self.serve_while_draining and workflow.patched(
            DEFER_FOR_STARTS_PATCH
        )
        for action in self.state.actions_under_way:  # cut short by the previous run's end
            self._start_action(action)
        self.state.actions_under_way = []
        workflow.set_current_details(waiting_details(self.state.version, self.state.runs))
        # Asked once, at the start: its marker is then no event between a quiet check's
        # timer and the task that fires it.
        self.quiet_continue_as_new = workflow.patched(QUIET_CONTINUE_AS_NEW_PATCH)
        self.calm_continue_as_new = self.quiet_continue_as_new and workflow.patched(
            CALM_CONTINUE_AS_NEW_PATCH
        )
        if self.quiet_continue_as_new and continued:
            # The draining run decided no starts: a pass now starts what waits, rather than
            # the next message or liveness deadline.
            self._enqueue_liveness_check()

        while True:
            if self.serve_while_draining:
                self._release_waiting_actions()
            await self._gather()
            if self._continue_as_new_due():
                if self.serve_while_draining and not self.draining:
                    timeout = self.state.config.action_drain_timeout
                    self.drain_deadline = workflow.now().timestamp() + timeout
                self.draining = True
            if self._has_pending():
                await self._run_pass()
            if self.draining and not self._closing() and self._drain_over():
                self.closing = True
            if self._closing() and not self.request_batches:
                if self._carried_bytes() > MAX_CARRIED_EVENT_BYTES and workflow.patched(
                    "bounded-continue-as-new-state"
                ):
                    continue  # pass the pending events first: the state must fit one payload
                await workflow.wait_condition(workflow.all_handlers_finished)
                await self._drain_actions()
                if len(self.actions_waiting) > MAX_CARRIED_WAITING_ACTIONS:
                    await workflow.wait_condition(
                        lambda: len(self.actions_waiting) <= MAX_CARRIED_WAITING_ACTIONS
                    )
                if not self.request_batches and await self._quiet_for_continue_as_new():
                    break

        self._forget_old_senders()
        next_state = CoordinatorState(
            config=self.state.config,
            position_loaded=True,
            version=self.state.version,
            pass_no=self.state.pass_no,
            pending=list(self.state.pending),
            sender_seqs=dict(self.state.sender_seqs),
            sender_seen_at=dict(self.state.sender_seen_at),
            next_liveness_deadline=self.state.next_liveness_deadline,
            last_pass_ms=self.state.last_pass_ms,
            runs=self.state.runs + 1,
            actions_under_way=[*self.actions_under_way.values(), *self.actions_waiting],
            heard_at=self.state.heard_at,
            heard_before=self.state.heard_before,
        )
        # The memo rides on the command (no event of its own) and stays the run's configuration.
        workflow.continue_as_new(
            CoordinatorInput(state=next_state),
            memo=config_memo(self.state.config),
            task_timeout=COORDINATOR_TASK_TIMEOUT,
        )

    async def _gather(self) -> None:
        """Wait until a batch is due: full, old enough, a liveness deadline, or closing; or,
        with nothing pending, until continue-as-new is due, the drain is over, or waiting
        actions may be scheduled."""
        self._heard()  # a pass returned: this workflow task runs
        config = self.state.config
        if not self._has_pending() and not self._closing():
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(self._idle_over, timeout=self._idle_timeout())
        self._check_liveness_deadline()
        if not self._has_pending() or self._closing() or self._wait_due():
            return
        waited = workflow.now().timestamp() - self._oldest_arrival()
        remaining = config.timeout - waited
        if not self._batch_full() and remaining > MIN_TIMER_WAIT:
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(self._batch_full, timeout=remaining)

    async def _run_pass(self) -> None:
        config = self.state.config
        request_batches: list[RequestBatch] = []
        requests = 0
        request_bytes = 0
        for batch in self.request_batches:
            if request_batches and (
                requests + len(batch.ids) > config.batch_size
                or request_bytes + len(batch.payload.data) > config.max_batch_bytes
            ):
                break
            request_batches.append(batch)
            requests += len(batch.ids)
            request_bytes += len(batch.payload.data)
        del self.request_batches[: len(request_batches)]
        events = self.state.pending[: config.batch_size]
        if sum(e.size for e in events) > MAX_PASS_EVENT_BYTES and workflow.patched(
            BOUNDED_PASS_EVENTS_PATCH
        ):
            events = _within_bytes(events, MAX_PASS_EVENT_BYTES)
        del self.state.pending[: len(events)]
        self._reindex()
        await self._apply(request_batches, events)

    async def _apply(
        self,
        request_batches: list[RequestBatch],
        events: list[PendingMessage],
        split_from: tuple[int, ...] = (),
    ) -> None:
        """One pass over these messages. A pass that fails for good (every attempt timed out,
        crashed its process, or failed some other way that the pass's own savepoints could
        not contain) is split in two and each half runs as a pass of its own, down to the
        one message that fails, which is answered with an error and kept aside
        (:meth:`_set_aside`). A catalog that cannot be reached is not a message's fault: that
        pass is tried again, however long the outage lasts."""
        config = self.state.config
        requests = sum(len(batch.ids) for batch in request_batches)
        isolating = workflow.patched(PASS_ISOLATION_PATCH)
        self.state.pass_no += 1
        pass_no = self.state.pass_no
        watched = sorted({waiter.query_id for waiter in self.query_waiters})
        # A split pass is looking for a message that fails (times out, crashes its process):
        # it runs as an activity, as the pass it was split from did.
        # It carries no event: a local activity's input is not recorded, and the workflow task
        # that runs one again may take in events that arrived since; the catalog tells those
        # apart from the pass that committed only by that pass having had none
        # (PassResult.events_not_applied).
        local = (
            not split_from
            and not events
            and requests <= LOCAL_PASS_MAX_MESSAGES
            and workflow.patched(LOCAL_SMALL_PASS_PATCH)
        )
        execute = (
            workflow.execute_local_activity_method if local else workflow.execute_activity_method
        )
        outage_rounds = 0
        while True:
            started = workflow.now()
            try:
                result = await execute(
                    CatalogActivities.apply_pass,
                    args=[
                        PassInput(
                            workflow_id=workflow.info().workflow_id,
                            pass_no=self.state.pass_no,
                            now=started.timestamp(),
                            events=events,
                            request_batch_arrivals=[b.received_at for b in request_batches],
                            request_batch_seqs=[b.seq for b in request_batches],
                            suspect_after=config.suspect_after,
                            dead_after=config.dead_after,
                            max_restarts=config.max_restarts,
                            restart_delay=config.restart_delay,
                            restart_max_delay=config.restart_max_delay,
                            watched_queries=watched,
                            action_room=self._action_room(),
                            split_from=list(split_from),
                        ),
                        join_request_batches([batch.payload for batch in request_batches]),
                    ],
                    start_to_close_timeout=timedelta(seconds=config.pass_timeout),
                    retry_policy=RetryPolicy(
                        initial_interval=timedelta(milliseconds=200),
                        maximum_interval=timedelta(seconds=5),
                        maximum_attempts=PASS_ATTEMPTS if isolating else 0,
                    ),
                    summary=pass_summary(self.state.pass_no, requests, len(events)),
                )
                break
            except (ActivityError, ApplicationError) as error:
                # An activity's failure, and a local activity's timeout, come wrapped in an
                # ActivityError; a local activity's own failure comes as the ApplicationError
                # itself (which nothing else in this block raises).
                if not isolating:
                    raise
                cause = (error.cause or error) if isinstance(error, ActivityError) else error
                if (
                    isinstance(cause, ApplicationError)
                    and cause.type == refusals.CATALOG_UNAVAILABLE
                ):
                    # A pause between rounds keeps a long outage from filling the history
                    # (each round is a few events; continue-as-new waits for the pass).
                    pause = min(CATALOG_OUTAGE_MAX_PAUSE, 2.0**outage_rounds)
                    outage_rounds += 1
                    workflow.logger.warning(
                        "pass %d: %s; again in %.0f s", self.state.pass_no, cause, pause
                    )
                    await workflow.sleep(pause)
                    continue
                await self._split_failed_pass(
                    request_batches, events, cause, (*split_from, pass_no)
                )
                return
        self.passes_this_run += 1
        if result.events_not_applied:
            # Back to the front of the buffer, in their order: the next pass applies them.
            again = [events[i] for i in result.events_not_applied]
            self.state.pending[:0] = again
            self._reindex()
        self.state.version = max(self.state.version, result.version)
        self.state.last_pass_ms = (workflow.now() - started).total_seconds() * 1000
        self.state.next_liveness_deadline = result.next_liveness_deadline
        self.starts_waiting = result.starts_waiting
        for batch, answer in zip(request_batches, result.responses, strict=True):
            self._answer(batch, answer)
        if self.query_waiters:
            rows = {row["id"]: row for row in result.watched_queries}
            for waiter in self.query_waiters:
                waiter.report(pass_no, rows)
        for action in result.actions:
            self._start_action(action)
        self._show_pass(result, requests, len(events))

    def _answer(self, batch: RequestBatch, answer: str) -> None:
        if batch.whole is None:
            batch.answer = answer
            self.pending_requests -= len(batch.ids)
            return
        # A part of a batch split to find a failing request: the whole answers once all do.
        whole = batch.whole.part_answered(batch, answer)
        if whole is not None:
            self.pending_requests -= len(whole.ids)

    async def _split_failed_pass(
        self,
        request_batches: list[RequestBatch],
        events: list[PendingMessage],
        cause: BaseException,
        split_from: tuple[int, ...],
    ) -> None:
        """Run each half of a pass that failed for good as a pass of its own; ``split_from``
        is the failed pass's number after those it was itself split from (a half's pass
        applies nothing again if one of them committed after all: :class:`PassInput`)."""
        reason = f"{type(cause).__name__}: {cause}"
        parts = halves(request_batches, events)
        workflow.logger.error(
            "pass %d failed for good (%s); %s",
            self.state.pass_no,
            reason[:500],
            "splitting it" if parts else "setting its message aside",
        )
        if parts:
            for part_batches, part_events in parts:
                await self._apply(part_batches, part_events, split_from)
        else:
            await self._set_aside(request_batches, events, reason)

    async def _set_aside(
        self, request_batches: list[RequestBatch], events: list[PendingMessage], reason: str
    ) -> None:
        """Answer the one message that fails a pass on its own (a request: ``INTERNAL`` with a
        reference) or drop it (an event), and keep it in the catalog for inspection."""
        if not request_batches and not events:
            # A pass of no message failed (what it reports to waiters, say): nothing to set
            # aside, and unpacking a message here would fail every workflow task of the run.
            return
        reference = f"p{self.state.pass_no}-{str(workflow.uuid4())[:8]}"
        answer: Response | None = None
        if request_batches:
            [batch] = request_batches
            message_id = batch.ids[0]
            kind, body = only_envelope(batch)
            answer = Response(
                id=message_id,
                ok=False,
                error_code=ErrorCode.INTERNAL,
                error_message=(
                    "the coordinator could not apply this request: its pass failed every "
                    f"attempt, even alone; it was kept aside as {reference} "
                    "(streamctl quarantine)"
                ),
                version=self.state.version,
            )
            self._answer(batch, dumps([answer]))
        else:
            [pending] = events
            message_id, kind, body = (
                pending.envelope.id,
                pending.envelope.kind,
                pending.envelope.body,
            )
        try:
            await workflow.execute_activity_method(
                CatalogActivities.quarantine_message,
                QuarantineInput(
                    message_id=str(message_id),
                    kind=str(kind),
                    body=repr(body)[:65536],
                    reference=reference,
                    error=reason[:4096],
                    answer=answer,
                ),
                start_to_close_timeout=timedelta(seconds=self.state.config.pass_timeout),
                retry_policy=RetryPolicy(maximum_attempts=3),
            )
        except ActivityError as failure:
            workflow.logger.error("could not keep %s aside: %s", reference, failure)

    def _show_pass(self, result: PassResult, requests: int, events: int) -> None:
        """Tell the Web UI about the pass (:mod:`streamctl.workflows.web_ui`): current details
        always (no history event), search attributes only those that changed (one event)."""
        workflow.set_current_details(
            pass_details(
                PassFacts(
                    pass_no=self.state.pass_no,
                    duration_ms=self.state.last_pass_ms,
                    requests=requests,
                    events=events,
                    changes=result.changes,
                    version=self.state.version,
                    pending_requests=self.pending_requests,
                    pending_events=len(self.state.pending),
                    actions=[action.description for action in self.actions_under_way.values()],
                    run=self.state.runs,
                    passes_this_run=self.passes_this_run,
                    agents_by_state=result.agents_by_state,
                    queries_by_state=result.queries_by_state,
                )
            )
        )
        if self.state.config.search_attributes:
            updates = self.web_ui.updates(
                self.state.version, result.agents_by_state, result.queries_by_state
            )
            if updates:
                workflow.upsert_search_attributes(updates)

    # --- agent actions ---------------------------------------------------------------------

    def _start_action(self, action: AgentAction) -> None:
        """Run ``action`` now, or after those before it when ``max_actions_under_way`` run or
        this workflow task has scheduled :data:`~streamctl.limits.MAX_ACTIONS_PER_TASK`.

        Only a pass's stops (a drop of many queries), follow-up actions and the actions a run
        carries ever wait: a pass decides no more starts than :meth:`_action_room`. Histories
        that never reached the bound replay unchanged (no command differs below it)."""
        if self.serve_while_draining:
            self.actions_waiting.append(action)
            self._release_waiting_actions()
            return
        if len(self.actions_under_way) >= self._max_actions_under_way():
            self.actions_waiting.append(action)
            return
        self._launch(action)

    def _launch(self, action: AgentAction) -> None:
        task = asyncio.create_task(self._run_action(action))
        self.actions_under_way[task] = action
        task.add_done_callback(self._action_ended)

    def _action_ended(self, task: asyncio.Task[None]) -> None:
        self.actions_under_way.pop(task, None)
        if self.serve_while_draining:
            self._release_waiting_actions()
            return
        while self.actions_waiting and (
            len(self.actions_under_way) < self._max_actions_under_way()
        ):
            self._start_action(self.actions_waiting.pop(0))

    def _release_waiting_actions(self) -> None:
        """Schedule waiting actions, in order, while there is room under way and this workflow
        task has scheduled fewer than :data:`~streamctl.limits.MAX_ACTIONS_PER_TASK`; the
        loop comes back for the rest (:meth:`_idle_timeout`). A closing run schedules only
        what it could not carry (past :data:`~streamctl.limits.MAX_CARRIED_WAITING_ACTIONS`):
        an activity completing while it closes would make Temporal refuse its
        continue-as-new."""
        excess = len(self.actions_waiting) - MAX_CARRIED_WAITING_ACTIONS
        if self.closing and excess <= 0:
            return
        task = workflow.info().get_current_history_length()  # the same all through one task
        if task != self.launch_task:
            self.launch_task, self.launched_in_task = task, 0
        room = self._max_actions_under_way() - len(self.actions_under_way)
        count = min(room, MAX_ACTIONS_PER_TASK - self.launched_in_task, len(self.actions_waiting))
        if self.closing:
            count = min(count, excess)
        if count <= 0:
            return
        releasing = self.actions_waiting[:count]
        del self.actions_waiting[:count]
        self.launched_in_task += count
        for action in releasing:
            self._launch(action)

    def _actions_to_release(self) -> bool:
        """Actions wait that only this task's :data:`~streamctl.limits.MAX_ACTIONS_PER_TASK`
        holds back."""
        return (
            self.serve_while_draining
            and not self.closing
            and bool(self.actions_waiting)
            and len(self.actions_under_way) < self._max_actions_under_way()
        )

    async def _quiet_for_continue_as_new(self) -> bool:
        """Whether the run may continue as new in the current workflow task.

        Temporal refuses a continue-as-new (``UnhandledCommand``) when a signal arrived while
        its workflow task ran, and the worker, whose cached run issued a command that did not
        happen, replays the whole run for the next task. Continuing as new from that replay,
        which takes seconds in a long run, is refused again whenever a signal arrives meanwhile:
        under a steady stream of events no attempt ever succeeded and the run grew until its
        workflow tasks timed out (``bench scale``). So the run continues as new only in a task
        that began with nothing but a short timer's firing since it was armed: a task of a
        cached run, done in milliseconds. After a refusal, the replaying task sees the signals
        that arrived (a longer history) and arms the timer again instead, which it can
        complete. Deterministic: it reads only the history's length. A task that arms the
        timer while it also sends other commands (a pass's actions, an answered update) spends
        an attempt; the next timer is armed by the task that fired the last one, which sends
        nothing else. After :data:`QUIET_ATTEMPTS` timers it continues as new from the next
        timer's task that is calm (senders that never pause: the README's Temporal settings):
        one that began with at most :data:`CALM_EVENTS` more events than the calmest such task
        of the run. Not from any task: a refused continue-as-new is tried again by a task that
        replays the run, seconds long under load, and under ``bench scale``'s steady events
        every such retry was refused again, until the run hit Temporal's limit of signals per
        run and dropped events. The retry begins with the signals that came during the refused
        task's replay, so it arms a timer instead, and the next try comes from a cached run's
        short task. A run grown to :data:`RUN_LENGTH_BACKSTOP` times ``max_history_events``
        continues as new from any timer's task."""
        if not self.quiet_continue_as_new:
            return True
        self.quiet_attempts += 1
        armed_at = workflow.info().get_current_history_length()
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(lambda: bool(self.request_batches), timeout=QUIET_WAIT)
        if self.request_batches:
            return False  # requests came: they are answered first
        length = workflow.info().get_current_history_length()
        since_armed = length - armed_at
        if since_armed == QUIET_EVENTS:
            return True
        calmest = min(since_armed, self.calmest_timer_task or since_armed)
        self.calmest_timer_task = calmest
        if self.quiet_attempts < QUIET_ATTEMPTS:
            return False
        if not self.calm_continue_as_new or since_armed <= calmest + CALM_EVENTS:
            return True
        backstop = RUN_LENGTH_BACKSTOP * self.state.config.max_history_events
        return length >= min(backstop, RUN_LENGTH_BACKSTOP_EVENTS)

    async def _drain_actions(self) -> None:
        """Wait for the actions under way before continuing as new, up to
        ``action_drain_timeout`` in all: a quiet check that fails comes back here, and must not
        wait the whole timeout again (older runs waited it each time). With
        :data:`SERVE_WHILE_DRAINING_PATCH` the loop has drained before the run closes (the
        deadline is set when draining begins), and this returns at once."""
        timeout = self.state.config.action_drain_timeout
        if self.quiet_continue_as_new:
            now = workflow.now().timestamp()
            if self.drain_deadline is None:
                self.drain_deadline = now + timeout
            timeout = self.drain_deadline - now
            if timeout <= 0 or not self.actions_under_way:
                return
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(lambda: not self.actions_under_way, timeout=timeout)

    def _action_room(self) -> int:
        """How many more start actions the next pass may decide (``PassInput.action_room``).

        No starts while the run drains for continue-as-new: its actions under way then end instead
        of being replaced, so the next run carries (and starts again) few of them. Carrying a
        thousand starts made both workflow tasks around continue-as-new take seconds (every
        payload encoded, the activities scheduled again), and a signal that arrives during
        the closing one makes Temporal refuse it: under a steady stream of events the run
        never ended (``bench scale``). The queries wait for the next run's first pass. A
        replay takes the passes' results from history, so older histories are unaffected."""
        if self.draining:
            return 0
        taken = len(self.actions_under_way) + len(self.actions_waiting)
        return max(0, self._max_actions_under_way() - taken)

    async def _run_action(self, action: AgentAction) -> None:
        """Run one agent action without blocking the loop (:func:`.agent_calls.run_action`);
        its outcome comes back as events into a later pass."""
        outcomes = await run_action(action, self._start_action)
        if outcomes is None:
            return  # a stop that kept failing: the query stays STOPPING
        # Due at once: a query's next step (RUNNING, a restart) should not wait for a batch
        # to fill, so the outcome counts as having waited the whole batching timeout already.
        due = workflow.now().timestamp() - self.state.config.timeout
        for event in outcomes:
            self._enqueue_event(event.to_envelope(f"~{workflow.uuid4()}"), due)

    # --- helpers ---------------------------------------------------------------------------

    def _enqueue_event(self, envelope: Envelope, now: float) -> None:
        key = compaction_key(envelope)
        if key is not None and key in self.compaction_index:
            index = self.compaction_index[key]
            older = self.state.pending[index]
            # Replay-safe: this changes only the merged body (an activity's input), no command.
            merged = merge_events(older.envelope, envelope, now)
            if merged is not None:
                # Keeps the older arrival time: a merged event must not delay its batch. A
                # heartbeat carries its newest arrival inside, which liveness counts from.
                self.state.pending[index] = PendingMessage(
                    merged, older.received_at, _size(merged), older.seq
                )
                return
        if key is not None:
            self.compaction_index[key] = len(self.state.pending)
        self.state.pending.append(PendingMessage(envelope, now, _size(envelope), self._arrival()))

    def _arrival(self) -> int:
        """The next arrival number (``CoordinatorState.arrivals``). Replay-safe: it rides only
        in activity inputs and the carried state, never in a command."""
        self.state.arrivals += 1
        return self.state.arrivals

    def _carried_bytes(self) -> int:
        """About how large the pending events are that continue-as-new would carry."""
        return sum(pending.size for pending in self.state.pending)

    def _reindex(self) -> None:
        self.compaction_index = {}
        for index, pending in enumerate(self.state.pending):
            key = compaction_key(pending.envelope)
            if key is not None:
                self.compaction_index[key] = index

    def _has_pending(self) -> bool:
        return bool(self.state.pending or self.request_batches) or self._wait_due()

    def _wait_due(self) -> bool:
        """A ``wait_query`` that no pass has started for since it began: one runs at once."""
        return any(waiter.since_pass == self.state.pass_no for waiter in self.query_waiters)

    def _batch_full(self) -> bool:
        batch_size = self.state.config.batch_size
        return self.pending_requests >= batch_size or len(self.state.pending) >= batch_size

    def _oldest_arrival(self) -> float:
        arrivals = [p.received_at for p in self.state.pending[:1]]
        arrivals += [b.received_at for b in self.request_batches[:1]]
        return min(arrivals)

    def _closing(self) -> bool:
        """Whether the run refuses new requests and waits: it is about to continue as new."""
        return self.closing if self.serve_while_draining else self.draining

    def _drain_over(self) -> bool:
        """Whether a draining run has waited enough for its actions: none is left under way
        or waiting, or ``action_drain_timeout`` has passed (the next run runs the rest)."""
        if self._no_actions():
            return True
        return self.drain_deadline is not None and workflow.now().timestamp() >= self.drain_deadline

    def _no_actions(self) -> bool:
        """No action is under way or waiting."""
        return not (self.actions_under_way or self.actions_waiting)

    def _idle_over(self) -> bool:
        """What ends the loop's wait when nothing is pending."""
        if self._has_pending():
            return True
        if self.serve_while_draining and self.draining:
            return self._no_actions()
        return self._continue_as_new_due()

    def _idle_timeout(self) -> timedelta | None:
        """How long the loop may wait when nothing is pending: until the liveness deadline, and,
        with :data:`SERVE_WHILE_DRAINING_PATCH`, the drain's deadline and the next release of
        waiting actions."""
        timeout = self._until_liveness_deadline()
        if not self.serve_while_draining:
            return timeout
        waits = [] if timeout is None else [timeout]
        if self.draining and self.drain_deadline is not None:
            left = self.drain_deadline - workflow.now().timestamp()
            waits.append(timedelta(seconds=max(0.001, left)))
        if self._actions_to_release():
            waits.append(timedelta(seconds=ACTION_RELEASE_DELAY))
        return min(waits, default=None)

    def _continue_as_new_due(self) -> bool:
        info = workflow.info()
        if self.defer_for_starts and self.starts_waiting and not self.draining:
            limit = STARTS_DEFER_LIMIT * self.state.config.max_history_events
            if (
                info.get_current_history_length() < min(limit, STARTS_DEFER_MAX_EVENTS)
                and info.get_current_history_size() < STARTS_DEFER_MAX_BYTES
            ):
                return self.passes_this_run >= self.state.config.passes_per_run
        return (
            self.passes_this_run >= self.state.config.passes_per_run
            or info.get_current_history_length() >= self.state.config.max_history_events
            or info.is_continue_as_new_suggested()
        )

    def _until_liveness_deadline(self) -> timedelta | None:
        deadline = self.state.next_liveness_deadline
        if deadline is None:
            return None
        return timedelta(seconds=max(0.001, deadline - workflow.now().timestamp() + 0.001))

    def _check_liveness_deadline(self) -> None:
        deadline = self.state.next_liveness_deadline
        now = workflow.now().timestamp()
        if deadline is not None and now >= deadline:
            self.state.next_liveness_deadline = None  # the pass answers the next one
            # Only the part of the delay in which no workflow task ran is a stall: a busy
            # coordinator sees its timers late (a pass runs first), yet hears every heartbeat
            # meanwhile. Counting that delay as a stall credited dead agents with it (and at
            # least half a suspect interval) at every late check: under bench scale's load
            # they were declared DEAD after 74 s instead of dead_after's 30.
            heard = self._heard_before(now)
            stalled = now - max(deadline, heard if heard is not None else deadline)
            self._enqueue_liveness_check(late_by=stalled)

    def _heard(self) -> None:
        """Note that a workflow task runs now (a message arrived, a pass returned). Every signal
        sent before a workflow task starts is delivered in it, so the coordinator heard its
        agents then; the time between two tasks is time it may have been deaf (its workers or
        the Temporal server down)."""
        now = workflow.now().timestamp()
        if self.state.heard_at != now:
            self.state.heard_before = self.state.heard_at
            self.state.heard_at = now

    def _heard_before(self, now: float) -> float | None:
        """When the latest workflow task before the current one ran (None: none seen)."""
        if self.state.heard_at is not None and self.state.heard_at < now:
            return self.state.heard_at
        return self.state.heard_before

    def _enqueue_liveness_check(self, late_by: float = 0.0) -> None:
        # late_by only rides in the body: replaying an older history runs the same commands.
        envelope = CheckLiveness(late_by=round(late_by, 3)).to_envelope(
            f"~liveness-{self.state.pass_no}"
        )
        self.state.pending.append(
            PendingMessage(envelope, workflow.now().timestamp(), _size(envelope), self._arrival())
        )

    def _forget_old_senders(self) -> None:
        horizon = workflow.now().timestamp() - SENDER_MEMORY_SECONDS
        for sender, seen in list(self.state.sender_seen_at.items()):
            if seen < horizon:
                self.state.sender_seen_at.pop(sender, None)
                self.state.sender_seqs.pop(sender, None)
        self.sender_bytes = None

    def _max_actions_under_way(self) -> int:
        """``max_actions_under_way``, at most :data:`MAX_ACTIONS_UNDER_WAY` (Temporal fails the
        workflow tasks of a run with more than 2,000 pending activities); a run recorded with
        a larger one before it was capped replays with it."""
        configured = self.state.config.max_actions_under_way
        if configured > MAX_ACTIONS_UNDER_WAY and workflow.patched("bounded-actions-under-way"):
            return MAX_ACTIONS_UNDER_WAY
        return configured

    def _remember_sender(self, sender: str, seq: int, now: float) -> None:
        """Note ``sender``'s batch ``seq``, within :data:`MAX_CARRIED_SENDER_BYTES`: past it, the
        sender heard from least recently (by ``sender_seen_at``'s times: the maps' order does
        not survive continue-as-new, whose JSON sorts their keys) is forgotten. A forgotten
        sender's next batch is taken as new, so only a batch it sends again after that long
        could count twice."""
        seqs, seen_at = self.state.sender_seqs, self.state.sender_seen_at
        known = sender in seen_at
        seqs[sender] = seq
        seen_at[sender] = now
        if known or not workflow.patched("bounded-sender-memory"):
            return
        if self.sender_bytes is None:
            self.sender_bytes = sum(_sender_bytes(name) for name in seen_at)
        else:
            self.sender_bytes += _sender_bytes(sender)
        while self.sender_bytes > MAX_CARRIED_SENDER_BYTES and len(seen_at) > 1:
            oldest = min(seen_at, key=seen_at.__getitem__)
            del seen_at[oldest]
            seqs.pop(oldest, None)
            self.sender_bytes -= _sender_bytes(oldest)


def _sender_bytes(sender: str) -> int:
    """What one remembered sender takes in the carried state at most: its name in both maps as
    JSON writes it (escaped: six bytes for a control character, twelve for an emoji), with a
    64-bit number or a timestamp each and the punctuation around them."""
    return 2 * (len(json.dumps(sender)) + 32)


def _count_refused(channel: str, reason: str) -> None:
    """Count a refused update or a dropped event in the worker's metrics (the SDK's meter is
    replay-safe: a replay counts nothing again)."""
    workflow.metric_meter().create_counter(
        "streamctl_refused_messages",
        "Update batches refused and events dropped by the coordinator workflow as malformed "
        "or too large (the reason is in the worker's log).",
    ).add(1, {"channel": channel, "reason": reason})
