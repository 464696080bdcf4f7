"""What a pass writes besides the entity rows: changelog entries and stored answers, within the
answer budget of one pass (:data:`~streamctl.limits.MAX_PASS_RESULT_BYTES`)."""

from __future__ import annotations

import logging
import time
from typing import Any

from sqlalchemy.orm import Session

from streamctl.catalog.models import (
    ChangelogEntry,
    SnapshotVersion,
    StoredResponse,
    table_of,
)
from streamctl.catalog.store import bulk_insert
from streamctl.domain.context import Change
from streamctl.domain.decode import body_size
from streamctl.domain.pass_requests import (
    Request,
    error_response,
)
from streamctl.domain.quarantine import storable
from streamctl.error_codes import ASK_AGAIN, ErrorCode, asks_again
from streamctl.limits import (
    MAX_PASS_RESULT_BYTES,
    MAX_PASS_WORK_SECONDS,
    MAX_RESPONSE_BYTES,
)
from streamctl.protocol import answers
from streamctl.protocol import messages as m
from streamctl.protocol.messages import Response

log = logging.getLogger(__name__)


def stored_row(
    request: Request,
    response: Response,
    seq: int,
    snapshot: SnapshotVersion,
    storable_request: bool = True,
) -> dict[str, Any]:
    envelope = request.envelope
    kind = storable(str(envelope.kind), 64)
    body = (
        envelope.body if storable_request else {"unstorable": storable(repr(envelope.body), 4096)}
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


class PassOutput:
    """The changelog entries and stored answers a pass writes besides the entity rows.

    Rows are staged and sent by :meth:`flush`: once at the end of a pass applied in one go,
    or after each message of a pass applied one savepoint at a time, where :meth:`discard`
    forgets what a rolled-back message staged."""

    def __init__(
        self, session: Session, snapshot: SnapshotVersion, work_deadline: float | None = None
    ) -> None:
        """``work_deadline`` (``time.monotonic()``) ends the time for applying requests
        (:meth:`out_of_time`); by default :data:`MAX_PASS_WORK_SECONDS` from now."""
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
        self._work_deadline = (
            time.monotonic() + MAX_PASS_WORK_SECONDS if work_deadline is None else work_deadline
        )
        self._requests_applied = 0
        self._kept: dict[str, Response] = {}
        """Answers stored but not handed back: writes (applied) whose answers did not fit
        this pass's result; it hands back ``UNAVAILABLE ... ask again`` instead, and asking
        again with the same id gets the stored answer."""

    def fitted(self, response: Response, request: m.Message) -> Response:
        """``response``, or an error in its place: ``TOO_LARGE`` when its result is too large
        on its own (:data:`MAX_RESPONSE_BYTES`); ``UNAVAILABLE ... ask again`` when it is too
        large for what is left of this pass's result (:data:`MAX_PASS_RESULT_BYTES`, under
        Temporal's 2 MB payload limit). Asked again under the same id, a read is read again
        (its answer is not stored) and a write is answered from the store (its whole answer
        is stored: :meth:`answered`)."""
        size = body_size(response.result)
        read_only = request.kind in m.READ_ONLY_KINDS or _lone_show(request, response.result)
        if size > MAX_RESPONSE_BYTES:
            return error_response(
                response.id,
                ErrorCode.TOO_LARGE,
                f"the answer to {request.kind} is {size} bytes, more than the "
                f"{MAX_RESPONSE_BYTES} one answer may have"
                f"{'' if read_only else ' (it was applied)'}{_paging_hint(request)}",
                response.version,
            )
        if size > self._answer_bytes_left:
            if read_only:
                self.unstored.add(response.id)
                return _over_budget(response, "")
            self._kept[response.id] = response
            return _over_budget(response, f"; {request.kind} was applied and its answer kept")
        self._answer_bytes_left -= size
        return response

    def out_of_time(self) -> bool:
        """Whether the pass has applied requests for :data:`MAX_PASS_WORK_SECONDS` (one at
        least): the later ones wait for the next pass (:meth:`deferred`)."""
        return self._requests_applied > 0 and time.monotonic() > self._work_deadline

    def applying(self) -> None:
        """A request is about to be applied."""
        self._requests_applied += 1

    def deferred(self, request_id: str, version: int) -> Response:
        """The answer to a request this pass has no time left for: nothing was applied, and
        nothing is stored, so the same id asked again is applied then."""
        self.unstored.add(request_id)
        why = f"the pass had applied requests for {MAX_PASS_WORK_SECONDS:g} s; this one was not"
        return ask_again(request_id, f"{why} applied", version)

    def fitted_stored(self, response: Response) -> Response:
        """An answer stored by an earlier pass (a retried request id), or ``UNAVAILABLE ...
        ask again`` in its place when it does not fit what is left of this pass's result
        (it stays stored: asking again gets it)."""
        size = body_size(response.result)
        if size > self._answer_bytes_left:
            return _over_budget(response, "; the answer is kept")
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

    def answered(self, request: Request, response: Response, storable_request: bool = True) -> None:
        """Stage ``request``'s answer to be stored: ``response``, or the whole answer that
        :meth:`fitted` kept in its place."""
        stored = self._kept.pop(request.id, response)
        if not stored.ok and asks_again(stored.error_code, stored.error_message):
            # Never stored: asked again, it would come back from the store every time.
            raise ValueError(f"an answer to ask again for is never stored ({request.id})")
        self._answers.append(
            stored_row(
                request,
                stored,
                self._stored + len(self._answers),
                self.snapshot,
                storable_request,
            )
        )

    def refused_before_applying(
        self, first_of: dict[str, Request], answers: dict[str, Response]
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
        """Forget what is staged (sent, or rolled back with its savepoint): a kept answer of
        a write rolled back must not be stored in place of that request's error."""
        self._changelog = []
        self._answers = []
        self._kept.clear()


def ask_again(request_id: str, why: str, version: int) -> Response:
    """``UNAVAILABLE`` with ``why`` and :data:`~streamctl.error_codes.ASK_AGAIN`: the answer a
    pass hands back, and never stores, in place of one it cannot give now (the client library
    asks again under the same id)."""
    return error_response(request_id, ErrorCode.UNAVAILABLE, f"{why}{ASK_AGAIN}", version)


def _over_budget(response: Response, what_happened: str) -> Response:
    """:func:`ask_again` in place of ``response``, which this pass's result has no room for."""
    return ask_again(
        response.id,
        f"the answers of this pass reached {MAX_PASS_RESULT_BYTES} bytes{what_happened}",
        response.version,
    )


def _paging_hint(request: m.Message) -> str:
    if request.kind in m.PAGE_KEYS or request.kind == m.ExecuteStatement.kind:
        return "; ask for it in pages (limit, and after = the previous page's next)"
    return ""


def _lone_show(request: m.Message, result: Any) -> bool:
    """An ``ExecuteStatement`` whose text was one ``SHOW``: it changed nothing, so an answer
    that does not fit may be asked for again, as a listing's may."""
    return request.kind == m.ExecuteStatement.kind and answers.lone_show(result) is not None
