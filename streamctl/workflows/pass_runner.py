"""One pass of the coordinator run over a batch of messages: its attempts, its split when it
fails for good, and what its result does to the run.

Protocol
--------
* A pass is one ``apply_pass`` activity (one catalog transaction) over the batch the buffer
  gave (:meth:`~.message_buffer.MessageBuffer.take_pass`), numbered ``pass_no + 1``. It lists
  the queries waited on (``watched_queries``: :mod:`.query_waits`) and the room for starts the
  action queue has (``action_room``: :mod:`.action_queue`).
* A small pass without events (:data:`~streamctl.limits.LOCAL_PASS_MAX_MESSAGES`) that was not
  split runs as a local activity (:data:`~.patches.LOCAL_SMALL_PASSES`). It carries no event: a
  local activity's input is not recorded, and the workflow task that runs one again may take in
  events that arrived since; the catalog tells those apart from the pass that committed only by
  that pass having had none (``PassResult.events_not_applied``, put back into the buffer).
* With :data:`~.patches.PASS_ISOLATION`, a pass ends after ``PASS_ATTEMPTS`` attempts; one that
  failed for good (every attempt timed out, crashed its process, or failed some other way that
  the pass's own savepoints could not contain) is split in halves
  (:func:`~.request_batches.halves`), each run as a pass of its own, down to the one message
  that fails alone, which is answered ``INTERNAL`` (a request) or dropped (an event) and kept
  aside by ``quarantine_message``. A half names the passes it was split from
  (``PassInput.split_from``): when one of them committed after all, the half answers from that
  pass's stored answers and applies nothing again. A catalog that cannot be reached
  (``CatalogUnavailable``) is not a message's fault: that pass is tried again, as long as the
  outage lasts, with pauses of 1, 2, 4 ... up to ``CATALOG_OUTAGE_MAX_PAUSE`` seconds between
  rounds.
* A pass's result moves the snapshot version and the liveness deadline, answers its request
  batches, reports to the waiters, starts its agent actions and is shown in the Web UI
  (:mod:`.web_ui`).

Workflow code: deterministic; its activities, timers and ``workflow.patched`` calls happen in
the order they always did.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    from streamctl import limits
    from streamctl.activities.pass_activity import CatalogActivities
    from streamctl.compact_json import dumps
    from streamctl.error_codes import ErrorCode
    from streamctl.protocol import refusals
    from streamctl.protocol.messages import Response
    from streamctl.protocol.pass_io import PassInput, PassResult, PendingMessage, QuarantineInput
    from streamctl.raw_payloads import join_request_batches
    from streamctl.workflows import patches
    from streamctl.workflows.action_queue import ActionQueue
    from streamctl.workflows.continue_as_new import ContinueAsNewGate
    from streamctl.workflows.message_buffer import MessageBuffer
    from streamctl.workflows.query_waits import QueryWaiter
    from streamctl.workflows.request_batches import RequestBatch, halves, only_envelope
    from streamctl.workflows.state import CoordinatorState
    from streamctl.workflows.web_ui import PassFacts, WebUiView, pass_details, pass_summary

PASS_ATTEMPTS = 4
"""Attempts of a pass before it is split (:data:`~.patches.PASS_ISOLATION`; older runs retried
forever)."""
CATALOG_OUTAGE_MAX_PAUSE = 60.0
"""Seconds between rounds of a pass whose catalog cannot be reached (1, 2, 4 ... up to this):
about 300 history events an hour of outage."""


def outage_pause(rounds: int) -> float:
    """Seconds to wait after ``rounds`` earlier rounds of a pass failed on the catalog's
    outage."""
    # The exponent is capped: 2.0**1024 overflows, and an outage may last that many rounds.
    return min(CATALOG_OUTAGE_MAX_PAUSE, 2.0 ** min(rounds, 64))


class PassRunner:
    """Runs the passes of one coordinator run (the workflow owns it and its collaborators)."""

    def __init__(
        self,
        state: CoordinatorState,
        buffer: MessageBuffer,
        actions: ActionQueue,
        gate: ContinueAsNewGate,
        query_waiters: list[QueryWaiter],
        web_ui: WebUiView,
    ) -> None:
        self.state = state
        self.buffer = buffer
        self.actions = actions
        self.gate = gate
        self.query_waiters = query_waiters
        self.web_ui = web_ui

    async def run(
        self,
        request_batches: list[RequestBatch],
        events: list[PendingMessage],
        split_from: tuple[int, ...] = (),
    ) -> None:
        """One pass over these messages (split when it fails for good; tried again while the
        catalog cannot be reached)."""
        config = self.state.config
        requests = sum(len(batch.ids) for batch in request_batches)
        isolating = workflow.patched(patches.PASS_ISOLATION)
        self.state.pass_no += 1
        pass_no = self.state.pass_no
        watched = sorted({waiter.query_id for waiter in self.query_waiters})
        # A split pass is looking for a message that fails (times out, crashes its process):
        # it runs as an activity, as the pass it was split from did.
        local = (
            not split_from
            and not events
            and requests <= limits.LOCAL_PASS_MAX_MESSAGES
            and workflow.patched(patches.LOCAL_SMALL_PASSES)
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
                            action_room=self.actions.room_for_starts(),
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
                    pause = outage_pause(outage_rounds)
                    outage_rounds += 1
                    workflow.logger.warning(
                        "pass %d: %s; again in %.0f s", self.state.pass_no, cause, pause
                    )
                    await workflow.sleep(pause)
                    continue
                await self._split(request_batches, events, cause, (*split_from, pass_no))
                return
        self._take_result(result, pass_no, started, request_batches, events)

    def _take_result(
        self,
        result: PassResult,
        pass_no: int,
        started: datetime,
        request_batches: list[RequestBatch],
        events: list[PendingMessage],
    ) -> None:
        """What a pass's result does to the run."""
        self.gate.pass_done(result.starts_waiting)
        if result.events_not_applied:
            # Back to the front of the buffer, in their order: the next pass applies them.
            self.buffer.put_back([events[i] for i in result.events_not_applied])
        self.state.version = max(self.state.version, result.version)
        self.state.last_pass_ms = (workflow.now() - started).total_seconds() * 1000
        self.state.next_liveness_deadline = result.next_liveness_deadline
        for batch, answer in zip(request_batches, result.responses, strict=True):
            self.buffer.answer(batch, answer)
        if self.query_waiters:
            rows = {row["id"]: row for row in result.watched_queries}
            for waiter in self.query_waiters:
                waiter.report(pass_no, rows)
        for action in result.actions:
            self.actions.start(action)
        requests = sum(len(batch.ids) for batch in request_batches)
        self._show(result, requests, len(events))

    async def _split(
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
                await self.run(part_batches, part_events, split_from)
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
            self.buffer.answer(batch, dumps([answer]))
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

    def _show(self, result: PassResult, requests: int, events: int) -> None:
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
                    pending_requests=self.buffer.pending_requests,
                    pending_events=len(self.state.pending),
                    actions=self.actions.descriptions(),
                    run=self.state.runs,
                    passes_this_run=self.gate.passes_this_run,
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
