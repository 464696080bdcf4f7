"""The requests of a pass as the pass reads them from the joined raw payload, and the answers
it hands back per batch (with the per-kind tally the worker turns into metrics)."""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

from streamctl.catalog.fit import text_problem
from streamctl.compact_json import dumps, loads
from streamctl.domain.decode import body_size
from streamctl.error_codes import ErrorCode, asks_again
from streamctl.limits import (
    MAX_ID_LENGTH,
    MAX_REQUEST_BYTES,
)
from streamctl.protocol import messages as m
from streamctl.protocol.messages import Envelope, Response
from streamctl.protocol.pass_io import (
    PassTally,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Request:
    """One request of a batch as the pass reads it from the raw payload."""

    id: str
    envelope: Envelope
    received_at: float
    size: int
    problem: tuple[str, str] | None = None
    seq: int = 0
    """Its batch's arrival number (``PassInput.request_batch_seqs``); 0 in older passes."""


def request_batches(
    data: bytes, arrivals: list[float], seqs: list[int] | None = None
) -> list[list[Request]]:
    """Parse the joined request batches (the raw JSON the workflow joined byte for byte); a
    malformed envelope becomes a refused request. ``seqs`` are the batches' arrival numbers
    (none in passes recorded before them)."""
    raw_batches = loads(data)
    seqs = seqs or [0] * len(arrivals)
    # A batch under the per-request limit cannot hold an oversized request; only larger ones
    # pay for measuring each body.
    measure = len(data) > MAX_REQUEST_BYTES
    batches: list[list[Request]] = []
    for raw_batch, received_at, seq in zip(raw_batches, arrivals, seqs, strict=True):
        batch: list[Request] = []
        for position, raw in enumerate(raw_batch if isinstance(raw_batch, list) else []):
            request_id = raw.get("id") if isinstance(raw, dict) else None
            problem = id_problem(request_id)
            if problem is not None:
                request_id = f"~malformed-{received_at}-{position}"
                batch.append(
                    Request(
                        request_id,
                        Envelope(request_id, ""),
                        received_at,
                        0,
                        (ErrorCode.INVALID_REQUEST, problem),
                        seq,
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
            batch.append(Request(request_id, envelope, received_at, size, seq=seq))
        batches.append(batch)
    return batches


def id_problem(request_id: Any) -> str | None:
    """Why ``request_id`` cannot identify a request (its answer is stored under it)."""
    if not isinstance(request_id, str) or not request_id:
        return "a request envelope needs a non-empty string 'id'"
    if len(request_id) > MAX_ID_LENGTH:
        return f"a request id may have at most {MAX_ID_LENGTH} characters, got {len(request_id)}"
    problem = text_problem(request_id)
    return f"the request id cannot be stored: {problem}" if problem is not None else None


def batch_answers(
    batches: list[list[Request]], answers: dict[str, Response], refusals: dict[int, Response]
) -> list[str]:
    """Each batch's answers: its id's answer, or the refusal of a request reusing an id
    (:mod:`streamctl.domain.request_ids`, by position in the pass)."""
    position = itertools.count()
    # Responses are dataclasses, which dumps writes field by field (id, ok, result, ...).
    return [
        dumps([refusals.get(next(position)) or answers[r.id] for r in batch]) for batch in batches
    ]


def tally(
    requests: list[Request],
    answers: dict[str, Response],
    events: int,
    refusals: dict[int, Response],
) -> PassTally:
    """Requests by kind and outcome, counted here once per pass so the worker's metrics cost
    one counter update per kind and outcome, not one per request. An answer that asks the
    client to ask again (:data:`~streamctl.error_codes.ASK_AGAIN`: the pass had no time or
    no room for it) is the outcome :data:`ASKED_AGAIN`, not ``UNAVAILABLE``: the request is
    answered for real by a later pass, which counts that outcome."""
    counts: Counter[tuple[str, str]] = Counter()
    for position, request in enumerate(requests):
        answer = refusals.get(position) or answers[request.id]
        kind = request.envelope.kind
        counts[
            kind if isinstance(kind, str) and kind in m.REQUEST_TYPES else "invalid",
            _outcome(answer),
        ] += 1
    outcomes: dict[str, dict[str, int]] = {}
    for (kind, outcome), count in counts.items():
        outcomes.setdefault(kind, {})[outcome] = count
    return PassTally(len(requests), events, outcomes)


ASKED_AGAIN = "asked_again"
"""The outcome of a request its pass answered ``UNAVAILABLE ... ask again``."""


def _outcome(answer: Response) -> str:
    if answer.ok:
        return "ok"
    if asks_again(answer.error_code, answer.error_message):
        return ASKED_AGAIN
    return answer.error_code or "error"


def error_response(request_id: str, code: str, message: str, version: int) -> Response:
    return Response(
        id=request_id, ok=False, error_code=code, error_message=message, version=version
    )
