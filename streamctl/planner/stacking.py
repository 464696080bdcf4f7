"""Stacked windows: where a window operator over another window operator's output takes its
event time from, so that Spark needs no second watermark (plan analysis: the binder refuses at
create time what Spark cannot run, the Spark translation reads :func:`analyze`).

NebulaStream lets a window aggregation or a window join read the output of another one
(query_api.md "Stateful/Windowed Operators": operators consume a stream and produce a stream,
and a window names any UINT64 millisecond field of its input as its timestamp, such as the
inner window's ``start`` or ``end``, or a source's timestamp passed through a join). Spark
refuses a second ``withWatermark`` below a stateful operator ("Redefining watermark is
disallowed"); its watermark flows through stateful operators instead, on columns marked as event
time: the window struct a window aggregation or a window join groups by, and the event-time
column a join side was watermarked on.

:func:`trace` follows an outer window's event-time field down its input (filters, projections
that pass a column through, joins passing their inputs' fields through) to the operator that
produces it, and says which such marked column (:class:`Carrier`) holds a time ``T`` with
``T = e * 1000 + shift_us`` microseconds for the field's value ``e`` (ms) on every row:

* a window's START or END: the window struct ``W`` whose ``window_time`` (``W.end - 1 us``) is
  ``T``; a struct covers ``[start, start + L)`` with ``L`` its length (the window's size, or the
  slide for gapped windows assigned through tumbling windows of the slide's length), so START
  is ``window_time - L + 1 us`` and END ``window_time - (L - size) + 1 us``, plus the shift of
  the struct's own time (a struct assigned from a shifted time is shifted alike);
* a join input's event-time field, passed through the join: the timestamp the join side was
  watermarked on (``T = e * 1000 + BASE_SHIFT_US``: every source's event time is shifted by
  :data:`BASE_SHIFT_US`).

Anything else (an aggregate, a GROUP BY key or a computed value of a window's output used as the
outer event time, a UNION of windowed inputs) has no marked column in Spark:
:func:`trace` raises ``NOT_SUPPORTED`` saying so, rather than compute a different answer.

A stacked window defines no watermark of its own, so its ``WATERMARK`` delay has no effect:
the sources' watermark flows through (on bounded input every window is emitted either way).

Spark allows one marked column per input of a stateful operator. Every operator passes up the
carried columns that some window above reads (:attr:`Stacking.carry`); a join side that must
pass one (besides its window, whose mark the translation then drops: that side's state is kept
until the query ends) can pass only one: :func:`analyze` refuses plans that would need two.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, Literal

from streamctl.error_codes import NOT_SUPPORTED
from streamctl.planner import plan
from streamctl.planner.planning_errors import PlannerError

__all__ = [
    "BASE_SHIFT_US",
    "Carrier",
    "Stacking",
    "analyze",
    "has_stateful",
    "struct_length_ms",
    "trace",
]

BASE_SHIFT_US: Final = 1
"""A source's event time ``e`` (ms) is the Spark time ``e * 1000 + 1`` us: Spark takes an event
time at or before the watermark as late, and drops it in a stateful operator above another one
while the watermark is still 0 (the first batch): unshifted, a row at ``e = 0`` would be lost in
a second join. One microsecond later, every NES window still holds the same rows (windows are
assigned with the same shift). See docs/decisions.md."""

MAX_GAPPED_WINDOW_COPIES: Final = 64
"""A gapped sliding window is assigned exactly when each row is copied at most this often."""


@dataclass(frozen=True)
class Carrier:
    """A Spark column marked as event time that a stacked window reads its time from.

    ``name`` is the hidden column (``nes#carry#<operator position>#<role>``) that the producing
    operator adds to its output and that every operator up to the consumer passes through;
    ``kind`` is ``struct`` (a window struct: the time is its ``window_time``) or ``time`` (a
    timestamp); ``shift_us`` relates that time to the NebulaStream value (see the module)."""

    name: str
    kind: Literal["struct", "time"]
    shift_us: int
    producer: int
    """The position of the producing operator in :func:`streamctl.planner.plan.walk`."""


def has_stateful(operator: plan.Operator) -> bool:
    """Whether a window aggregation or window join is ``operator`` or below it."""
    return any(isinstance(op, plan.WindowAggregate | plan.WindowJoin) for op in plan.walk(operator))


def struct_length_ms(window: plan.Window) -> int:
    """The length of the window struct Spark assigns for ``window`` (its size, except for gapped
    windows too sparse to assign exactly: the slide, see spark/translate.py)."""
    if window.slide_ms > window.size_ms:
        step = math.gcd(window.size_ms, window.slide_ms)
        if window.size_ms // step > MAX_GAPPED_WINDOW_COPIES:
            return window.slide_ms
    return window.size_ms


def trace(
    operator: plan.Operator, field: str, position: Callable[[plan.Operator], int]
) -> Carrier | None:
    """The marked column holding the event time ``field`` of ``operator``'s output, or None when
    no window operator lies below (a source's column: the consumer defines its own watermark).
    ``position`` numbers operators (stable across runs, for stable column names)."""
    if isinstance(operator, plan.Scan | plan.InlineScan):
        return None
    if isinstance(operator, plan.Filter):
        return trace(operator.input, field, position)
    if isinstance(operator, plan.Project):
        named = next(c for c in operator.columns if c.name == field)
        if isinstance(named.expr, plan.ColumnExpr):
            return trace(operator.input, named.expr.name, position)
        if has_stateful(operator.input):
            raise _refuse("a value computed from a window's output")
        return None
    if isinstance(operator, plan.Union):
        if has_stateful(operator):
            raise _refuse("a UNION of windowed queries")
        return None
    if isinstance(operator, plan.WindowAggregate):
        if field in (operator.start_field, operator.end_field):
            inner = trace(operator.input, operator.time_column, position)
            return _window_carrier(operator, field, inner, position)
        raise _refuse("a GROUP BY key or an aggregate of a window's output")
    left_names = {f.name for f in operator.left.fields}
    if field in (operator.start_field, operator.end_field):
        inner = trace(operator.left, operator.left_time_column, position)
        return _window_carrier(operator, field, inner, position)
    side, time_column, role = (
        (operator.left, operator.left_time_column, "left")
        if field in left_names
        else (operator.right, operator.right_time_column, "right")
    )
    if has_stateful(side):
        return trace(side, field, position)
    if field == time_column:
        return Carrier(
            f"nes#carry#{position(operator)}#{role}", "time", BASE_SHIFT_US, position(operator)
        )
    raise _refuse("a join input's field that is not the join's own event-time field")


def _window_carrier(
    operator: plan.WindowAggregate | plan.WindowJoin,
    field: str,
    inner: Carrier | None,
    position: Callable[[plan.Operator], int],
) -> Carrier:
    length = struct_length_ms(operator.window)
    before_end = length if field == operator.start_field else length - operator.window.size_ms
    inner_shift = BASE_SHIFT_US if inner is None else inner.shift_us
    return Carrier(
        f"nes#carry#{position(operator)}#window",
        "struct",
        before_end * 1000 + inner_shift - 1,
        position(operator),
    )


def _refuse(what: str) -> PlannerError:
    return PlannerError(
        NOT_SUPPORTED,
        f"a window whose event time is {what} is not supported on Spark: a window over another "
        "window's or join's output must use that window's START or END, or the event-time "
        "field of a joined source, as its timestamp",
    )


@dataclass
class Stacking:
    """What every operator of a plan carries up (by position in :func:`plan.walk`): the hidden
    columns of :attr:`carry` (its output adds them), and for each window operator's input
    (``(position, "input"|"left"|"right")``) the carrier its time comes from (:attr:`time`, None:
    a watermark of its own) and the join side's time it keeps for a window above
    (:attr:`keep`)."""

    positions: dict[int, int] = field(default_factory=dict)
    carry: dict[int, frozenset[Carrier]] = field(default_factory=dict)
    time: dict[tuple[int, str], Carrier | None] = field(default_factory=dict)
    keep: dict[tuple[int, str], Carrier | None] = field(default_factory=dict)

    def position(self, operator: plan.Operator) -> int:
        return self.positions[id(operator)]


def analyze(root: plan.Operator) -> Stacking:
    """The stacking of ``root``'s plan; raises ``NOT_SUPPORTED`` (:class:`PlannerError`) for a
    stacked window Spark cannot run faithfully."""
    result = Stacking(positions={id(op): i for i, op in enumerate(plan.walk(root))})
    subtrees = {id(op): {result.positions[id(o)] for o in plan.walk(op)} for op in plan.walk(root)}

    def below(carry: frozenset[Carrier], operator: plan.Operator) -> frozenset[Carrier]:
        return frozenset(c for c in carry if c.producer in subtrees[id(operator)])

    def side(
        owner: int,
        name: str,
        operator: plan.Operator,
        time_column: str,
        carry: frozenset[Carrier],
        keep: Carrier | None,
        gapped: bool = False,
    ) -> None:
        carrier = trace(operator, time_column, result.position)
        if carrier is not None and name != "input" and gapped:
            # On Spark such a join emits nothing (see docs/decisions.md): refused, not wrong.
            raise PlannerError(
                NOT_SUPPORTED,
                "a window join with gaps between its windows (ADVANCE BY larger than SIZE) over "
                "the output of another window or join is not supported on Spark",
            )
        result.time[(owner, name)] = carrier
        result.keep[(owner, name)] = keep
        if len(carry) + (keep is not None) > 1:
            raise _refuse_two()
        visit(operator, carry if carrier is None else carry | {carrier})

    def visit(operator: plan.Operator, carry: frozenset[Carrier]) -> None:
        position = result.position(operator)
        result.carry[position] = carry
        if isinstance(operator, plan.Scan | plan.InlineScan):
            return
        if isinstance(operator, plan.Filter | plan.Project):
            visit(operator.input, carry)
        elif isinstance(operator, plan.Union):
            if carry:
                raise _refuse("a UNION of windowed queries")
            visit(operator.left, carry)
            visit(operator.right, carry)
        elif isinstance(operator, plan.WindowAggregate):
            side(position, "input", operator.input, operator.time_column, frozenset(), None)
        else:
            own = {c.name.rsplit("#", 1)[1]: c for c in carry if c.producer == position}
            if "window" in own and (below(carry, operator.left) or "left" in own):
                # The join's window is its left side's struct, which loses its event-time mark
                # when that side carries another column (the translation's rule).
                raise _refuse_two()
            for name, child, time_column in (
                ("left", operator.left, operator.left_time_column),
                ("right", operator.right, operator.right_time_column),
            ):
                gapped = operator.window.slide_ms > operator.window.size_ms
                side(position, name, child, time_column, below(carry, child), own.get(name), gapped)

    visit(root, frozenset())
    return result


def _refuse_two() -> PlannerError:
    return PlannerError(
        NOT_SUPPORTED,
        "this stacking of windows is not supported on Spark: a join input would have to carry "
        "two event times up to the windows above it (Spark keeps one per stream); use the same "
        "timestamp for the windows above the join",
    )
