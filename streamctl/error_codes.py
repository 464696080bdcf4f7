"""Every error code the product answers with: one home, each code declared once.

A request that fails is answered with a :class:`~streamctl.protocol.messages.Response` whose
``error_code`` is one of these:

* the codes of :class:`ErrorCode` (a malformed request, a missing or duplicate entity, no agent
  available, ...);
* for a statement the planner refuses, the planner's code (:data:`PLANNER_ERROR_CODES`,
  carried by :class:`streamctl.planner.planning_errors.PlannerError`); :data:`NES_ERROR_NUMBERS`
  gives
  NebulaStream's error number for each.

Codes are stable: clients map them to exception types (:mod:`streamctl.client.coordinator_errors`).

A leaf module: it imports nothing of the project, so every package may import it.
"""

from __future__ import annotations

from typing import Final


class ErrorCode:
    """Error codes of per-request failures. Stable: clients map them to exception types."""

    INVALID_REQUEST = "INVALID_REQUEST"
    UNKNOWN_KIND = "UNKNOWN_KIND"
    UNSUPPORTED_VERSION = "UNSUPPORTED_VERSION"
    TOO_LARGE = "TOO_LARGE"
    INVALID_NAME = "INVALID_NAME"
    INVALID_SCHEMA = "INVALID_SCHEMA"
    NOT_FOUND = "NOT_FOUND"
    ALREADY_EXISTS = "ALREADY_EXISTS"
    HAS_DEPENDENTS = "HAS_DEPENDENTS"
    NOT_SUPPORTED = "NOT_SUPPORTED"
    UNAVAILABLE = "UNAVAILABLE"  # no agent can take the work now; retry later
    ID_REUSED = "ID_REUSED"  # the request id already names a different request
    INTERNAL = "INTERNAL"
    # Statements the planner refuses answer the planner's code (PLANNER_ERROR_CODES below):
    # SYNTAX_ERROR, UNKNOWN_SOURCE, UNKNOWN_SINK, UNKNOWN_COLUMN, AMBIGUOUS_COLUMN,
    # TYPE_MISMATCH, SINK_SCHEMA_MISMATCH, INVALID_STATEMENT.


ASK_AGAIN: Final = "; ask again"
"""Ends the message of an ``UNAVAILABLE`` answer that a pass hands back in place of an answer
it could not give now, and never stores: a read whose result did not fit the pass's answers
(asked again, it is read again), a write whose answer did not fit (it was applied and its
answer stored: asked again, the stored answer comes back), a request the pass had no time
left for (not applied: asked again, it is applied then). The same request asked again under
the same id gets its answer; the client library does so by itself, within the request's
deadline. No stored answer ends with it (:func:`asks_again`), so asking again never loops."""


def asks_again(error_code: str | None, error_message: object) -> bool:
    """Whether an answer is one to ask again for (:data:`ASK_AGAIN`)."""
    return (
        error_code == ErrorCode.UNAVAILABLE
        and isinstance(error_message, str)
        and error_message.endswith(ASK_AGAIN)
    )


# ---- the planner's codes (streamctl.planner.planning_errors.PlannerError.code)
# ------------------------

SYNTAX_ERROR: Final = "SYNTAX_ERROR"
UNKNOWN_SOURCE: Final = "UNKNOWN_SOURCE"
UNKNOWN_SINK: Final = "UNKNOWN_SINK"
UNKNOWN_COLUMN: Final = "UNKNOWN_COLUMN"
AMBIGUOUS_COLUMN: Final = "AMBIGUOUS_COLUMN"
TYPE_MISMATCH: Final = "TYPE_MISMATCH"
SINK_SCHEMA_MISMATCH: Final = "SINK_SCHEMA_MISMATCH"
NOT_SUPPORTED: Final = ErrorCode.NOT_SUPPORTED
"""The planner refuses what Spark cannot run faithfully with the request code of that name."""
INVALID_STATEMENT: Final = "INVALID_STATEMENT"
UNKNOWN_WORKER: Final = "UNKNOWN_WORKER"

PLANNER_ERROR_CODES: Final = frozenset(
    {
        SYNTAX_ERROR,
        UNKNOWN_SOURCE,
        UNKNOWN_SINK,
        UNKNOWN_COLUMN,
        AMBIGUOUS_COLUMN,
        TYPE_MISMATCH,
        SINK_SCHEMA_MISMATCH,
        NOT_SUPPORTED,
        INVALID_STATEMENT,
        UNKNOWN_WORKER,
    }
)
"""The codes a :class:`~streamctl.planner.planning_errors.PlannerError` may carry."""

NES_ERROR_NUMBERS: Final[dict[str, int]] = {
    SYNTAX_ERROR: 2000,  # InvalidQuerySyntax
    UNKNOWN_SOURCE: 2030,  # UnknownSourceName
    UNKNOWN_SINK: 2033,  # UnknownSinkName
    UNKNOWN_COLUMN: 2003,  # CannotInferSchema (what NebulaStream reports for unknown fields)
    AMBIGUOUS_COLUMN: 2003,
    TYPE_MISMATCH: 2006,  # DifferentFieldTypeExpected
    SINK_SCHEMA_MISMATCH: 2003,
    NOT_SUPPORTED: 2008,  # UnsupportedQuery
    INVALID_STATEMENT: 2029,  # InvalidStatement
    UNKNOWN_WORKER: 2300,  # a source placed on a worker that does not exist (sources/InlineSource)
}
"""NebulaStream's error number for each planner error code."""
