"""The coordinator workflow: the message bus in front of the catalog.

Protocol
--------
* Clients send requests with the ``submit(ids, requests)`` update: the request ids and the list
  of request :class:`Envelope` objects; the update returns the list of :class:`Response`
  objects, one per request, in order. Events travel in the ``events`` signal (an
  :class:`EventBatch`). The ``status`` query reports snapshot version, pending count, passes
  run and the last pass's duration. The ``wait_query(query_id, states, timeout)`` update
  returns once a pass reports the query in one of ``states`` (:mod:`.query_waits`).
* The workflow buffers request batches and events in arrival order (:mod:`.message_buffer`)
  and runs a **pass** when ``batch_size`` messages are pending or ``timeout`` has passed since
  the oldest pending one (a wait shorter than :data:`MIN_TIMER_WAIT` is not worth a workflow
  timer: the pass runs at once, and what arrives during it forms the next batch). A pass is
  one ``apply_pass`` activity (one catalog transaction); the next batch gathers while it runs.
  A small pass without events (``LOCAL_PASS_MAX_MESSAGES``) runs as a local activity inside
  the workflow task that decides it, which saves an idle request the activity's round trips;
  should that task run again after the pass committed, the catalog hands back the events the
  task gave the same pass number since (``PassResult.events_not_applied``), and they are
  buffered again.
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
* The workflow's collaborators, plain deterministic classes it owns: the buffer
  (:mod:`.message_buffer`), the run's phases (:mod:`.run_phase`: serving, draining, closing),
  the agent actions (:mod:`.action_queue`), the senders' de-duplication
  (:mod:`.sender_memory`), the liveness deadline (:mod:`.liveness_clock`) and the
  continue-as-new gate (:mod:`.continue_as_new`). Every ``workflow.patched`` id is in
  :mod:`.patches`.

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
* No input is retried forever: a pass that fails for good is split until the one message that
  fails alone is found, answered ``INTERNAL`` (a request) or dropped (an event) and kept aside;
  a catalog outage is waited out (:mod:`.pass_runner`).
* Everything carried stays under Temporal's 2 MB payload limit: pass results by the pass's
  own budgets (:mod:`streamctl.limits`), a pass's events by ``MAX_PASS_EVENT_BYTES``, events
  over ``MAX_REQUEST_BYTES`` or nested deeper than ``MAX_NESTING_DEPTH`` are dropped on
  arrival, and continue-as-new waits until the pending events fit
  :data:`~streamctl.limits.MAX_CARRIED_EVENT_BYTES`.
* Agent actions run as activities beside the loop (:mod:`.action_queue`,
  :mod:`.agent_calls`); each outcome comes back as an event into a later pass, and an action is
  never lost across continue-as-new.
* Continue-as-new (:mod:`.continue_as_new`) happens after ``passes_per_run`` passes, at
  ``max_history_events`` or when Temporal suggests it, in two phases (:mod:`.run_phase`).
  **Draining**: the run decides no new starts and waits for its actions under way, up to
  ``action_drain_timeout``, while it goes on answering requests and events. **Closing**: the
  run refuses new updates (``ContinuingAsNew``), answers every accepted request, waits for its
  handlers, and continues as new only from a quiet workflow task, carrying
  :class:`~streamctl.workflows.state.CoordinatorState` to the next run, which begins with a
  pass. No request batch is pending at that point, so no raw payload needs carrying.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from temporalio.common import RawValue

    # The payload converter decodes these modules' dataclasses (the carried state, a pass's
    # input and result) by their type hints, resolved through the sandbox's ``sys.modules``
    # (:mod:`.wire`), which holds only what this file imports: keep them imported here.
    import streamctl.protocol.messages
    import streamctl.protocol.pass_io  # noqa: F401
    from streamctl.activities.pass_activity import CatalogActivities
    from streamctl.limits import (
        ACTION_RELEASE_DELAY,
        MAX_CARRIED_EVENT_BYTES,
        MAX_CARRIED_WAITING_ACTIONS,
        MAX_EVENT_BATCH_BYTES,
        MAX_EVENTS_PER_SIGNAL,
        MAX_NESTING_DEPTH,
        MAX_QUERY_WAIT_SECONDS,
        MAX_REQUEST_BYTES,
    )
    from streamctl.protocol import refusals
    from streamctl.protocol.agent_contract import AgentAction
    from streamctl.protocol.coordinator_config import (
        COORDINATOR_TASK_TIMEOUT,
        CoordinatorConfig,
        CoordinatorStatus,
    )
    from streamctl.raw_payloads import json_payload
    from streamctl.workflows import patches
    from streamctl.workflows.action_queue import ActionQueue
    from streamctl.workflows.agent_calls import run_action
    from streamctl.workflows.continue_as_new import (
        QUIET_WAIT,
        ContinueAsNewGate,
        HistoryFacts,
        carried_state,
    )
    from streamctl.workflows.liveness_clock import LivenessClock, liveness_check
    from streamctl.workflows.message_buffer import MessageBuffer, envelope_size
    from streamctl.workflows.pass_runner import PassRunner
    from streamctl.workflows.query_waits import QueryWait, QueryWaiter
    from streamctl.workflows.run_phase import RunPhaseMachine
    from streamctl.workflows.sender_memory import SENDER_MEMORY_SECONDS, SenderMemory, seq_fits
    from streamctl.workflows.state import CoordinatorInput, CoordinatorState
    from streamctl.workflows.update_checks import check_submit, check_wait_query
    from streamctl.workflows.web_ui import WebUiView, config_memo, waiting_details
    from streamctl.workflows.wire import decode_event_batch, nests_deeper_than

MIN_TIMER_WAIT = 0.02
"""Shorter batching waits run the pass at once: a workflow timer fired 100-200 ms late on the dev
server here, which made an idle coordinator answer in 300 ms instead of 100. Messages that
arrive while a pass runs still form the next batch."""


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
        self.buffer = MessageBuffer(self.state)
        self.phases = RunPhaseMachine()
        self.gate = ContinueAsNewGate(self.state.config)
        self.liveness = LivenessClock(self.state)
        self.senders = SenderMemory(
            self.state.sender_seqs,
            self.state.sender_seen_at,
            bounded=lambda: workflow.patched(patches.BOUNDED_SENDER_MEMORY),
        )
        self.actions = ActionQueue(
            self._run_action,
            self.phases,
            self.state.config.max_actions_under_way,
            bounded=lambda: workflow.patched(patches.BOUNDED_ACTIONS_UNDER_WAY),
            task_number=lambda: workflow.info().get_current_history_length(),
        )
        self.query_waiters: list[QueryWaiter] = []
        self.web_ui = WebUiView(workflow.info().typed_search_attributes)
        self.passes = PassRunner(
            self.state, self.buffer, self.actions, self.gate, self.query_waiters, self.web_ui
        )

    # --- messages in ---------------------------------------------------------------------

    @workflow.update
    async def submit(self, ids: list[str], requests: RawValue) -> RawValue:
        self._heard()
        batch = self.buffer.add_requests(ids, requests.payload, workflow.now().timestamp())
        await workflow.wait_condition(lambda: batch.answer is not None)
        assert batch.answer is not None
        return json_payload(batch.answer.encode())

    @submit.validator
    def validate_submit(self, ids: list[str], requests: RawValue) -> None:
        try:
            check_submit(
                ids, requests.payload, self.state.config, self.phases, self.buffer.pending_requests
            )
        except ApplicationError as refusal:
            if refusal.type == refusals.INVALID_BATCH:
                _count_refused("submit", "invalid")
            raise

    @workflow.update
    async def wait_query(self, query_id: int, states: list[str], timeout: float) -> QueryWait:
        """Until a pass reports the query in one of ``states`` (:mod:`.query_waits`)."""
        waiter = QueryWaiter(query_id, frozenset(states), since_pass=self.state.pass_no)
        self.query_waiters.append(waiter)
        try:
            await workflow.wait_condition(
                lambda: waiter.settled or self.phases.closing,
                timeout=min(timeout, MAX_QUERY_WAIT_SECONDS),
            )
        except TimeoutError:
            pass
        finally:
            self.query_waiters.remove(waiter)
        return waiter.answer

    @wait_query.validator
    def validate_wait_query(self, query_id: int, states: list[str], timeout: float) -> None:
        try:
            check_wait_query(query_id, states, timeout, self.phases, len(self.query_waiters))
        except ApplicationError as refusal:
            if refusal.type == refusals.INVALID_BATCH:
                _count_refused("wait_query", "invalid")
            raise

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
        if self.senders.delivered_before(batch.sender, batch.seq):
            return
        if not seq_fits(batch.seq) and workflow.patched(patches.BOUNDED_SENDER_MEMORY):
            workflow.logger.warning("events signal: seq %.40s... is beyond 64 bits", batch.seq)
            _count_refused("events", "malformed")
            return
        events = batch.events  # a list of Envelopes: decode_event_batch checked it
        deep = [e for e in events if nests_deeper_than(e.body, MAX_NESTING_DEPTH)]
        if deep and workflow.patched(patches.BOUNDED_EVENT_NESTING):
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
        size = sum(envelope_size(e) for e in events)
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
        self.senders.remember(batch.sender, batch.seq, now)
        for envelope in events:
            envelope_bytes = envelope_size(envelope)
            if envelope_bytes > MAX_REQUEST_BYTES and workflow.patched(
                patches.DROP_OVERSIZED_EVENTS
            ):
                _count_refused("events", "too_large")
                workflow.logger.warning(
                    "TOO_LARGE: dropping event %s of %s: ~%d bytes, the limit is %d",
                    envelope.id,
                    batch.sender,
                    envelope_bytes,
                    MAX_REQUEST_BYTES,
                )
                continue
            self.buffer.add_event(envelope, now)

    @workflow.query
    def status(self) -> CoordinatorStatus:
        return CoordinatorStatus(
            version=self.state.version,
            pending=len(self.state.pending) + self.buffer.pending_requests,
            pending_requests=self.buffer.pending_requests,
            passes_run=self.state.pass_no,
            passes_this_run=self.gate.passes_this_run,
            last_pass_ms=self.state.last_pass_ms,
            draining=self.phases.ending,
            runs=self.state.runs,
            config=self.state.config,
        )

    # --- the loop --------------------------------------------------------------------------

    @workflow.run
    async def run(self, workflow_input: CoordinatorInput) -> None:
        config = self.state.config
        continued = self.state.position_loaded
        if not self.state.position_loaded:
            position = await workflow.execute_activity_method(
                CatalogActivities.catalog_position,
                workflow.info().workflow_id,
                start_to_close_timeout=timedelta(seconds=config.pass_timeout),
                retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=5)),
            )
            self.state.version = max(self.state.version, position.version)
            self.state.pass_no = max(self.state.pass_no, position.last_pass_no)
            self.state.position_loaded = True
            self._enqueue_liveness_check()
        serving = workflow.patched(patches.SERVE_WHILE_DRAINING)
        self.phases.serve_while_draining = serving
        self.gate.defer_for_starts = serving and workflow.patched(
            patches.DEFER_CONTINUE_AS_NEW_FOR_STARTS
        )
        for action in self.state.actions_under_way:  # cut short by the previous run's end
            self.actions.start(action)
        self.state.actions_under_way = []
        workflow.set_current_details(waiting_details(self.state.version, self.state.runs))
        # Asked once, at the start: its marker is then no event between a quiet check's
        # timer and the task that fires it.
        self.gate.quiet = workflow.patched(patches.QUIET_CONTINUE_AS_NEW)
        self.gate.calm = self.gate.quiet and workflow.patched(patches.CALM_CONTINUE_AS_NEW)
        if self.gate.quiet and continued:
            # The draining run decided no starts: a pass now starts what waits, rather than
            # the next message or liveness deadline.
            self._enqueue_liveness_check()

        while True:
            if serving:
                self.actions.release()
            await self._gather()
            if self._continue_as_new_due():
                now = workflow.now().timestamp()
                self.phases.continue_as_new_due(now, config.action_drain_timeout)
            if self._has_pending():
                await self._run_pass()
            now = workflow.now().timestamp()
            if self.phases.draining and self.phases.drain_over(now, self.actions.empty()):
                self.phases.drained()
            if self.phases.closing and not self.buffer.request_batches:
                if self.buffer.carried_bytes() > MAX_CARRIED_EVENT_BYTES and workflow.patched(
                    patches.BOUNDED_CONTINUE_AS_NEW_STATE
                ):
                    continue  # pass the pending events first: the state must fit one payload
                await workflow.wait_condition(workflow.all_handlers_finished)
                await self._drain_actions()
                if len(self.actions.waiting) > MAX_CARRIED_WAITING_ACTIONS:
                    await workflow.wait_condition(
                        lambda: len(self.actions.waiting) <= MAX_CARRIED_WAITING_ACTIONS
                    )
                if not self.buffer.request_batches and await self._quiet_for_continue_as_new():
                    break

        self.senders.forget_older_than(workflow.now().timestamp() - SENDER_MEMORY_SECONDS)
        # The memo rides on the command (no event of its own) and stays the run's configuration.
        workflow.continue_as_new(
            CoordinatorInput(state=carried_state(self.state, self.actions.carried())),
            memo=config_memo(config),
            task_timeout=COORDINATOR_TASK_TIMEOUT,
        )

    async def _gather(self) -> None:
        """Wait until a batch is due: full, old enough, a liveness deadline, or closing; or,
        with nothing pending, until continue-as-new is due, the drain is over, or waiting
        actions may be scheduled."""
        self._heard()  # a pass returned: this workflow task runs
        config = self.state.config
        if not self._has_pending() and not self.phases.closing:
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(self._idle_over, timeout=self._idle_timeout())
        self._check_liveness_deadline()
        if not self._has_pending() or self.phases.closing or self._wait_due():
            return
        waited = workflow.now().timestamp() - self.buffer.oldest_arrival()
        remaining = config.timeout - waited
        if not self.buffer.full(config.batch_size) and remaining > MIN_TIMER_WAIT:
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(
                    lambda: self.buffer.full(config.batch_size), timeout=remaining
                )

    async def _run_pass(self) -> None:
        config = self.state.config
        request_batches, events = self.buffer.take_pass(
            config.batch_size,
            config.max_batch_bytes,
            bounded_events=lambda: workflow.patched(patches.BOUNDED_PASS_EVENTS),
        )
        await self.passes.run(request_batches, events)

    async def _drain_actions(self) -> None:
        """Wait for the actions under way before continuing as new, up to
        ``action_drain_timeout`` in all: a quiet check that fails comes back here, and must not
        wait the whole timeout again (older runs waited it each time). Serving while draining,
        the loop has drained before the run closes, and this returns at once."""
        timeout = self.state.config.action_drain_timeout
        if self.gate.quiet:
            timeout = self.phases.drain_time_left(workflow.now().timestamp(), timeout)
            if timeout <= 0 or not self.actions.under_way:
                return
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(lambda: not self.actions.under_way, timeout=timeout)

    async def _quiet_for_continue_as_new(self) -> bool:
        """Whether the run may continue as new in the current workflow task: one that began
        with nothing but a short timer's firing since it was armed (:mod:`.continue_as_new`)."""
        if not self.gate.quiet:
            return True
        self.gate.arm_quiet_check()
        armed_at = workflow.info().get_current_history_length()
        with contextlib.suppress(TimeoutError):
            await workflow.wait_condition(
                lambda: bool(self.buffer.request_batches), timeout=QUIET_WAIT
            )
        if self.buffer.request_batches:
            return False  # requests came: they are answered first
        return self.gate.quiet_after_timer(armed_at, workflow.info().get_current_history_length())

    async def _run_action(self, action: AgentAction) -> None:
        """Run one agent action without blocking the loop (:func:`.agent_calls.run_action`);
        its outcome comes back as events into a later pass."""
        outcomes = await run_action(action, self.actions.start)
        if outcomes is None:
            return  # a stop that kept failing: the query stays STOPPING
        # Due at once: a query's next step (RUNNING, a restart) should not wait for a batch
        # to fill, so the outcome counts as having waited the whole batching timeout already.
        due = workflow.now().timestamp() - self.state.config.timeout
        for event in outcomes:
            self.buffer.add_event(event.to_envelope(f"~{workflow.uuid4()}"), due)

    # --- helpers ---------------------------------------------------------------------------

    def _has_pending(self) -> bool:
        return self.buffer.has_messages() or self._wait_due()

    def _wait_due(self) -> bool:
        """A ``wait_query`` that no pass has started for since it began: one runs at once."""
        return any(waiter.since_pass == self.state.pass_no for waiter in self.query_waiters)

    def _idle_over(self) -> bool:
        """What ends the loop's wait when nothing is pending."""
        if self._has_pending():
            return True
        if self.phases.serve_while_draining and self.phases.ending:
            return self.actions.empty()
        return self._continue_as_new_due()

    def _idle_timeout(self) -> timedelta | None:
        """How long the loop may wait when nothing is pending: until the liveness deadline, and,
        serving while draining, the drain's deadline and the next release of waiting actions."""
        now = workflow.now().timestamp()
        timeout = self.liveness.until_deadline(now)
        if not self.phases.serve_while_draining:
            return timeout
        waits = [] if timeout is None else [timeout]
        drain_deadline = self.phases.drain_deadline
        if self.phases.ending and drain_deadline is not None:
            waits.append(timedelta(seconds=max(0.001, drain_deadline - now)))
        if self.actions.to_release():
            waits.append(timedelta(seconds=ACTION_RELEASE_DELAY))
        return min(waits, default=None)

    def _continue_as_new_due(self) -> bool:
        info = workflow.info()
        history = HistoryFacts(
            length=info.get_current_history_length(),
            size=info.get_current_history_size(),
            continue_as_new_suggested=info.is_continue_as_new_suggested(),
        )
        return self.gate.due(history, ending=self.phases.ending)

    def _heard(self) -> None:
        """Note that a workflow task runs now (a message arrived, a pass returned): see
        :mod:`.liveness_clock`."""
        self.liveness.heard(workflow.now().timestamp())

    def _check_liveness_deadline(self) -> None:
        late_by = self.liveness.overdue(workflow.now().timestamp())
        if late_by is not None:
            self._enqueue_liveness_check(late_by)

    def _enqueue_liveness_check(self, late_by: float = 0.0) -> None:
        envelope = liveness_check(self.state.pass_no, late_by)
        self.buffer.add_event(envelope, workflow.now().timestamp())


def _count_refused(channel: str, reason: str) -> None:
    """Count a refused update or a dropped event in the worker's metrics (the SDK's meter is
    replay-safe: a replay counts nothing again)."""
    workflow.metric_meter().create_counter(
        "streamctl_refused_messages",
        "Update batches refused and events dropped by the coordinator workflow as malformed "
        "or too large (the reason is in the worker's log).",
    ).add(1, {"channel": channel, "reason": reason})
