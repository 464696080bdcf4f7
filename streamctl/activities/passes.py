"""The pass activity: one batch of messages, one catalog transaction, one snapshot version.

Order of work inside :meth:`CatalogActivities.apply_pass`:

1. Claim the pass: insert its ``snapshot_versions`` row first. A second attempt of the same
   pass (a retry racing an abandoned attempt) blocks on that row and then fails on its unique
   key, so only one attempt commits; a retry after a commit finds the row and replays.
2. Answer requests whose id already has a stored response from that response (exactly once
   across client retries and continue-as-new), and repeats of an id inside the pass from its
   first occurrence.
3. Decode the rest; a malformed message gets its error code and nothing else happens for it.
4. Apply in stages (workers, then sources and sinks, then queries), arrival order within a
   stage, each message against the state the previous ones left.
5. Write the changelog, the responses (with their apply order) and the entity changes, and
   compute when the next agent's heartbeat age crosses a liveness threshold.

The answers go back as one JSON array per request batch (see :mod:`streamctl.workflows.passes`).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session
from temporalio import activity
from temporalio.common import RawValue

from streamctl.activities import apply
from streamctl.activities import queries as queries_stage
from streamctl.activities.context import PassContext, RequestFailed
from streamctl.activities.decode import MAX_REQUEST_BYTES, DecodeError, body_size, decode
from streamctl.catalog.census import take_census
from streamctl.catalog.models import ChangelogEntry, SnapshotVersion, StoredResponse, table_of
from streamctl.catalog.store import bulk_insert, catalog_engine, key_chunks, one_of
from streamctl.catalog.view import CatalogView
from streamctl.compact_json import dumps, loads
from streamctl.lifecycle.agents import LivenessPolicy
from streamctl.lifecycle.queries import RestartPolicy
from streamctl.workflows import messages as m
from streamctl.workflows.actions import action_from_json
from streamctl.workflows.messages import Envelope, ErrorCode, Response
from streamctl.workflows.passes import CatalogPosition, PassInput, PassResult, PassTally

log = logging.getLogger(__name__)

MAX_RESPONSE_BYTES = 512 * 1024
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
        engine = catalog_engine(self.catalog_url)
        with Session(engine, autoflush=False, expire_on_commit=False) as session:
            with session.begin():
                result = self._apply(session, pass_input, batches)
            return result

    # ------------------------------------------------------------------------------------

    def _apply(
        self, session: Session, pass_input: PassInput, batches: list[list[_Request]]
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
            if envelope.kind in m.INTERNAL_EVENT_KINDS and envelope.id[:1] != "~":
                continue  # only the workflow itself ("~"-prefixed ids) may send internal events
            try:
                message = decode(envelope, m.EVENT_TYPES, pending.size)  # type: ignore[arg-type]
                work.append((envelope.id, pending.received_at, message))
            except DecodeError as error:
                log.warning("dropping event %s: %s", envelope.id, error.message)

        view = CatalogView(session, version, pass_input.now)
        apply.preload(view, [message for _, _, message in work])
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
        changelog: list[dict[str, Any]] = []
        stored_rows: list[dict[str, Any]] = []
        for index in ordered:
            message_id, received_at, message = work[index]
            ctx.changes.clear()
            if isinstance(message, m.Event):
                try:
                    apply.EVENT_HANDLERS[message.kind](ctx, message, received_at)
                except RequestFailed as error:
                    log.warning("event %s refused: %s", message_id, error.message)
            else:
                response = self._answer(ctx, message, message_id, version)
                answers[message_id] = response
                stored_rows.append(
                    _stored_row(first_of[message_id], response, len(stored_rows), snapshot)
                )
            for change in ctx.changes:
                changelog.append(
                    {
                        "version": version,
                        "seq": len(changelog),
                        "message_id": message_id,
                        "entity": change.entity,
                        "key": change.key,
                        "action": change.action,
                        "reason": change.reason,
                    }
                )
        # Queries waiting for an agent (new ones, recovering ones whose backoff passed) start.
        ctx.changes.clear()
        queries_stage.schedule(ctx)
        for change in ctx.changes:
            changelog.append(
                {
                    "version": version,
                    "seq": len(changelog),
                    "message_id": f"~schedule-{version}",
                    "entity": change.entity,
                    "key": change.key,
                    "action": change.action,
                    "reason": change.reason,
                }
            )
        # Requests refused before applying are answered too, after the applied ones.
        applied_ids = {row["request_id"] for row in stored_rows}
        for request in first_of.values():
            if request.id not in applied_ids and answers[request.id].version == version:
                stored_rows.append(
                    _stored_row(request, answers[request.id], len(stored_rows), snapshot)
                )

        view.write()
        bulk_insert(session, table_of(ChangelogEntry), changelog)
        bulk_insert(session, table_of(StoredResponse), stored_rows)
        snapshot.requests = len(requests)
        snapshot.events = len(pass_input.events)
        snapshot.changes = len(changelog)
        snapshot.actions = [asdict(action) for action in ctx.actions] or None
        if pass_input.pass_no % PRUNE_EVERY_PASSES == 0:
            session.execute(
                delete(StoredResponse).where(
                    StoredResponse.created_at < time.time() - RESPONSE_RETENTION_SECONDS
                )
            )
        deadline = view.next_liveness_deadline(pass_input.suspect_after, pass_input.dead_after)
        census = take_census(session)  # after view.write(): the counts of this version
        return PassResult(
            version=version,
            responses=_batch_answers(batches, answers),
            next_liveness_deadline=deadline,
            changes=len(changelog),
            agents_by_state=census.agents,
            queries_by_state=census.queries,
            actions=ctx.actions,
            tally=_tally(requests, answers, len(pass_input.events)),
        )

    def _answer(
        self, ctx: PassContext, message: m.Message, request_id: str, version: int
    ) -> Response:
        try:
            result = apply.REQUEST_HANDLERS[message.kind](ctx, message)
        except RequestFailed as error:
            return _error(request_id, error.code, error.message, version)
        except Exception as error:  # a bug must cost one answer, never the pass
            log.exception("request %s (%s) failed unexpectedly", request_id, message.kind)
            return _error(
                request_id, ErrorCode.INTERNAL, f"{type(error).__name__}: {error}", version
            )
        # Only listings grow with the catalog; other answers are bounded by their request.
        if message.kind in m.LISTING_KINDS and body_size(result) > MAX_RESPONSE_BYTES:
            return _error(
                request_id,
                ErrorCode.TOO_LARGE,
                f"the answer to {message.kind} exceeds {MAX_RESPONSE_BYTES} bytes",
                version,
            )
        return Response(id=request_id, ok=True, result=result, version=version)

    def _replay(
        self,
        session: Session,
        pass_input: PassInput,
        batches: list[list[_Request]],
        version: int,
    ) -> PassResult:
        answers = _load_stored(session, (r.id for batch in batches for r in batch))
        missing = [r.id for batch in batches for r in batch if r.id not in answers]
        if missing:  # cannot happen unless responses were pruned mid-flight
            raise RuntimeError(
                f"pass {pass_input.pass_no} committed without answers for {missing[:3]}"
            )
        stored_actions = session.scalar(
            select(SnapshotVersion.actions).where(SnapshotVersion.version == version)
        )
        view = CatalogView(session, version, pass_input.now)
        deadline = view.next_liveness_deadline(pass_input.suspect_after, pass_input.dead_after)
        census = take_census(session)
        return PassResult(
            version=version,
            responses=_batch_answers(batches, answers),
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
            if not isinstance(request_id, str) or not request_id:
                request_id = f"~malformed-{received_at}-{position}"
                batch.append(
                    _Request(
                        request_id,
                        Envelope(request_id, ""),
                        received_at,
                        0,
                        (ErrorCode.INVALID_REQUEST, "a request envelope needs a string 'id'"),
                    )
                )
                continue
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


def _batch_answers(batches: list[list[_Request]], answers: dict[str, Response]) -> list[str]:
    # Responses are dataclasses, which dumps writes field by field (id, ok, result, ...).
    return [dumps([answers[r.id] for r in batch]) for batch in batches]


def _tally(requests: list[_Request], answers: dict[str, Response], events: int) -> PassTally:
    """Requests by kind and outcome, counted here once per pass so the worker's metrics cost
    one counter update per kind and outcome, not one per request."""
    counts: Counter[tuple[str, str]] = Counter()
    for request in requests:
        answer = answers[request.id]
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
    request: _Request, response: Response, seq: int, snapshot: SnapshotVersion
) -> dict[str, Any]:
    envelope = request.envelope
    return {
        "request_id": request.id,
        "version": snapshot.version,
        "seq": seq,
        "kind": str(envelope.kind)[:64],
        "request": {"kind": envelope.kind, "v": envelope.v, "body": envelope.body},
        "ok": response.ok,
        "result": response.result,
        "error_code": response.error_code,
        "error_message": response.error_message,
        "created_at": snapshot.committed_at,
    }
