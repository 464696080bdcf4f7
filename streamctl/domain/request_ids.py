"""A request id names one request: a repeat must be that request, unchanged.

Answers are stored by request id, so a retried request (same id, same request) gets its one
answer and is never applied twice (DESIGN §3, exactly once). An id that comes again with a
*different* request (another kind, version or body: a client that reuses ids, two clients
drawing the same one) must not get the answer meant for the first: it is refused with
``ID_REUSED``, and the id keeps its first request and answer.

The first request of an id is the stored one (the ``request`` column of ``responses``, written
with the answer) or, for an id new in this pass, its first occurrence in the pass, the one the
pass applies. Both the pass and its replay (a retried activity) judge repeats against the same
first request, so they answer alike. Refusals are not stored: a repeat of the refused request
is refused again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session

from streamctl.catalog.models import StoredResponse
from streamctl.catalog.store import key_chunks, one_of
from streamctl.error_codes import ErrorCode
from streamctl.protocol.messages import Envelope, Response


class IdentifiedRequest(Protocol):
    """A request as the pass reads it: its id and its envelope."""

    @property
    def id(self) -> str: ...

    @property
    def envelope(self) -> Envelope: ...


def load_stored_requests(session: Session, ids: Iterable[str]) -> dict[str, Any]:
    """The stored request (``{"kind", "v", "body"}``) of each of ``ids`` that has one."""
    found: dict[str, Any] = {}
    for chunk in key_chunks(session, set(ids)):
        for request_id, request in session.execute(
            select(StoredResponse.request_id, StoredResponse.request).where(
                one_of(session, StoredResponse.request_id, chunk)
            )
        ):
            found[request_id] = request
    return found


def reused_id_refusals(
    batches: Sequence[Sequence[IdentifiedRequest]], stored: Mapping[str, Any], version: int
) -> dict[int, Response]:
    """The ``ID_REUSED`` answers of the requests that repeat an id with a different request,
    by position in the pass (the requests of all ``batches`` in order); ``stored`` holds the
    stored requests of the pass's ids (:func:`load_stored_requests`)."""
    first: dict[str, Envelope] = {}
    refusals: dict[int, Response] = {}
    position = -1
    for batch in batches:
        for request in batch:
            position += 1
            envelope = request.envelope
            if request.id in stored:
                same = _same_as_stored(stored[request.id], envelope)
                original_kind = (
                    stored[request.id].get("kind") if isinstance(stored[request.id], dict) else None
                )
            elif request.id in first:
                same = _same_request(first[request.id], envelope)
                original_kind = first[request.id].kind
            else:
                first[request.id] = envelope
                continue
            if not same:
                refusals[position] = Response(
                    id=request.id,
                    ok=False,
                    error_code=ErrorCode.ID_REUSED,
                    error_message=(
                        f"request id {request.id!r} already names another request "
                        f"({str(original_kind)[:64]}), which keeps it and its answer; a new "
                        "request needs a new id (a retry repeats its request unchanged)"
                    ),
                    version=version,
                )
    return refusals


def _same_as_stored(stored: Any, envelope: Envelope) -> bool:
    if not isinstance(stored, dict):
        return True  # nothing to compare with
    body = stored.get("body")
    if stored.keys() == {"unstorable"} or (
        isinstance(body, dict) and body.keys() == {"unstorable"}
    ):
        # Only its text was kept, cannot compare: a request set aside after failing every
        # pass (quarantine.set_aside stores {"unstorable": text}), or one too large to store.
        return True
    kind = stored.get("kind")
    # The stored kind is cut to its column's 64 characters.
    return (
        (kind == envelope.kind or kind == str(envelope.kind)[:64])
        and _same_value(stored.get("v"), envelope.v)
        and _same_value(body, envelope.body)
    )


def _same_request(first: Envelope, again: Envelope) -> bool:
    return (
        _same_value(first.kind, again.kind)
        and _same_value(first.v, again.v)
        and _same_value(first.body, again.body)
    )


def _same_value(first: Any, again: Any) -> bool:
    """Equal as JSON: ``==`` on the decoded values (key order and ``1``/``1.0`` do not matter,
    as a JSON column may change them), or the same text (NaN is not equal to itself)."""
    if first == again:
        return True
    try:
        return json.dumps(first, sort_keys=True) == json.dumps(again, sort_keys=True)
    except (TypeError, ValueError):
        return False
