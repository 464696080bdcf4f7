"""Applying a pass one savepoint per message, so a message that fails unforeseen costs only
itself: it is rolled back, answered with an error (a request) or dropped (an event), and
quarantined, while the rest of the pass commits. A failure to reach the catalog is not
contained (:func:`is_transient`): the whole pass is tried again."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError

from streamctl.catalog.fit import ValueDoesNotFit
from streamctl.catalog.models import (
    QuarantinedMessage,
    table_of,
)
from streamctl.catalog.store import bulk_insert
from streamctl.catalog.view import CatalogView
from streamctl.domain import queries as queries_stage
from streamctl.domain.context import PassContext
from streamctl.domain.pass_output import PassOutput
from streamctl.domain.pass_requests import (
    Request,
    error_response,
)
from streamctl.domain.quarantine import quarantine_row
from streamctl.error_codes import ErrorCode
from streamctl.protocol import messages as m
from streamctl.protocol.messages import Response

ApplyMessage = Callable[[PassContext, PassOutput, m.Message, str, float], Response | None]
"""How the pass applies one decoded message (:func:`streamctl.domain.passes.apply_message`)."""

log = logging.getLogger(__name__)


class Isolate(Exception):
    """The pass met a failure it cannot pin on one message while applying them together; it
    runs again with one savepoint per message (:func:`apply_one_by_one`)."""


_T = TypeVar("_T")


def in_savepoint(
    out: PassOutput, work: Callable[[], _T], ctx: PassContext | None = None
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
        if is_transient(error):
            raise
        savepoint.rollback()
        out.discard()
        if ctx is not None:
            del ctx.actions[actions_before:]
            ctx.view = CatalogView(out.session, out.snapshot.version, ctx.view.now)
        return None, error


def is_transient(error: BaseException) -> bool:
    """A failure of the connection to the catalog rather than of what a message asked for:
    the whole pass is retried by the activity's retry policy, and no message is blamed."""
    if isinstance(error, OperationalError | InterfaceError):
        return True
    return isinstance(error, DBAPIError) and bool(error.connection_invalidated)


def apply_one_by_one(
    ctx: PassContext,
    out: PassOutput,
    work: list[tuple[str, float, m.Message]],
    first_of: dict[str, Request],
    answers: dict[str, Response],
    apply_message: ApplyMessage,
) -> None:
    """Apply each message in a savepoint of its own, written at once, so a failure costs
    exactly that message: its savepoint is rolled back, the view is read again from what
    the earlier messages wrote, and the message is answered with an error (a request) or
    dropped (an event), and quarantined, while the rest of the pass commits."""

    def apply_one(message: m.Message, message_id: str, received_at: float) -> Any:
        response = apply_message(ctx, out, message, message_id, received_at)
        ctx.view.write()
        ctx.view.mark_written()
        if response is not None and message_id not in out.unstored:
            out.answered(first_of[message_id], response)
        out.changed(message_id, ctx.changes)
        return response

    for message_id, received_at, message in work:
        response, error = in_savepoint(
            out, partial(apply_one, message, message_id, received_at), ctx
        )
        if error is not None:
            request = first_of.get(message_id) if isinstance(message, m.Request) else None
            response = quarantine_failed(out, request, message_id, message.kind, message, error)
        if response is not None:
            answers[message_id] = response

    def schedule() -> None:
        ctx.changes.clear()
        queries_stage.schedule(ctx)
        ctx.view.write()
        ctx.view.mark_written()
        out.changed(f"~schedule-{out.snapshot.version}", ctx.changes)

    if in_savepoint(out, schedule, ctx)[1] is not None:
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
        _, error = in_savepoint(out, partial(out.answered, request, answer))
        if error is not None:
            kind = str(request.envelope.kind)
            refused = quarantine_failed(
                out, request, request.id, kind, request.envelope.body, error
            )
            assert refused is not None
            answers[request.id] = refused


def quarantine_failed(
    out: PassOutput,
    request: Request | None,
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
    kept = quarantine_row(
        message_id,
        kind,
        version,
        reference,
        f"{type(error).__name__}: {error}",
        repr(message),
        time.time(),
    )
    table = table_of(QuarantinedMessage)
    if in_savepoint(out, lambda: bulk_insert(out.session, table, [kept]))[1] is not None:
        log.error("could not keep message %s in quarantine", message_id)
    if request is None:
        return None  # an event: it is dropped (and kept in quarantine)
    response = error_response(message_id, code, text, version)
    stored = in_savepoint(out, lambda: out.answered(request, response, storable_request=False))
    if stored[1] is not None:
        log.error("could not store the answer to %s; a retry applies it again", message_id)
    return response
