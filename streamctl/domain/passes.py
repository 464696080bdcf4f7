"""The pass activity: one batch of messages, one catalog transaction, one snapshot version.

Order of work inside :func:`apply_pass` (the ``apply_pass`` activity of
:mod:`streamctl.activities.pass_activity` calls it):

1. Claim the pass: insert its ``snapshot_versions`` row first. A second attempt of the same
   pass (a retry racing an abandoned attempt) blocks on that row and then fails on its unique
   key, so only one attempt commits; a retry after a commit finds the row and replays.
   A part of a pass that was split after failing for good (``PassInput.split_from``) does
   the same when that pass committed after all: its messages are applied already.
2. Answer requests whose id already has a stored response from that response (exactly once
   across client retries and continue-as-new), and repeats of an id inside the pass from its
   first occurrence; an id that comes again with a different request is refused
   (:mod:`streamctl.domain.request_ids`).
3. Decode the rest; a malformed message gets its error code and nothing else happens for it.
4. Apply in stages (workers, then sources and sinks, then queries), arrival order within a
   stage (the workflow's arrival numbers, ``PassInput.request_batch_seqs`` and
   ``PendingMessage.seq``), each message against the state the previous ones left, by the
   handler its kind maps to in :data:`REQUEST_HANDLERS` / :data:`EVENT_HANDLERS` (the
   handlers live with their entity: :mod:`~streamctl.domain.workers`,
   :mod:`~streamctl.domain.sources`,
   :mod:`~streamctl.domain.sinks`, :mod:`~streamctl.domain.queries`,
   :mod:`~streamctl.domain.statements`, ...). When applying them together fails in a way no
   refusal explains, the pass runs again with one savepoint per message
   (:mod:`~streamctl.domain.isolation`).
5. Write the changelog, the responses (with their apply order) and the entity changes, and
   compute when the next agent's heartbeat age crosses a liveness threshold.

The answers go back as one JSON array per request batch (see :mod:`streamctl.protocol.pass_io`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import asdict
from typing import Any

from sqlalchemy import Engine, delete, func, select
from sqlalchemy.orm import Session

from streamctl.catalog.census import take_census
from streamctl.catalog.models import (
    SnapshotVersion,
    StoredResponse,
)
from streamctl.catalog.store import key_chunks, one_of
from streamctl.catalog.view import CatalogView
from streamctl.domain import (
    explain,
    history,
    quarantine,
    reoptimize,
    sinks,
    sources,
    statements,
    workers,
)
from streamctl.domain import queries as queries_stage
from streamctl.domain.context import EventHandler, PassContext, RequestFailed, RequestHandler
from streamctl.domain.decode import DecodeError, decode
from streamctl.domain.isolation import Isolate, apply_one_by_one, is_transient
from streamctl.domain.pass_output import PassOutput, ask_again
from streamctl.domain.pass_requests import Request, batch_answers, error_response, tally
from streamctl.domain.request_ids import load_stored_requests, reused_id_refusals
from streamctl.lifecycle.query_states import RestartPolicy
from streamctl.lifecycle.worker_states import LivenessPolicy
from streamctl.limits import (
    MAX_PASS_WORK_SECONDS,
    MORE_TO_START_DELAY,
)
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import action_from_json
from streamctl.protocol.messages import Response
from streamctl.protocol.pass_io import (
    CatalogPosition,
    PassInput,
    PassResult,
    PassTally,
)

log = logging.getLogger(__name__)

RESPONSE_RETENTION_SECONDS = 7 * 24 * 3600
PRUNE_EVERY_PASSES = 500


_STORED_ANSWER = (
    StoredResponse.request_id,
    StoredResponse.ok,
    StoredResponse.result,
    StoredResponse.error_code,
    StoredResponse.error_message,
    StoredResponse.version,
)
"""The columns of a stored response, in :class:`Response`'s field order."""


def _load_stored(session: Session, ids: Iterable[str]) -> dict[str, Response]:
    found: dict[str, Response] = {}
    for chunk in key_chunks(session, set(ids)):
        for values in session.execute(
            select(*_STORED_ANSWER).where(one_of(session, StoredResponse.request_id, chunk))
        ):
            found[values[0]] = Response(*values)
    return found


def catalog_position(engine: Engine, workflow_id: str) -> CatalogPosition:
    with Session(engine) as session:
        version = session.scalar(select(func.max(SnapshotVersion.version))) or 0
        last_pass = session.scalar(
            select(func.max(SnapshotVersion.pass_no)).where(
                SnapshotVersion.workflow_id == workflow_id
            )
        )
    return CatalogPosition(version=int(version), last_pass_no=int(last_pass or 0))


def apply_pass(engine: Engine, pass_input: PassInput, batches: list[list[Request]]) -> PassResult:
    """Apply one pass in one transaction: all messages together, or, when that fails in a
    way no refusal explains, again with one savepoint per message (:mod:`.isolation`). A
    failure to reach the catalog (:func:`~.isolation.is_transient`) propagates: the caller
    retries the whole pass and blames no message."""
    # One time for applying requests across both tries: the retry one savepoint at a time
    # comes after a first try that may have used it all (MAX_PASS_WORK_SECONDS).
    work_deadline = time.monotonic() + MAX_PASS_WORK_SECONDS
    try:
        return _transaction(engine, pass_input, batches, False, work_deadline)
    except Isolate as why:
        log.warning(
            "pass %d: %s; applying its messages again, one savepoint each",
            pass_input.pass_no,
            why,
        )
    return _transaction(engine, pass_input, batches, True, work_deadline)


def _transaction(
    engine: Engine,
    pass_input: PassInput,
    batches: list[list[Request]],
    isolate: bool,
    work_deadline: float,
) -> PassResult:
    with Session(engine, autoflush=False, expire_on_commit=False) as session, session.begin():
        return _apply(session, pass_input, batches, isolate, work_deadline)


# ------------------------------------------------------------------------------------


def _apply(
    session: Session,
    pass_input: PassInput,
    batches: list[list[Request]],
    isolate: bool,
    work_deadline: float,
) -> PassResult:
    claimed = session.scalar(
        select(SnapshotVersion).where(
            SnapshotVersion.workflow_id == pass_input.workflow_id,
            SnapshotVersion.pass_no == pass_input.pass_no,
        )
    )
    if claimed is not None:
        return _replay(session, pass_input, batches, claimed)
    if pass_input.split_from:
        # A part of a pass that failed for good, whose last attempt committed all the same:
        # its messages are applied; answer as a retry of that pass would.
        committed = session.scalar(
            select(SnapshotVersion)
            .where(
                SnapshotVersion.workflow_id == pass_input.workflow_id,
                SnapshotVersion.pass_no.in_(pass_input.split_from),
            )
            .order_by(SnapshotVersion.pass_no)
            .limit(1)
        )
        if committed is not None:
            log.warning(
                "pass %d: pass %d, which it holds a part of, committed after all; answering "
                "from it, applying nothing again",
                pass_input.pass_no,
                committed.pass_no,
            )
            return _replay(session, pass_input, batches, committed)

    version = (session.scalar(select(func.max(SnapshotVersion.version))) or 0) + 1
    snapshot = SnapshotVersion(
        version=version,
        pass_no=pass_input.pass_no,
        workflow_id=pass_input.workflow_id,
        committed_at=time.time(),
        requests=0,
        events=0,
        changes=0,
    )
    session.add(snapshot)
    session.flush()
    out = PassOutput(session, snapshot, work_deadline)

    requests = [request for batch in batches for request in batch]
    answers = _load_stored(session, (r.id for r in requests))
    stored_requests = load_stored_requests(session, answers)
    answers = {request_id: out.fitted_stored(answer) for request_id, answer in answers.items()}
    first_of: dict[str, Request] = {}
    work: list[tuple[str, float, m.Message]] = []
    seqs: list[int] = []  # each work item's arrival number, 0 in passes recorded before them

    for request in requests:
        if request.id in answers or request.id in first_of:
            continue  # answered before, or a repeat of an earlier request in this pass
        first_of[request.id] = request
        if request.problem is not None:
            answers[request.id] = error_response(request.id, *request.problem, version)
            continue
        try:
            message = decode(request.envelope, m.REQUEST_TYPES, request.size)  # type: ignore[arg-type]
            work.append((request.id, request.received_at, message))
            seqs.append(request.seq)
        except DecodeError as error:
            answers[request.id] = error_response(request.id, error.code, error.message, version)
    for pending in pass_input.events:
        envelope = pending.envelope
        if not isinstance(envelope.id, str) or not isinstance(envelope.kind, str):
            log.warning("dropping an event without a string id and kind")
            continue  # the workflow drops these already; histories from before may not
        if envelope.kind in m.INTERNAL_EVENT_KINDS and envelope.id[:1] != "~":
            continue  # only the workflow itself ("~"-prefixed ids) may send internal events
        try:
            message = decode(envelope, m.EVENT_TYPES, pending.size)  # type: ignore[arg-type]
            work.append((envelope.id, pending.received_at, message))
            seqs.append(pending.seq)
        except DecodeError as error:
            log.warning("dropping event %s: %s", envelope.id, error.message)

    view = CatalogView(session, version, pass_input.now)
    ctx = PassContext(
        view=view,
        liveness=LivenessPolicy(pass_input.suspect_after, pass_input.dead_after),
        restarts=RestartPolicy(
            max_restarts=pass_input.max_restarts,
            initial_delay=pass_input.restart_delay,
            max_delay=pass_input.restart_max_delay,
        ),
        start_room=pass_input.action_room,
    )
    # Stage by stage; in a stage, in arrival order. The arrival number decides where messages
    # share an arrival time (one workflow task took them in): an event a client sent before a
    # request is applied before it. Passes recorded before the numbers order by time alone.
    ordered = sorted(range(len(work)), key=lambda i: (work[i][2].stage, seqs[i], work[i][1], i))
    if isolate:
        apply_one_by_one(ctx, out, [work[i] for i in ordered], first_of, answers, apply_message)
    else:
        try:
            preload(view, [message for _, _, message in work])
            for index in ordered:
                message_id, received_at, message = work[index]
                response = apply_message(ctx, out, message, message_id, received_at)
                if response is not None:
                    answers[message_id] = response
                    if message_id not in out.unstored:
                        out.answered(first_of[message_id], response)
                out.changed(message_id, ctx.changes)
            # Queries waiting for an agent (new ones, recovering ones whose backoff passed)
            # start.
            ctx.changes.clear()
            queries_stage.schedule(ctx)
            out.changed(f"~schedule-{version}", ctx.changes)
            view.write()
            out.refused_before_applying(first_of, answers)
            out.flush()
        except Exception as error:
            if is_transient(error):
                raise  # the catalog is unreachable: the activity's retry waits it out
            raise Isolate(f"{type(error).__name__}: {error}") from error

    snapshot.requests = len(requests)
    snapshot.events = len(pass_input.events)
    snapshot.changes = out.changes
    snapshot.actions = [asdict(action) for action in ctx.actions] or None
    if pass_input.pass_no % PRUNE_EVERY_PASSES == 0:
        session.execute(
            delete(StoredResponse).where(
                StoredResponse.created_at < time.time() - RESPONSE_RETENTION_SECONDS
            )
        )
    deadline = ctx.view.next_liveness_deadline(pass_input.suspect_after, pass_input.dead_after)
    if ctx.more_to_start:  # queries left waiting for room in a pass's result: soon
        soon = pass_input.now + MORE_TO_START_DELAY
        deadline = soon if deadline is None else min(deadline, soon)
    census = take_census(session)  # after the view was written: the counts of this version
    refusals = reused_id_refusals(batches, stored_requests, version)
    return PassResult(
        version=version,
        responses=batch_answers(batches, answers, refusals),
        next_liveness_deadline=deadline,
        changes=out.changes,
        agents_by_state=census.agents,
        queries_by_state=census.queries,
        watched_queries=queries_stage.watched(view, pass_input.watched_queries),
        actions=ctx.actions,
        starts_waiting=ctx.more_to_start or ctx.left_without_room,
        tally=tally(requests, answers, len(pass_input.events), refusals),
    )


def _replay(
    session: Session,
    pass_input: PassInput,
    batches: list[list[Request]],
    claimed: SnapshotVersion,
) -> PassResult:
    version = claimed.version
    answers = _load_stored(session, (r.id for batch in batches for r in batch))
    refusals = reused_id_refusals(batches, load_stored_requests(session, answers), version)
    out = PassOutput(session, claimed)  # the answer budget: nothing is written
    answers = {request_id: out.fitted_stored(answer) for request_id, answer in answers.items()}
    for request in (r for batch in batches for r in batch):
        if request.id not in answers:  # a read that did not fit the pass's answers
            answers[request.id] = ask_again(request.id, "the answer was not kept", version)
    stored_actions = session.scalar(
        select(SnapshotVersion.actions).where(SnapshotVersion.version == version)
    )
    view = CatalogView(session, version, pass_input.now)
    deadline = view.next_liveness_deadline(pass_input.suspect_after, pass_input.dead_after)
    census = take_census(session)
    # A committed pass with no events applied none of these: its own input had none (a local
    # activity's, given more messages when run again), so they go to the next pass.
    not_applied = list(range(len(pass_input.events))) if claimed.events == 0 else []
    if not_applied:
        log.warning(
            "pass %d: replayed; its %d event(s) were not in the pass that committed as it",
            pass_input.pass_no,
            len(not_applied),
        )
    return PassResult(
        version=version,
        responses=batch_answers(batches, answers, refusals),
        next_liveness_deadline=deadline,
        changes=0,
        events_not_applied=not_applied,
        agents_by_state=census.agents,
        queries_by_state=census.queries,
        watched_queries=queries_stage.watched(view, pass_input.watched_queries),
        replayed=True,
        actions=[action_from_json(data) for data in stored_actions or []],
        # The attempt that committed counted the outcomes; a replay only answers again.
        tally=PassTally(sum(map(len, batches)), len(pass_input.events)),
    )


# --- which handler applies each message kind ---------------------------------------------
# The handlers live with their entity (workers, sources, sinks, queries, ...). Each either
# returns the request's result (plain JSON) and records its changes in the changelog, or raises
# RequestFailed *before* changing anything, so a failed request leaves the catalog as it was.
# Events return nothing. Handlers run in arrival order within a stage, so a batch answers
# exactly as applying its messages one by one would.


def _execute_statement(ctx: PassContext, request: m.ExecuteStatement) -> Any:
    """``ExecuteStatement``: each statement runs as the typed request it stands for, through
    this same table (looked up when it runs), so a statement and its request never disagree."""
    return statements.execute_statement(ctx, request, REQUEST_HANDLERS)


REQUEST_HANDLERS: dict[str, RequestHandler] = {
    m.ListWorkers.kind: workers.list_workers,
    m.GetWorker.kind: workers.get_worker,
    m.DrainWorker.kind: workers.drain_worker,
    m.CreateLogicalSource.kind: sources.create_logical_source,
    m.DropLogicalSource.kind: sources.drop_logical_source,
    m.GetLogicalSource.kind: sources.get_logical_source,
    m.ListLogicalSources.kind: sources.list_logical_sources,
    m.CreatePhysicalSource.kind: sources.create_physical_source,
    m.DropPhysicalSource.kind: sources.drop_physical_source,
    m.GetPhysicalSource.kind: sources.get_physical_source,
    m.ListPhysicalSources.kind: sources.list_physical_sources,
    m.CreateSink.kind: sinks.create_sink,
    m.DropSink.kind: sinks.drop_sink,
    m.GetSink.kind: sinks.get_sink,
    m.ListSinks.kind: sinks.list_sinks,
    m.CreateQuery.kind: queries_stage.create_query,
    m.DropQuery.kind: queries_stage.drop_query,
    m.GetQuery.kind: queries_stage.get_query,
    m.ListQueries.kind: queries_stage.list_queries,
    m.StartQuery.kind: queries_stage.start_query,
    m.StopQuery.kind: queries_stage.stop_query,
    m.ExplainQuery.kind: explain.explain_query,
    m.GetExplanation.kind: explain.get_explanation,
    m.Reoptimize.kind: reoptimize.reoptimize,
    m.ListChanges.kind: history.list_changes,
    m.ListQuarantined.kind: quarantine.list_quarantined,
    m.ExecuteStatement.kind: _execute_statement,
}

EVENT_HANDLERS: dict[str, EventHandler] = {
    m.RegisterWorker.kind: workers.register_worker,
    m.UnregisterWorker.kind: workers.unregister_worker,
    m.Heartbeat.kind: workers.heartbeat,
    m.CheckLiveness.kind: workers.check_liveness,
    m.Statistics.kind: queries_stage.statistics,
    m.QueryStatusChanged.kind: queries_stage.query_status_changed,
    m.SparkPlanExplained.kind: explain.spark_plan_explained,
}

assert set(REQUEST_HANDLERS) == set(m.REQUEST_TYPES), "every request kind needs a handler"
assert set(EVENT_HANDLERS) == set(m.EVENT_TYPES), "every event kind needs a handler"


def preload(view: CatalogView, messages: list[m.Message]) -> None:
    """Load, in a few bulk queries, the rows the batch's messages name."""
    workers: set[str] = set()
    logical: set[str] = set()
    physical: set[int] = set()
    sinks: set[str] = set()
    dropped_logical: set[str] = set()
    dropped_sinks: set[str] = set()
    queries: set[int] = set()
    for message in messages:
        if isinstance(message, m.Statistics | m.QueryStatusChanged):
            # The agents' reports: with 10,000 running queries a pass takes ~1,000 statistics,
            # and a query each read alone was three quarters of its time (bench scale).
            queries.add(message.query_id)
        elif isinstance(
            message,
            m.RegisterWorker | m.UnregisterWorker | m.Heartbeat | m.GetWorker | m.DrainWorker,
        ):
            workers.add(message.name)
        elif isinstance(message, m.CreateLogicalSource | m.DropLogicalSource | m.GetLogicalSource):
            logical.add(message.name)
            if isinstance(message, m.DropLogicalSource):
                dropped_logical.add(message.name)
        elif isinstance(message, m.CreatePhysicalSource):
            logical.add(message.logical_source)
            if message.worker:
                workers.add(message.worker)
        elif isinstance(message, m.DropPhysicalSource | m.GetPhysicalSource):
            physical.add(message.id)
        elif isinstance(message, m.CreateSink | m.DropSink | m.GetSink):
            sinks.add(message.name)
            if isinstance(message, m.DropSink):
                dropped_sinks.add(message.name)
    view.workers.preload(workers)
    view.logical_sources.preload(logical)
    view.physical_sources.preload(physical)
    view.sinks.preload(sinks)
    view.queries.preload(queries)
    # Drops check their dependents; load those for the whole batch at once.
    view.load_physical_sources_of(dropped_logical)
    view.load_queries_reading(dropped_logical)
    view.load_queries_writing(dropped_sinks)


def apply_message(
    ctx: PassContext, out: PassOutput, message: m.Message, message_id: str, received_at: float
) -> Response | None:
    """Apply one decoded message to the view: a request's answer, or None for an event.

    A refusal (:class:`RequestFailed`) is the request's answer; any other exception is the
    caller's to handle (the message may have changed the view half-way). A request that
    comes up after the pass's work time (:data:`~streamctl.limits.MAX_PASS_WORK_SECONDS`) is
    not applied: it is answered ``UNAVAILABLE ... ask again`` and not stored."""
    version = out.snapshot.version
    ctx.changes.clear()
    if isinstance(message, m.Event):
        try:
            EVENT_HANDLERS[message.kind](ctx, message, received_at)
        except RequestFailed as error:
            log.warning("event %s refused: %s", message_id, error.message)
        return None
    if out.out_of_time():
        return out.deferred(message_id, version)
    out.applying()
    try:
        result = REQUEST_HANDLERS[message.kind](ctx, message)
    except RequestFailed as error:
        return error_response(message_id, error.code, error.message, version)
    return out.fitted(Response(id=message_id, ok=True, result=result, version=version), message)
