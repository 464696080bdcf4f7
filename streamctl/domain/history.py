"""``ListChanges`` in a pass: the changelog, read back for people (``streamctl history``).

Every pass writes one changelog entry per change it applied, with the message that caused it
and the reason (:mod:`streamctl.activities.pass_activity`). This handler reads the entries committed
by earlier passes, newest ``limit`` of them, answered oldest first so they read as a story.
"""

from __future__ import annotations

from sqlalchemy import select

from streamctl.catalog.models import ChangelogEntry
from streamctl.domain.context import PassContext, RequestFailed
from streamctl.error_codes import ErrorCode
from streamctl.protocol import answers
from streamctl.protocol import messages as m

MAX_LIMIT = 10_000


def list_changes(ctx: PassContext, request: m.ListChanges) -> list[answers.Change]:
    limit = request.limit
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise RequestFailed(
            ErrorCode.INVALID_REQUEST, f"limit must be a whole number from 1 to {MAX_LIMIT}"
        )
    statement = select(ChangelogEntry)
    if request.entity is not None:
        statement = statement.where(ChangelogEntry.entity == str(request.entity))
    if request.key is not None:
        statement = statement.where(ChangelogEntry.key == str(request.key))
    newest = ctx.view.session.scalars(
        statement.order_by(ChangelogEntry.version.desc(), ChangelogEntry.seq.desc()).limit(limit)
    )
    return [
        {
            "version": entry.version,
            "seq": entry.seq,
            "entity": entry.entity,
            "key": entry.key,
            "action": entry.action,
            "reason": entry.reason,
            "message_id": entry.message_id,
        }
        for entry in reversed(list(newest))
    ]
