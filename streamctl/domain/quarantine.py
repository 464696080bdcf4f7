"""``ListQuarantined`` in a pass: the messages the coordinator set aside (``streamctl
quarantine``).

A message is set aside when applying it failed for a reason its checks did not foresee: inside
a pass, in its own savepoint (:mod:`streamctl.activities.passes`), or by failing whole passes
even alone (the workflow splits such a pass until the message is found). Its request, if it was
one, was answered with an error carrying the same ``reference``, which the coordinator's log
also names. This handler reads the newest ``limit`` of them, answered oldest first.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from streamctl.catalog.models import QuarantinedMessage
from streamctl.domain.context import PassContext, RequestFailed
from streamctl.workflows import messages as m
from streamctl.workflows.messages import ErrorCode

MAX_LIMIT = 1000
BODY_SHOWN = 2000
"""Characters of a kept body an answer shows (the catalog keeps up to 64 KiB)."""


def list_quarantined(ctx: PassContext, request: m.ListQuarantined) -> Any:
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
