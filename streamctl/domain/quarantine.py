"""``ListQuarantined`` in a pass: the messages the coordinator set aside (``streamctl
quarantine``).

A message is set aside when applying it failed for a reason its checks did not foresee: inside
a pass, in its own savepoint (:mod:`streamctl.activities.pass_activity`), or by failing whole passes
even alone (the workflow splits such a pass until the message is found). Its request, if it was
one, was answered with an error carrying the same ``reference``, which the coordinator's log
also names. This handler reads the newest ``limit`` of them, answered oldest first.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from streamctl.catalog.fit import text_problem
from streamctl.catalog.models import QuarantinedMessage, SnapshotVersion, StoredResponse, table_of
from streamctl.catalog.store import bulk_insert
from streamctl.domain.context import PassContext, RequestFailed
from streamctl.domain.pass_requests import id_problem
from streamctl.error_codes import ErrorCode
from streamctl.limits import MAX_ID_LENGTH
from streamctl.protocol import answers
from streamctl.protocol import messages as m
from streamctl.protocol.pass_io import QuarantineInput

MAX_LIMIT = 1000
BODY_SHOWN = 2000
"""Characters of a kept body an answer shows (the catalog keeps up to 64 KiB)."""


def list_quarantined(
    ctx: PassContext, request: m.ListQuarantined
) -> list[answers.QuarantinedMessage]:
    limit = request.limit
    if isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise RequestFailed(
            ErrorCode.INVALID_REQUEST, f"limit must be a whole number from 1 to {MAX_LIMIT}"
        )
    newest = ctx.view.session.scalars(
        select(QuarantinedMessage).order_by(QuarantinedMessage.id.desc()).limit(limit)
    )
    return [
        {
            "reference": row.reference,
            "message_id": row.message_id,
            "kind": row.kind,
            "version": row.version,
            "error": row.error,
            "body": row.body[:BODY_SHOWN],
            "created_at": row.created_at,
        }
        for row in reversed(list(newest))
    ]


def quarantine_row(
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
        "message_id": storable(message_id, MAX_ID_LENGTH),
        "kind": storable(kind, 64),
        "version": version,
        "reference": storable(reference, 64),
        "error": storable(error, 4096),
        "body": storable(body, 64 * 1024),
        "created_at": created_at,
    }


def storable(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters and cleaned of what a text column cannot hold."""
    text = text[:limit]
    if text_problem(text) is None:
        return text
    return text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")


def set_aside(engine: Engine, item: QuarantineInput) -> None:
    """Keep a message that failed its pass on its own, and store a request's answer so a
    retry of its id gets that answer instead of failing another pass (idempotent)."""
    with Session(engine) as session, session.begin():
        known = session.scalar(
            select(QuarantinedMessage.id).where(QuarantinedMessage.reference == item.reference)
        )
        if known is not None:
            return
        version = session.scalar(select(func.max(SnapshotVersion.version))) or 0
        now = time.time()
        kept = quarantine_row(
            item.message_id, item.kind, version, item.reference, item.error, item.body, now
        )
        bulk_insert(session, table_of(QuarantinedMessage), [kept])
        answer = item.answer
        if answer is None or id_problem(answer.id) is not None:
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
                    "kind": storable(item.kind, 64),
                    "request": {"unstorable": storable(item.body, 4096)},
                    "ok": False,
                    "result": None,
                    "error_code": answer.error_code,
                    "error_message": answer.error_message,
                    "created_at": now,
                }
            ],
        )
