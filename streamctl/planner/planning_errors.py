"""The one exception the planner raises: :class:`PlannerError`, with a stable code.

Guarantees:

* :func:`streamctl.planner.parser.parse_statements`, :func:`~streamctl.planner.parser.parse_query`
  and :func:`streamctl.planner.binder.bind_query` raise nothing but :class:`PlannerError`, whatever
  text or catalog they are given (the coordinator turns it into a per-request error response).
* ``code`` is one of :data:`streamctl.error_codes.PLANNER_ERROR_CODES` (declared there);
  ``message`` names the problem and, when the error belongs to a place in the statement,
  starts with ``line L, column C:``.
* :attr:`PlannerError.nes_code` is the NebulaStream error number for the same failure, so a
  systest runner can compare against ``ERROR 2003``-style expectations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamctl.error_codes import NES_ERROR_NUMBERS, PLANNER_ERROR_CODES

if TYPE_CHECKING:
    from streamctl.planner import ast


class PlannerError(Exception):
    """A statement the planner refuses: ``code`` says why, ``message`` says what and where."""

    def __init__(
        self, code: str, message: str, line: int | None = None, column: int | None = None
    ) -> None:
        if code not in PLANNER_ERROR_CODES:
            raise ValueError(f"unknown planner error code {code!r}")
        self.code = code
        self.line = line
        self.column = column
        self.message = f"line {line}, column {column}: {message}" if line is not None else message
        super().__init__(self.message)

    @property
    def nes_code(self) -> int:
        """NebulaStream's error number for this failure (e.g. 2003 for an unknown column)."""
        return NES_ERROR_NUMBERS[self.code]

    def __reduce__(self) -> tuple[object, ...]:
        # Keep the error picklable (activities ship exceptions between processes).
        return (_rebuild, (self.code, self.message, self.line, self.column))

    def __repr__(self) -> str:
        return f"PlannerError({self.code!r}, {self.message!r})"


def _error(code: str, message: str, node: ast.Node) -> PlannerError:
    return PlannerError(code, message, node.line, node.column)


def _rebuild(code: str, message: str, line: int | None, column: int | None) -> PlannerError:
    error = PlannerError(code, message)
    error.line, error.column = line, column
    return error
