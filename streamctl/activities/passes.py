"""The pass activity: one batch of messages, one catalog transaction, one snapshot version.

Order of work inside :meth:`CatalogActivities.apply_pass`:

1. Claim the pass: insert its ``snapshot_versions`` row first. A second attempt of the same
   pass (a retry racing an abandoned attempt) blocks on that row and then fails on its unique
   key, so only one attempt commits; a retry after a commit finds the row and replays.
2. Answer requests whose id already has a stored response from that response (exactly once
   across client retries and continue-as-new), and duplicates inside the batch from the first.
3. Decode the rest; a malformed message gets its error code and nothing else happens for it.
4. Apply in stages (workers, then sources and sinks, then queries), arrival order within a
   stage, each message against the state the previous ones left.
5. Write the changelog, the responses (with their apply order) and the entity changes, and
   compute when the next agent's heartbeat age crosses a liveness threshold.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, func, insert, select
from sqlalchemy.orm import Session
from temporalio import activity

from streamctl.activities import apply
from streamctl.activities.decode import DecodeError, body_size, decode
from streamctl.catalog.models import ChangelogEntry, SnapshotVersion, StoredResponse
from streamctl.catalog.store import catalog_engine
from streamctl.catalog.view import CatalogView
from streamctl.lifecycle.agents import LivenessPolicy
from streamctl.workflows import messages as m
from streamctl.workflows.messages import ErrorCode, Response
from streamctl.workflows.passes import CatalogPosition, PassInput, PassResult, PendingMessage

log = logging.getLogger(__name__)

MAX_RESPONSE_BYTES = 512 * 1024
RESPONSE_RETENTION_SECONDS = 7 * 24 * 3600
PRUNE_EVERY_PASSES = 500


def _stored(row: StoredResponse) -> Response:
    return Response(
        id=row.request_id,
        ok=row.ok,
        result=row.result,
        error_code=row.error_code,
        error_message=row.error_message,
        version=row.version,
    )


def _load_stored(session: Session, ids: Iterable[str]) -> dict[str, Response]:
    wanted = list(set(ids))
    found: dict[str, Response] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        for row in session.scalars(
            select(StoredResponse).where(StoredResponse.request_id.in_(chunk))
        ):
            found[row.request_id] = _stored(row)
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
    def apply_pass(self, pass_input: PassInput) -> PassResult:
        engine = catalog_engine(self.catalog_url)
        with Session(engine, autoflush=False, expire_on_commit=False) as session:
            with session.begin():
                result = self._apply(session, pass_input)
            return result

    # ------------------------------------------------------------------------------------

    def _apply(self, session: Session, pass_input: PassInput) -> PassResult:
        claimed = session.scalar(
            select(SnapshotVersion).where(
                SnapshotVersion.workflow_id == pass_input.workflow_id,
                SnapshotVersion.pass_no == pass_input.pass_no,
            )
        )
        if claimed is not None:
            return self._replay(session, pass_input, claimed.version)

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

        requests = [p for p in pass_input.messages if p.is_request]
        events = [p for p in pass_input.messages if not p.is_request]
        answers = _load_stored(session, (p.envelope.id for p in requests))
        first_of: dict[str, PendingMessage] = {}
        work: list[tuple[PendingMessage, m.Message]] = []

        for pending in requests:
            envelope = pending.envelope
            if envelope.id in answers or envelope.id in first_of:
                continue  # answered before, or a duplicate of an earlier message in this batch
            first_of[envelope.id] = pending
            try:
                work.append((pending, decode(envelope, m.REQUEST_TYPES)))  # type: ignore[arg-type]
            except DecodeError as error:
                answers[envelope.id] = _error(envelope.id, error.code, error.message, version)
        for pending in events:
            if pending.envelope.kind in m.INTERNAL_EVENT_KINDS and pending.envelope.id[:1] != "~":
                continue  # only the workflow itself ("~"-prefixed ids) may send internal events
            try:
                work.append((pending, decode(pending.envelope, m.EVENT_TYPES)))  # type: ignore[arg-type]
            except DecodeError as error:
                log.warning("dropping event %s: %s", pending.envelope.id, error.message)

        view = CatalogView(session, version, pass_input.now)
        apply.preload(view, [message for _, message in work])
        ctx = apply.PassContext(
            view=view,
            liveness=LivenessPolicy(pass_input.suspect_after, pass_input.dead_after),
        )
        ordered = sorted(
            range(len(work)), key=lambda i: (work[i][1].stage, work[i][0].received_at, i)
        )
        changelog: list[dict[str, Any]] = []
        stored_rows: list[dict[str, Any]] = []
        for seq, index in enumerate(ordered):
            pending, message = work[index]
            ctx.changes.clear()
            if isinstance(message, m.Event):
                try:
                    apply.EVENT_HANDLERS[message.kind](ctx, message, pending.received_at)
                except apply.RequestFailed as error:
                    log.warning("event %s refused: %s", pending.envelope.id, error.message)
            else:
                response = self._answer(ctx, message, pending.envelope.id, version)
                answers[pending.envelope.id] = response
                stored_rows.append(_stored_row(pending, response, version, seq, snapshot))
            for change in ctx.changes:
                changelog.append(
                    {
                        "version": version,
                        "seq": len(changelog),
                        "message_id": pending.envelope.id,
                        "entity": change.entity,
                        "key": change.key,
                        "action": change.action,
                        "reason": change.reason,
                    }
                )
        # Decode failures are answered too, in arrival order after the applied ones.
        applied_ids = {row["request_id"] for row in stored_rows}
        for pending in first_of.values():
            response = answers[pending.envelope.id]
            if pending.envelope.id not in applied_ids and response.version == version:
                stored_rows.append(
                    _stored_row(
                        pending, response, version, len(ordered) + len(stored_rows), snapshot
                    )
                )

        session.flush()
        if changelog:
            session.execute(insert(ChangelogEntry), changelog)
        if stored_rows:
            session.execute(insert(StoredResponse), stored_rows)
        snapshot.requests = len(requests)
        snapshot.events = len(events)
        snapshot.changes = len(changelog)
        if pass_input.pass_no % PRUNE_EVERY_PASSES == 0:
            session.execute(
                delete(StoredResponse).where(
                    StoredResponse.created_at < time.time() - RESPONSE_RETENTION_SECONDS
                )
            )
        deadline = view.next_liveness_deadline(pass_input.suspect_after, pass_input.dead_after)
        return PassResult(
            version=version,
            responses=[answers[p.envelope.id] for p in requests],
            next_liveness_deadline=deadline,
            changes=len(changelog),
        )

    def _answer(
        self, ctx: apply.PassContext, message: m.Message, request_id: str, version: int
    ) -> Response:
        try:
            result = apply.REQUEST_HANDLERS[message.kind](ctx, message)
        except apply.RequestFailed as error:
            return _error(request_id, error.code, error.message, version)
        except Exception as error:  # a bug must cost one answer, never the pass
            log.exception("request %s (%s) failed unexpectedly", request_id, message.kind)
            return _error(
                request_id, ErrorCode.INTERNAL, f"{type(error).__name__}: {error}", version
            )
        if body_size(result) > MAX_RESPONSE_BYTES:
            return _error(
                request_id,
                ErrorCode.TOO_LARGE,
                f"the answer to {message.kind} exceeds {MAX_RESPONSE_BYTES} bytes",
                version,
            )
        return Response(id=request_id, ok=True, result=result, version=version)

    def _replay(self, session: Session, pass_input: PassInput, version: int) -> PassResult:
        ids = [p.envelope.id for p in pass_input.messages if p.is_request]
        answers = _load_stored(session, ids)
        missing = [i for i in ids if i not in answers]
        if missing:  # cannot happen unless responses were pruned mid-flight
            raise RuntimeError(
                f"pass {pass_input.pass_no} committed without answers for {missing[:3]}"
            )
        view = CatalogView(session, version, pass_input.now)
        deadline = view.next_liveness_deadline(pass_input.suspect_after, pass_input.dead_after)
        return PassResult(
            version=version,
            responses=[answers[i] for i in ids],
            next_liveness_deadline=deadline,
            changes=0,
            replayed=True,
        )


def _error(request_id: str, code: str, message: str, version: int) -> Response:
    return Response(
        id=request_id, ok=False, error_code=code, error_message=message, version=version
    )


def _stored_row(
    pending: PendingMessage, response: Response, version: int, seq: int, snapshot: SnapshotVersion
) -> dict[str, Any]:
    envelope = pending.envelope
    return {
        "request_id": envelope.id,
        "version": version,
        "seq": seq,
        "kind": str(envelope.kind)[:64],
        "request": {"kind": envelope.kind, "v": envelope.v, "body": envelope.body},
        "ok": response.ok,
        "result": response.result,
        "error_code": response.error_code,
        "error_message": response.error_message,
        "created_at": snapshot.committed_at,
    }
