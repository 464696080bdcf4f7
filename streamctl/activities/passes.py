"""The pass activity: one batch of messages, one catalog transaction, one snapshot version.

Order of work inside :meth:`CatalogActivities.apply_pass`:

1. Claim the pass: insert its ``snapshot_versions`` row first. A second attempt of the same
   pass (a retry racing an abandoned attempt) blocks on that row and then fails on its unique
   key, so only one attempt commits; a retry after a commit finds the row and replays.
2. Answer requests whose id already has a stored response from that response (exactly once
   across client retries and continue-as-new), and repeats of an id inside the pass from its
   first occurrence; an id that comes again with a different request is refused
   (:mod:`streamctl.domain.request_ids`).
3. Decode the rest; a malformed message gets its error code and nothing else happens for it.
4. Apply in stages (workers, then sources and sinks, then queries), arrival order within a
   stage, each message against the state the previous ones left.
5. Write the changelog, the responses (with their apply order) and the entity changes, and
   compute when the next agent's heartbeat age crosses a liveness threshold.

The answers go back as one JSON array per request batch (see :mod:`streamctl.workflows.passes`).
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from functools import partial
from typing import Any, TypeVar

from sqlalchemy import Engine, delete, func, select
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.orm import Session
from temporalio import activity
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from streamctl.activities.decode import DecodeError, body_size, decode
from streamctl.catalog.census import take_census
from streamctl.catalog.fit import ValueDoesNotFit, text_problem
from streamctl.catalog.models import (
    ChangelogEntry,
    QuarantinedMessage,
    SnapshotVersion,
    StoredResponse,
    table_of,
)
from streamctl.catalog.store import bulk_insert, catalog_engine, key_chunks, one_of
from streamctl.catalog.view import CatalogView
from streamctl.compact_json import dumps, loads
from streamctl.domain import handlers
from streamctl.domain import queries as queries_stage
from streamctl.domain.context import Change, PassContext, RequestFailed
from streamctl.domain.request_ids import load_stored_requests, reused_id_refusals
from streamctl.lifecycle.agents import LivenessPolicy
from streamctl.lifecycle.queries import RestartPolicy
from streamctl.limits import (
    MAX_ID_LENGTH,
    MAX_PASS_RESULT_BYTES,
    MAX_REQUEST_BYTES,
    MAX_RESPONSE_BYTES,
    MORE_TO_START_DELAY,
)
from streamctl.workflows import messages as m
from streamctl.workflows.actions import action_from_json
from streamctl.workflows.messages import Envelope, ErrorCode, Response
from streamctl.workflows.passes import (
    CATALOG_UNAVAILABLE,
    CatalogPosition,
    PassInput,
    PassResult,
    PassTally,
    QuarantineInput,
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


class CatalogActivities:
    """Activities that read or write the catalog at ``catalog_url``."""

    def __init__(self, catalog_url: str) -> None:
        self.catalog_url = catalog_url

    @activity.defn(name="catalog_position")
    def catalog_position(self, workflow_id: str) -> CatalogPosition:
        engine = catalog_engine(self.catalog_url)
        with Session(engine) as session:
            version = session.scalar(select(func.max(SnapshotVersion.version))) or 0
            last_pass = session.scalar(
                select(func.max(SnapshotVersion.pass_no)).where(
                    SnapshotVersion.workflow_id == workflow_id
                )
            )
        return CatalogPosition(version=int(version), last_pass_no=int(last_pass or 0))

    @activity.defn(name="apply_pass")
    def apply_pass(self, pass_input: PassInput, requests: RawValue) -> PassResult:
        batches = _request_batches(requests, pass_input.request_batch_arrivals)
        try:
            engine = catalog_engine(self.catalog_url)
            try:
                return self._transaction(engine, pass_input, batches, isolate=False)
            except _Isolate as why:
                log.warning(
                    "pass %d: %s; applying its messages again, one savepoint each",
                    pass_input.pass_no,
                    why,
                )
            return self._transaction(engine, pass_input, batches, isolate=True)
        except Exception as error:
            if _is_transient(error):
                # Not a message's fault: the workflow tries this pass again rather than
                # splitting it to find a message that fails it.
                raise ApplicationError(
                    f"the catalog cannot be reached: {type(error).__name__}: {error}",
                    type=CATALOG_UNAVAILABLE,
                ) from error
            raise

    @activity.defn(name="quarantine_message")
    def quarantine_message(self, item: QuarantineInput) -> None:
        """Keep a message that failed its pass on its own, and store a request's answer so a
        retry of its id gets that answer instead of failing another pass (idempotent)."""
        engine = catalog_engine(self.catalog_url)
        with Session(engine) as session, session.begin():
            known = session.scalar(
                select(QuarantinedMessage.id).where(QuarantinedMessage.reference == item.reference)
            )
            if known is not None:
                return
            version = session.scalar(select(func.max(SnapshotVersion.version))) or 0
            now = time.time()
            kept = _quarantine_row(
                item.message_id, item.kind, version, item.reference, item.error, item.body, now
            )
            bulk_insert(session, table_of(QuarantinedMessage), [kept])
            answer = item.answer
            if answer is None or _id_problem(answer.id) is not None:
                return
            if session.get(StoredResponse, answer.id) is not None:
                return
            bulk_insert(
                session,
                table_of(StoredResponse),
                [
                    {
                        "request_id": answer.id,
                        "version": version,
                        "seq": 0,
                        "kind": _storable(item.kind, 64),
                        "request": {"unstorable": _storable(item.body, 4096)},
                        "ok": False,
                        "result": None,
                        "error_code": answer.error_code,
                        "error_message": answer.error_message,
                        "created_at": now,
                    }
                ],
            )

    def _transaction(
        self, engine: Engine, pass_input: PassInput, batches: list[list[_Request]], isolate: bool
    ) -> PassResult:
        with Session(engine, autoflush=False, expire_on_commit=False) as session, session.begin():
            return self._apply(session, pass_input, batches, isolate)

    # ------------------------------------------------------------------------------------

    def _apply(
        self,
        session: Session,
        pass_input: PassInput,
        batches: list[list[_Request]],
        isolate: bool,
    ) -> PassResult:
        claimed = session.scalar(
            select(SnapshotVersion).where(
                SnapshotVersion.workflow_id == pass_input.workflow_id,
                SnapshotVersion.pass_no == pass_input.pass_no,
            )
        )
        if claimed is not None:
            return self._replay(session, pass_input, batches, claimed.version)

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

        requests = [request for batch in batches for request in batch]
        answers = _load_stored(session, (r.id for r in requests))
        stored_requests = load_stored_requests(session, answers)
        first_of: dict[str, _Request] = {}
        work: list[tuple[str, float, m.Message]] = []

        for request in requests:
            if request.id in answers or request.id in first_of:
                continue  # answered before, or a repeat of an earlier request in this pass
            first_of[request.id] = request
            if request.problem is not None:
                answers[request.id] = _error(request.id, *request.problem, version)
                continue
            try:
                message = decode(request.envelope, m.REQUEST_TYPES, request.size)  # type: ignore[arg-type]
                work.append((request.id, request.received_at, message))
            except DecodeError as error:
                answers[request.id] = _error(request.id, error.code, error.message, version)
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
        )
        ordered = sorted(range(len(work)), key=lambda i: (work[i][2].stage, work[i][1], i))
        out = _PassOutput(session, snapshot)
        if isolate:
            self._apply_one_by_one(ctx, out, [work[i] for i in ordered], first_of, answers)
        else:
            try:
                handlers.preload(view, [message for _, _, message in work])
                for index in ordered:
                    message_id, received_at, message = work[index]
                    response = _apply_message(ctx, out, message, message_id, received_at)
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
                if _is_transient(error):
                    raise  # the catalog is unreachable: the activity's retry waits it out
                raise _Isolate(f"{type(error).__name__}: {error}") from error

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
            responses=_batch_answers(batches, answers, refusals),
            next_liveness_deadline=deadline,
            changes=out.changes,
            agents_by_state=census.agents,
            queries_by_state=census.queries,
            actions=ctx.actions,
            tally=_tally(requests, answers, len(pass_input.events), refusals),
        )

    def _apply_one_by_one(
        self,
        ctx: PassContext,
        out: _PassOutput,
        work: list[tuple[str, float, m.Message]],
        first_of: dict[str, _Request],
        answers: dict[str, Response],
    ) -> None:
        """Apply each message in a savepoint of its own, written at once, so a failure costs
        exactly that message: its savepoint is rolled back, the view is read again from what
        the earlier messages wrote, and the message is answered with an error (a request) or
        dropped (an event), and quarantined, while the rest of the pass commits."""

        def apply_one(message: m.Message, message_id: str, received_at: float) -> Any:
            response = _apply_message(ctx, out, message, message_id, received_at)
            ctx.view.write()
            ctx.view.mark_written()
            if response is not None and message_id not in out.unstored:
                out.answered(first_of[message_id], response)
            out.changed(message_id, ctx.changes)
            return response

        for message_id, received_at, message in work:
            response, error = _in_savepoint(
                out, partial(apply_one, message, message_id, received_at), ctx
            )
            if error is not None:
                request = first_of.get(message_id) if isinstance(message, m.Request) else None
                response = self._quarantine(out, request, message_id, message.kind, message, error)
            if response is not None:
                answers[message_id] = response

        def schedule() -> None:
            ctx.changes.clear()
            queries_stage.schedule(ctx)
            ctx.view.write()
            ctx.view.mark_written()
            out.changed(f"~schedule-{out.snapshot.version}", ctx.changes)

        if _in_savepoint(out, schedule, ctx)[1] is not None:
            log.error(
                "pass version %d: scheduling failed; a later pass tries again", out.snapshot.version
            )
        for request in first_of.values():
            answer = answers[request.id]
            if (
                answer.version != out.snapshot.version
                or out.has_answered(request.id)
                or request.id in out.unstored
            ):
                continue
            _, error = _in_savepoint(out, partial(out.answered, request, answer))
            if error is not None:
                kind = str(request.envelope.kind)
                refused = self._quarantine(
                    out, request, request.id, kind, request.envelope.body, error
                )
                assert refused is not None
                answers[request.id] = refused

    def _quarantine(
        self,
        out: _PassOutput,
        request: _Request | None,
        message_id: str,
        kind: str,
        message: Any,
        error: Exception,
    ) -> Response | None:
        """Answer a message that failed in its own savepoint and keep it for inspection."""
        version = out.snapshot.version
        reference = f"v{version}-{uuid.uuid4().hex[:10]}"
        if isinstance(error, ValueDoesNotFit):
            code, text = ErrorCode.INVALID_REQUEST, f"{error} (reference {reference})"
        else:
            code = ErrorCode.INTERNAL
            text = (
                f"the coordinator could not apply this {kind[:64]} ({type(error).__name__}); "
                f"it was kept aside as {reference} (streamctl quarantine)"
            )
        log.error(
            "message %s (%s) failed in pass version %d; quarantined as %s",
            message_id,
            kind[:64],
            version,
            reference,
            exc_info=error,
        )
        kept = _quarantine_row(
            message_id,
            kind,
            version,
            reference,
            f"{type(error).__name__}: {error}",
            repr(message),
            time.time(),
        )
        table = table_of(QuarantinedMessage)
        if _in_savepoint(out, lambda: bulk_insert(out.session, table, [kept]))[1] is not None:
            log.error("could not keep message %s in quarantine", message_id)
        if request is None:
            return None  # an event: it is dropped (and kept in quarantine)
        response = _error(message_id, code, text, version)
        stored = _in_savepoint(out, lambda: out.answered(request, response, storable_request=False))
        if stored[1] is not None:
            log.error("could not store the answer to %s; a retry applies it again", message_id)
        return response

    def _replay(
        self,
        session: Session,
        pass_input: PassInput,
        batches: list[list[_Request]],
        version: int,
    ) -> PassResult:
        answers = _load_stored(session, (r.id for batch in batches for r in batch))
        refusals = reused_id_refusals(batches, load_stored_requests(session, answers), version)
        for request in (r for batch in batches for r in batch):
            if request.id not in answers:  # a read that did not fit the pass's answers
                answers[request.id] = _error(
                    request.id, ErrorCode.UNAVAILABLE, "the answer was not kept; ask again", version
                )
        stored_actions = session.scalar(
            select(SnapshotVersion.actions).where(SnapshotVersion.version == version)
        )
        view = CatalogView(session, version, pass_input.now)
        deadline = view.next_liveness_deadline(pass_input.suspect_after, pass_input.dead_after)
        census = take_census(session)
        return PassResult(
            version=version,
            responses=_batch_answers(batches, answers, refusals),
            next_liveness_deadline=deadline,
            changes=0,
            agents_by_state=census.agents,
            queries_by_state=census.queries,
            replayed=True,
            actions=[action_from_json(data) for data in stored_actions or []],
            # The attempt that committed counted the outcomes; a replay only answers again.
            tally=PassTally(sum(map(len, batches)), len(pass_input.events)),
        )


@dataclass(frozen=True)
class _Request:
    """One request of a batch as the pass reads it from the raw payload."""

    id: str
    envelope: Envelope
    received_at: float
    size: int
    problem: tuple[str, str] | None = None


def _request_batches(requests: RawValue, arrivals: list[float]) -> list[list[_Request]]:
    """Parse the joined request batches; a malformed envelope becomes a refused request."""
    data = requests.payload.data
    raw_batches = loads(data)
    # A batch under the per-request limit cannot hold an oversized request; only larger ones
    # pay for measuring each body.
    measure = len(data) > MAX_REQUEST_BYTES
    batches: list[list[_Request]] = []
    for raw_batch, received_at in zip(raw_batches, arrivals, strict=True):
        batch: list[_Request] = []
        for position, raw in enumerate(raw_batch if isinstance(raw_batch, list) else []):
            request_id = raw.get("id") if isinstance(raw, dict) else None
            problem = _id_problem(request_id)
            if problem is not None:
                request_id = f"~malformed-{received_at}-{position}"
                batch.append(
                    _Request(
                        request_id,
                        Envelope(request_id, ""),
                        received_at,
                        0,
                        (ErrorCode.INVALID_REQUEST, problem),
                    )
                )
                continue
            assert isinstance(request_id, str)
            assert isinstance(raw, dict)
            envelope = Envelope(
                id=request_id,
                kind=raw.get("kind"),  # type: ignore[arg-type]
                body=raw.get("body"),  # type: ignore[arg-type]
                v=raw.get("v"),  # type: ignore[arg-type]
            )
            size = body_size(envelope.body) if measure else 0
            batch.append(_Request(request_id, envelope, received_at, size))
        batches.append(batch)
    return batches


def _id_problem(request_id: Any) -> str | None:
    """Why ``request_id`` cannot identify a request (its answer is stored under it)."""
    if not isinstance(request_id, str) or not request_id:
        return "a request envelope needs a non-empty string 'id'"
    if len(request_id) > MAX_ID_LENGTH:
        return f"a request id may have at most {MAX_ID_LENGTH} characters, got {len(request_id)}"
    problem = text_problem(request_id)
    return f"the request id cannot be stored: {problem}" if problem is not None else None


def _batch_answers(
    batches: list[list[_Request]], answers: dict[str, Response], refusals: dict[int, Response]
) -> list[str]:
    """Each batch's answers: its id's answer, or the refusal of a request reusing an id
    (:mod:`streamctl.domain.request_ids`, by position in the pass)."""
    position = itertools.count()
    # Responses are dataclasses, which dumps writes field by field (id, ok, result, ...).
    return [
        dumps([refusals.get(next(position)) or answers[r.id] for r in batch]) for batch in batches
    ]


def _tally(
    requests: list[_Request],
    answers: dict[str, Response],
    events: int,
    refusals: dict[int, Response],
) -> PassTally:
    """Requests by kind and outcome, counted here once per pass so the worker's metrics cost
    one counter update per kind and outcome, not one per request."""
    counts: Counter[tuple[str, str]] = Counter()
    for position, request in enumerate(requests):
        answer = refusals.get(position) or answers[request.id]
        kind = request.envelope.kind
        counts[
            kind if isinstance(kind, str) and kind in m.REQUEST_TYPES else "invalid",
            "ok" if answer.ok else answer.error_code or "error",
        ] += 1
    outcomes: dict[str, dict[str, int]] = {}
    for (kind, outcome), count in counts.items():
        outcomes.setdefault(kind, {})[outcome] = count
    return PassTally(len(requests), events, outcomes)


def _error(request_id: str, code: str, message: str, version: int) -> Response:
    return Response(
        id=request_id, ok=False, error_code=code, error_message=message, version=version
    )


def _stored_row(
    request: _Request,
    response: Response,
    seq: int,
    snapshot: SnapshotVersion,
    storable_request: bool = True,
) -> dict[str, Any]:
    envelope = request.envelope
    kind = _storable(str(envelope.kind), 64)
    body = (
        envelope.body if storable_request else {"unstorable": _storable(repr(envelope.body), 4096)}
    )
    return {
        "request_id": request.id,
        "version": snapshot.version,
        "seq": seq,
        "kind": kind,
        "request": {"kind": kind, "v": envelope.v, "body": body},
        "ok": response.ok,
        "result": response.result,
        "error_code": response.error_code,
        "error_message": response.error_message,
        "created_at": snapshot.committed_at,
    }


class _Isolate(Exception):
    """The pass met a failure it cannot pin on one message while applying them together; it
    runs again with one savepoint per message (:meth:`CatalogActivities._apply_one_by_one`)."""


_T = TypeVar("_T")


def _in_savepoint(
    out: _PassOutput, work: Callable[[], _T], ctx: PassContext | None = None
) -> tuple[_T | None, Exception | None]:
    """Run ``work`` and send what it staged in a savepoint of its own: committed if it
    returns, rolled back if it raises, with what it staged, the agent actions it added and
    (with ``ctx``) the view, which is read again from the catalog. A failure of the connection
    to the catalog is not contained: the whole pass is tried again."""
    actions_before = len(ctx.actions) if ctx is not None else 0
    savepoint = out.session.begin_nested()
    try:
        value = work()
        out.flush()
        savepoint.commit()
        return value, None
    except Exception as error:
        if _is_transient(error):
            raise
        savepoint.rollback()
        out.discard()
        if ctx is not None:
            del ctx.actions[actions_before:]
            ctx.view = CatalogView(out.session, out.snapshot.version, ctx.view.now)
        return None, error


def _is_transient(error: BaseException) -> bool:
    """A failure of the connection to the catalog rather than of what a message asked for:
    the whole pass is retried by the activity's retry policy, and no message is blamed."""
    if isinstance(error, OperationalError | InterfaceError):
        return True
    return isinstance(error, DBAPIError) and bool(error.connection_invalidated)


def _apply_message(
    ctx: PassContext, out: _PassOutput, message: m.Message, message_id: str, received_at: float
) -> Response | None:
    """Apply one decoded message to the view: a request's answer, or None for an event.

    A refusal (:class:`RequestFailed`) is the request's answer; any other exception is the
    caller's to handle (the message may have changed the view half-way)."""
    version = out.snapshot.version
    ctx.changes.clear()
    if isinstance(message, m.Event):
        try:
            handlers.EVENT_HANDLERS[message.kind](ctx, message, received_at)
        except RequestFailed as error:
            log.warning("event %s refused: %s", message_id, error.message)
        return None
    try:
        result = handlers.REQUEST_HANDLERS[message.kind](ctx, message)
    except RequestFailed as error:
        return _error(message_id, error.code, error.message, version)
    return out.fitted(Response(id=message_id, ok=True, result=result, version=version), message)


class _PassOutput:
    """The changelog entries and stored answers a pass writes besides the entity rows.

    Rows are staged and sent by :meth:`flush`: once at the end of a pass applied in one go,
    or after each message of a pass applied one savepoint at a time, where :meth:`discard`
    forgets what a rolled-back message staged."""

    def __init__(self, session: Session, snapshot: SnapshotVersion) -> None:
        self.session = session
        self.snapshot = snapshot
        self.changes = 0
        self._stored = 0
        self._changelog: list[dict[str, Any]] = []
        self._answers: list[dict[str, Any]] = []
        self._answered: set[str] = set()
        self._answer_bytes_left = MAX_PASS_RESULT_BYTES
        self.unstored: set[str] = set()
        """Answers handed back but not stored: reads that did not fit this pass's result,
        which a retry with the same id asks again."""

    def fitted(self, response: Response, request: m.Message) -> Response:
        """``response``, or an error in its place when its result is too large on its own
        (:data:`MAX_RESPONSE_BYTES`) or for what is left of this pass's result
        (:data:`MAX_PASS_RESULT_BYTES`, under Temporal's 2 MB payload limit)."""
        size = body_size(response.result)
        read_only = request.kind in m.READ_ONLY_KINDS
        applied = "" if read_only else " (it was applied)"
        if size > MAX_RESPONSE_BYTES:
            return _error(
                response.id,
                ErrorCode.TOO_LARGE,
                f"the answer to {request.kind} is {size} bytes, more than the "
                f"{MAX_RESPONSE_BYTES} one answer may have{applied}",
                response.version,
            )
        if size > self._answer_bytes_left:
            if read_only:
                self.unstored.add(response.id)
                return _error(
                    response.id,
                    ErrorCode.UNAVAILABLE,
                    f"the answers of this pass reached {MAX_PASS_RESULT_BYTES} bytes; ask again",
                    response.version,
                )
            return _error(
                response.id,
                ErrorCode.TOO_LARGE,
                f"the answer to {request.kind} did not fit in this pass's answers{applied}",
                response.version,
            )
        self._answer_bytes_left -= size
        return response

    def changed(self, message_id: str, changes: list[Change]) -> None:
        for change in changes:
            self._changelog.append(
                {
                    "version": self.snapshot.version,
                    "seq": self.changes + len(self._changelog),
                    "message_id": message_id,
                    "entity": change.entity,
                    "key": change.key,
                    "action": change.action,
                    "reason": change.reason,
                }
            )

    def answered(
        self, request: _Request, response: Response, storable_request: bool = True
    ) -> None:
        self._answers.append(
            _stored_row(
                request,
                response,
                self._stored + len(self._answers),
                self.snapshot,
                storable_request,
            )
        )

    def refused_before_applying(
        self, first_of: dict[str, _Request], answers: dict[str, Response]
    ) -> None:
        """Stage the answers of requests refused before applying (undecodable ones), after
        the applied ones."""
        applied = {row["request_id"] for row in self._answers} | self._answered | self.unstored
        for request in first_of.values():
            answer = answers[request.id]
            if request.id not in applied and answer.version == self.snapshot.version:
                self.answered(request, answer)

    def has_answered(self, request_id: str) -> bool:
        return request_id in self._answered or any(
            row["request_id"] == request_id for row in self._answers
        )

    def flush(self) -> None:
        bulk_insert(self.session, table_of(ChangelogEntry), self._changelog)
        bulk_insert(self.session, table_of(StoredResponse), self._answers)
        self.changes += len(self._changelog)
        self._stored += len(self._answers)
        self._answered.update(row["request_id"] for row in self._answers)
        self.discard()

    def discard(self) -> None:
        self._changelog = []
        self._answers = []


def _quarantine_row(
    message_id: str,
    kind: str,
    version: int,
    reference: str,
    error: str,
    body: str,
    created_at: float,
) -> dict[str, Any]:
    """A ``quarantined_messages`` row, each text cut and cleaned to fit its column."""
    return {
        "message_id": _storable(message_id, MAX_ID_LENGTH),
        "kind": _storable(kind, 64),
        "version": version,
        "reference": _storable(reference, 64),
        "error": _storable(error, 4096),
        "body": _storable(body, 64 * 1024),
        "created_at": created_at,
    }


def _storable(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters and cleaned of what a text column cannot hold."""
    text = text[:limit]
    if text_problem(text) is None:
        return text
    return text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")
