"""Translate a plan IR into a Spark Structured Streaming DataFrame (imports pyspark; the
planner itself never does).

:func:`build` turns a :class:`~streamctl.planner.plan.QueryPlan` into a streaming DataFrame
whose columns are the plan's output (the sink's columns, in order, with the Spark types of
:func:`streamctl.spark.spark_types.spark_type`), plus how to run it.

Semantics it guarantees (NebulaStream's, where Spark's differ):

* **Scalar expressions** (C++ integer arithmetic, IEEE floats, conversions) are
  :mod:`streamctl.spark.expression_columns`.
* **NULL follows ``nes-docs/null_handling.md``.** Scalar rules coincide with Spark's SQL
  three-valued logic: arithmetic, ``CONCAT`` and comparisons with a NULL operand are NULL
  (``NULL == NULL`` too); ``FALSE AND NULL`` is FALSE, ``TRUE OR NULL`` TRUE, other mixes NULL;
  ``ISNULL(x)`` is never NULL; a NULL predicate (WHERE, HAVING, join condition) drops the row;
  GROUP BY puts all NULL keys into one group. Aggregates differ from SQL and are translated
  explicitly (:mod:`streamctl.spark.aggregates`): ``SUM``, ``AVG``, ``MIN``, ``MAX`` and
  ``MEDIAN`` are NULL when *any* input row of the window and group is NULL (SQL skips NULLs), so
  an all-NULL window gives NULL too; ``COUNT(x)`` skips NULLs (0 over an all-NULL window) and
  ``COUNT(*)`` counts rows, both NOT NULL UINT64. ``AVG`` is a sum kept like NebulaStream's
  (integers in INT64 or UINT64, wrapping; floats in a double) divided by the count. Windows
  without rows are not emitted. An aggregate's argument may be any expression (``SUM(a * b)``:
  NULL wherever an operand is); expressions around aggregates are projections over the window's
  output. A window aggregation without aggregate functions emits one row per non-empty window
  and key.
* To get wrapping instead of errors, the plan's operators are built with
  ``spark.sql.ansi.enabled`` set to ``false`` (see :data:`SPARK_CONF`); Spark fixes an
  expression's overflow behaviour when the DataFrame is analysed, so the session's setting is
  restored afterwards (:func:`spark_conf` holds a process-wide lock meanwhile, so the agent's
  builds, explains and starts on one session never see each other's settings). Spark's
  readers of the sources are made before that, outside the lock (they may stage data or
  reach a remote file system, and must not hold up other queries' starts), so a reader
  analysed meanwhile may see another build's settings; a source given as a
  :class:`~streamctl.spark.sql_text.Relation` (its parsing steps, not yet analysed) is
  analysed with the scans, filters and projections above it, as one query, under
  :data:`SPARK_CONF`. A source's parsing means the same under both (``tests/connectors``). Under
  Spark Connect, analysis happens when the query starts: start it inside :func:`spark_conf`.
* **Windows** use the event-time column (milliseconds ``e``) as the Spark time ``e`` ms plus
  :data:`streamctl.planner.stacking.BASE_SHIFT_US` (windows are assigned shifted alike); start
  and end are UINT64 milliseconds; windows start at multiples of the slide from time 0
  (NebulaStream creates no windows before 0) and cover ``[start, start + size)``; rows
  without an event time join no window; each window is emitted once, when the watermark
  (``allowed_lateness_ms`` behind the latest event) passes its end (append mode).
  A sliding window whose slide exceeds its size (gaps, which Spark's ``window()`` refuses) is
  assigned through Spark's windows of the size every gcd(size, slide) ms, keeping those that
  start at a multiple of the slide; when that would copy a row more than
  :data:`streamctl.planner.stacking.MAX_GAPPED_WINDOW_COPIES` times, through a tumbling
  window of the slide's length minus the rows in its gap, which Spark emits only once the
  watermark passes the slide's end (later on an unbounded stream, the same rows; bounded
  input flushes every window at its end).
* **Bounded input** (``bounded=True``): every window is emitted when the input ends. Each
  window operator's input is unioned with a one-row *end-of-input marker* stream (Spark's
  ``rate-micro-batch`` source, one row per batch: under ``availableNow`` exactly one, in the
  first batch, with no file listing per batch and nothing on disk but the checkpoint's
  offsets) whose event time is :data:`MARKER_EVENT_TIME_MS`; the watermark (Spark SQL's
  ``WATERMARK`` clause: a window's input, its aggregation and a single source's parsing are
  one :class:`~streamctl.spark.sql_text.Relation`, analysed once) is defined after that
  union and the marker row
  is dropped by a filter on the event-time column itself (a filter on any other column would
  be pushed below the watermark into the scans). With ``trigger(availableNow=True)`` Spark
  then runs one more, data-less batch that emits the remaining windows. Requirement: bounded
  sources must deliver their rows in the first micro-batch (no ``maxFilesPerTrigger``-style
  rate limits), else rows after the marker's batch count as late.
  Marker rows hold 0, FALSE or '' rather than NULL (:func:`_marker_value`), and each conjunct
  of a join predicate over one side only is guarded by that side's window
  (:mod:`streamctl.spark.join_predicate`): Spark pushes such filters, and those it infers
  (``isnotnull(id)`` from ``id = id2``), into the side below its watermark, where they would
  drop the marker and no window above the join would ever be emitted.
* **Window joins** pair rows of both inputs that fall into the same window (by each side's
  own event-time column): both sides get a watermark (and, when bounded, their own marker),
  windows are assigned per side and the join condition includes window equality, so a pair
  is produced once per common window, as NebulaStream does. Equalities between the sides
  become Spark's join keys in a form cheap to hash and compare
  (:mod:`streamctl.spark.join_predicate`).
* **Stacked windows** (a window aggregation or join over another one's output, joins of three
  or more streams) define no second watermark, which Spark refuses: the outer window takes
  its time from a column Spark marks as event time and carries through the inner operator --
  the inner window's struct when the outer time is its START or END, the join side's
  timestamp when it is a joined source's event-time field -- assigned with Spark windows
  shifted so that they hold exactly the rows whose NebulaStream value lies in
  ``[start, start + size)`` (:mod:`streamctl.planner.stacking`, which also refuses at bind
  time what has no such column). Spark's multiple stateful operators (append mode) pass the
  sources' watermark through, so on bounded input the markers flush every level; a join side
  that carries a timestamp up keeps its state until the query ends.
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from pyspark.sql import DataFrame, SparkSession

from streamctl.error_codes import INVALID_STATEMENT, NOT_SUPPORTED
from streamctl.planner import plan, stacking
from streamctl.planner.planning_errors import PlannerError
from streamctl.spark import sql_text as S
from streamctl.spark.aggregates import nes_aggregate
from streamctl.spark.expression_columns import (
    column,
    expression,
    to_long_bits,
    wrap_value,
)
from streamctl.spark.join_predicate import join_predicate
from streamctl.spark.spark_types import quote_identifier, spark_type_ddl
from streamctl.spark.sql_text import Relation, Sql

__all__ = [
    "EXECUTION_CONF",
    "MARKER_EVENT_TIME_MS",
    "SPARK_CONF",
    "TranslatedQuery",
    "build",
    "spark_conf",
]

EXECUTION_CONF: Final[Mapping[str, str]] = {
    # Left to right, as C++'s && and ||: the right operand of AND/OR is not evaluated once the
    # left one decides (the product's side of what the NES docs leave open; NES fails a query
    # on an integer division by zero); the left operand always is.
    # Spark's OR and AND short-circuit, but subexpression elimination would compute an
    # expression named twice in the right operand (the float comparisons name theirs twice)
    # once per row before the AND/OR, and fail the query where the left operand decided.
    "spark.sql.subexpressionElimination.skipForShortcutExpr": "true",
    # Expressions reach Spark as SQL text (streamctl.spark.sql_text), and its parser would
    # replace a ${...} in a quoted name (a column `a${b}`) by a setting or an environment
    # variable before reading the text.
    "spark.sql.variable.substitute": "false",
}
"""Spark settings the translated expressions rely on while they run: every session that runs
them has them (:func:`streamctl.agent.spark_session.build_spark_session`; under Spark
Connect through :data:`SPARK_CONF`, which the query starts inside)."""

SPARK_CONF: Final[Mapping[str, str]] = {"spark.sql.ansi.enabled": "false", **EXECUTION_CONF}
"""Spark settings the translated expressions are built (and, under Spark Connect, must be
started) with."""

MARKER_EVENT_TIME_MS: Final = 3_000_000_000_000_000
"""Event time of end-of-input marker rows (year ~97000): later than any real window end."""

_MARKER: Final = "nes#marker"
_EVENT_TIME: Final = "nes#event_time"
_WINDOW: Final = "nes#window"
_ROW_COUNT: Final = "nes#rows"

ReadSource = Callable[[str], DataFrame | Relation]
"""Returns a streaming DataFrame with exactly a logical source's columns (catalog names), or
the :class:`~streamctl.spark.sql_text.Relation` that becomes one (its steps are then analysed
with the operators above it, under :data:`SPARK_CONF`)."""

Rows = DataFrame | Relation
"""An operator's rows: a DataFrame, or scans, filters and projections over a source's
Relation not yet analysed (:func:`_frame`)."""
ReadInline = Callable[[plan.InlineScan], DataFrame]
"""Returns a streaming DataFrame with exactly an inline source's schema columns."""


@dataclass(frozen=True)
class TranslatedQuery:
    """A plan ready to start: ``dataframe.writeStream.outputMode(output_mode)``, with
    ``trigger(availableNow=True)`` when ``available_now``.

    ``flushes_windows_at_end`` says that end-of-input markers were wired in (bounded windowed
    query). ``spark_conf`` are the settings the DataFrame was analysed with."""

    dataframe: DataFrame
    output_mode: str
    available_now: bool
    flushes_windows_at_end: bool
    spark_conf: Mapping[str, str]


_CONF_LOCK: Final = threading.RLock()
"""Held while a block of :func:`spark_conf` runs: one lock for the process, whose agent has
one session. Only analysis and starts run inside (never a source's reader): a start waits for
it without a timeout."""


@contextlib.contextmanager
def spark_conf(session: SparkSession, conf: Mapping[str, str] = SPARK_CONF) -> Iterator[None]:
    """Apply ``conf`` to the session for the duration of the block, then restore it.

    One thread at a time (:data:`_CONF_LOCK`, re-entrant): a session's settings are shared by
    every thread using it, so a second block running meanwhile would analyse its DataFrames
    with the first one's settings, and restoring in the other order would leave the session
    on the planner's settings for good. An empty ``conf`` holds the lock alone: the session's
    own settings are in force for the whole block."""
    with _CONF_LOCK:
        previous = {key: session.conf.get(key, None) for key in conf}
        for key, value in conf.items():
            session.conf.set(key, value)
        try:
            yield
        finally:
            for key, old in previous.items():
                if old is None:
                    session.conf.unset(key)
                else:
                    session.conf.set(key, old)


def build(
    query_plan: plan.QueryPlan,
    session: SparkSession,
    read_source: ReadSource,
    *,
    bounded: bool,
    read_inline: ReadInline | None = None,
) -> TranslatedQuery:
    """Build the streaming DataFrame of ``query_plan``.

    ``read_source(name)`` gives a logical source's rows; ``read_inline(scan)`` an inline
    source's (queries with inline sources need it). ``bounded`` says that every source ends
    (files, inline data): windows are then flushed at the end and the query should run with
    ``trigger(availableNow=True)``.

    Raises :class:`~streamctl.planner.planning_errors.PlannerError` for plans it cannot run."""
    # Spark's readers are made with the session's own settings (connectors keep their
    # semantics); a source's parsing steps (a Relation) and the scans, filters and
    # projections above it are analysed as one query under SPARK_CONF, with the plan's other
    # operators (module docstring).
    inputs = _read_inputs(query_plan.root, read_source, read_inline)
    translator = _Translator(session, inputs, bounded, query_plan.root)
    with spark_conf(session):
        try:
            frame = _frame(translator.operator(query_plan.root))
        except RecursionError:
            raise PlannerError(INVALID_STATEMENT, "plan is nested too deeply") from None
    return TranslatedQuery(
        dataframe=frame,
        output_mode="append",
        available_now=bounded,
        flushes_windows_at_end=translator.markers > 0,
        spark_conf=dict(SPARK_CONF),
    )


def _frame(rows: Rows) -> DataFrame:
    """``rows`` as a DataFrame: a Relation is analysed here, with the settings in force."""
    return rows.frame() if isinstance(rows, Relation) else rows


def _read_inputs(
    root: plan.Operator, read_source: ReadSource, read_inline: ReadInline | None
) -> dict[int, Rows]:
    """The rows of every scan of the plan, keyed by the scan node's identity."""
    frames: dict[int, Rows] = {}
    for operator in plan.walk(root):
        if isinstance(operator, plan.Scan):
            frames[id(operator)] = read_source(operator.source)
        elif isinstance(operator, plan.InlineScan):
            if read_inline is None:
                raise PlannerError(
                    NOT_SUPPORTED, f"inline source {operator.id} needs a reader for inline sources"
                )
            frames[id(operator)] = read_inline(operator)
    return frames


def _marker_value(type_name: str) -> Sql:
    """A marker row's value for a column: never NULL (0, FALSE or the empty string), because
    Spark pushes filters it infers from a join condition (``isnotnull(id)`` from ``id = id2``)
    below the watermark, where a NULL would drop the marker before it moves the watermark."""
    if type_name == "BOOLEAN":
        value = S.lit(False)
    elif type_name in ("CHAR", "VARSIZED"):
        value = S.lit("")
    else:
        value = S.lit(0)
    return value.cast(spark_type_ddl(type_name))


class _Translator:
    def __init__(
        self,
        session: SparkSession,
        inputs: dict[int, Rows],
        bounded: bool,
        root: plan.Operator,
    ) -> None:
        self.session = session
        self.inputs = inputs
        self.bounded = bounded
        self.markers = 0
        # Which hidden event-time columns each operator carries up for stacked windows above
        # (also refuses, as the binder did, what Spark cannot run).
        self.stacking = stacking.analyze(root)

    def carried(self, operator: plan.Operator) -> list[stacking.Carrier]:
        """The hidden columns ``operator``'s output adds, in a stable order."""
        return sorted(self.stacking.carry[self.stacking.position(operator)], key=_carrier_order)

    # -- operators

    def frame(self, operator: plan.Operator) -> DataFrame:
        """:meth:`operator` as a DataFrame."""
        return _frame(self.operator(operator))

    def operator(self, operator: plan.Operator) -> Rows:
        """``operator``'s rows, plus the hidden columns it carries (event-time columns a
        stacked window above reads; operators pass them through). Scans, filters and
        projections over a source's Relation stay steps of it."""
        if isinstance(operator, plan.Scan | plan.InlineScan):
            return S.project(
                self.inputs[id(operator)],
                [
                    column(name).cast(spark_type_ddl(f.type)).alias(f.name)
                    for name, f in zip(operator.source_columns, operator.fields, strict=True)
                ],
            )
        if isinstance(operator, plan.Filter):
            return S.where(self.operator(operator.input), expression(operator.predicate))
        if isinstance(operator, plan.Project):
            return S.project(
                self.operator(operator.input),
                [
                    *(expression(c.expr).alias(c.name) for c in operator.columns),
                    *(column(c.name) for c in self.carried(operator)),
                ],
            )
        if isinstance(operator, plan.Union):
            left = self.frame(operator.left)
            right = S.project(
                self.frame(operator.right),
                [
                    column(r.name).alias(left_field.name)
                    for r, left_field in zip(
                        operator.right.fields, operator.left.fields, strict=True
                    )
                ],
            )
            return left.unionByName(right)
        if isinstance(operator, plan.WindowAggregate):
            return self.window_aggregate(operator)
        return self.window_join(operator)

    def windowed_input(
        self,
        owner: plan.WindowAggregate | plan.WindowJoin,
        side: str,
        operator: plan.Operator,
        time_column: str,
    ) -> tuple[Relation, str, int]:
        """The input ``operator`` (``side`` of the window operator ``owner``) with event time,
        watermark, (marker) and window assignment: adds the struct column returned, named
        ``nes#window`` (``nes#window#<side>`` for a join's side), and returns the shift of
        the time windows were assigned from (:mod:`streamctl.planner.stacking`): windows
        start at ``k * slide`` ms plus ``shift`` us. Keeps the hidden columns ``operator``
        carries, and the event time when a window above reads it (a join side's).

        Built as one :class:`~streamctl.spark.sql_text.Relation` with the input's own steps (a
        source's parsing): Spark analyses it once, not once per step (a dozen)."""
        window = owner.window
        # An aggregation's input keeps the names it always had (its state's key schema).
        suffix = "" if side == "input" else f"#{side}"
        position = self.stacking.position(owner)
        carrier = self.stacking.time[(position, side)]
        keep = self.stacking.keep[(position, side)]
        passed = [c for c in self.carried(operator) if c != carrier]
        event_time = _EVENT_TIME + suffix
        rows = self.operator(operator)
        frame = rows if isinstance(rows, Relation) else Relation(rows)
        if carrier is None:
            time_type = next(f.type for f in operator.fields if f.name == time_column)
            event_ms = to_long_bits(column(time_column), time_type)
            if self.bounded:
                frame = S.project(frame, ["*", S.lit(False).alias(_MARKER)])
                frame = frame.union_all(self.marker_rows(operator.fields, frame.columns))
                event_ms = S.when(column(_MARKER), MARKER_EVENT_TIME_MS).otherwise(event_ms)
            # One microsecond after the millisecond (stacking.BASE_SHIFT_US): an event at 0
            # would be "late" for a stateful operator above another one in the first batch.
            event_us = event_ms * 1000 + stacking.BASE_SHIFT_US
            frame = S.project(frame, ["*", S.call("timestamp_micros", event_us).alias(event_time)])
            frame = frame.watermark(event_time, window.allowed_lateness_ms)
            if self.bounded:
                # The filter must be on the event-time column: Spark pushes filters on other
                # columns below the watermark, where they would drop the marker too early.
                marker_time = S.call("timestamp_millis", MARKER_EVENT_TIME_MS)
                frame = frame.where(column(event_time) < marker_time).drop(_MARKER)
            # A row without an event time belongs to no window (filters on the event-time
            # column stay above the watermark).
            frame = frame.where(column(event_time).isNotNull())
            shift = stacking.BASE_SHIFT_US
        else:
            # A stacked window: no watermark of its own (Spark refuses a second one); the time
            # is the marked column the window operator below carries up, whose watermark is
            # the sources' (bounded sources' markers included).
            carried = column(carrier.name)
            time = S.call("window_time", carried) if carrier.kind == "struct" else carried
            frame = S.project(frame, ["*", time.alias(event_time)])
            shift = carrier.shift_us
        window_name = _WINDOW + suffix
        size = f"{window.size_ms} milliseconds"
        slide = f"{window.slide_ms} milliseconds"
        offset = f"{shift % (window.slide_ms * 1000)} microseconds"
        nes_start = _nes_ms(_window_field(window_name, "start"), shift)
        keep_starts_at_slides = False
        assigned: Sql
        if window.kind == "tumbling":
            assigned = S.call("window", column(event_time), size, size, offset)
        elif window.slide_ms > window.size_ms:
            # Gaps between windows, which Spark's window() refuses (slide > size); a row falls
            # into at most one window, the one starting at the last multiple of the slide.
            step = math.gcd(window.size_ms, window.slide_ms)
            if stacking.struct_length_ms(window) == window.size_ms:
                # Spark's windows of the size every gcd(size, slide) include every window that
                # starts at a multiple of the slide: keep only those. Exact windows, emitted
                # when the watermark passes their own end.
                step_offset = f"{shift % (step * 1000)} microseconds"
                assigned = S.call(
                    "window", column(event_time), size, f"{step} milliseconds", step_offset
                )
                keep_starts_at_slides = True
            else:
                # Too many copies per row: a tumbling window as long as the slide, minus the
                # rows in its gap (size or more after its start); _window_bound reports the
                # true end, but Spark emits the window only when the watermark passes the
                # slide's end (same rows, later).
                assigned = S.call("window", column(event_time), slide, slide, offset)
                event = _nes_ms(column(event_time), shift)
                in_window = S.call("pmod", event, window.slide_ms)
                frame = frame.where(in_window < window.size_ms)
        else:
            assigned = S.call("window", column(event_time), size, slide, offset)
        kept: list[Sql | str] = [column(c.name) for c in passed]
        if keep is not None:
            kept.append(column(event_time).alias(keep.name))
        window_struct = assigned.alias(window_name)
        if kept:
            # Spark takes one event-time column per stream: the carried one keeps its mark, the
            # window struct loses it (a new struct of its fields), so this join side keeps its
            # state until the query ends (stacking.analyze allows one carried column a side).
            frame = S.project(
                frame, [*(column(f.name) for f in operator.fields), *kept, window_struct]
            )
            window_struct = S.call(
                "named_struct",
                "start",
                _window_field(window_name, "start"),
                "end",
                _window_field(window_name, "end"),
            ).alias(window_name)
            names = [*(c.name for c in passed), *([] if keep is None else [keep.name])]
            frame = S.project(
                frame,
                [
                    *(column(f.name) for f in operator.fields),
                    *(column(name) for name in names),
                    window_struct,
                ],
            )
        else:
            frame = S.project(frame, [*(column(f.name) for f in operator.fields), window_struct])
        if keep_starts_at_slides:
            frame = frame.where(S.call("pmod", nes_start, window.slide_ms) == 0)
        if window.kind == "sliding":
            frame = frame.where(nes_start >= 0)
        return frame, window_name, shift

    def marker_rows(self, fields: tuple[plan.Field, ...], columns: list[str]) -> Relation:
        """``columns`` (``fields`` and the marker flag) of one end-of-input marker row per
        batch; under ``availableNow`` Spark takes the source's offset once, at the start, so
        the first batch holds the only one (a restart from the checkpoint reads one more, after
        the watermark passed it: filtered out).

        The values are computed from the rate source's counter (``value``, never negative),
        never constants: a restart's batch holds the new marker row and no input (Spark plans
        a source without new rows as an empty relation and drops that side of the union), and
        with constants the optimizer would then rewrite the plan's aggregates (``COUNT(x)`` of
        a value that cannot be NULL is ``COUNT(1)``, a constant grouping key is dropped) into
        a different state schema, which Spark refuses to restore."""
        self.markers += 1
        stream = (
            self.session.readStream.format("rate-micro-batch")
            .option("rowsPerBatch", 1)
            .option("numPartitions", 1)
            .load()
        )
        present = S.col("value") >= 0  # always true; not a constant to the optimizer
        values: dict[str, Sql] = {f.name: S.when(present, _marker_value(f.type)) for f in fields}
        values[_MARKER] = present
        return S.project(Relation(stream), [values[name].alias(name) for name in columns])

    def window_aggregate(self, operator: plan.WindowAggregate) -> Relation:
        frame, window_name, shift = self.windowed_input(
            operator, "input", operator.input, operator.time_column
        )
        keys = [
            (column(window_name), window_name),
            *((expression(key.expr), key.name) for key in operator.keys),
        ]
        values = [nes_aggregate(a).alias(a.name) for a in operator.aggregates]
        # Spark needs one aggregate at least: a window without any counts its rows (unused).
        aggregated = frame.aggregate(keys, values or [S.call("count", 1).alias(_ROW_COUNT)])
        # Only this window's struct can be carried: nothing else passes an aggregation.
        own = [column(window_name).alias(c.name) for c in self.carried(operator)]
        return S.project(
            aggregated,
            [
                _window_bound(window_name, "start", operator.window, shift).alias(
                    operator.start_field
                ),
                _window_bound(window_name, "end", operator.window, shift).alias(operator.end_field),
                *(column(key.name) for key in operator.keys),
                *(wrap_value(column(a.name), a.type).alias(a.name) for a in operator.aggregates),
                *own,
            ],
        )

    def window_join(self, operator: plan.WindowJoin) -> DataFrame:
        left, left_window, left_shift = self.windowed_input(
            operator, "left", operator.left, operator.left_time_column
        )
        right, right_window, right_shift = self.windowed_input(
            operator, "right", operator.right, operator.right_time_column
        )
        if left_shift == right_shift:
            # Equal window structs: Spark sees the window equality and drops old state.
            condition = column(left_window) == column(right_window)
        else:
            # Windows assigned from differently shifted times (a stacked side): equal windows
            # are equal NebulaStream starts.
            condition = _window_bound(
                left_window, "start", operator.window, left_shift
            ) == _window_bound(right_window, "start", operator.window, right_shift)
        predicate = join_predicate(operator, left_window, right_window)
        if predicate.keys:
            left = S.project(left, ["*", *predicate.key_columns("left")])
            right = S.project(right, ["*", *predicate.key_columns("right")])
            condition = condition & predicate.keys_equal()
        if predicate.rest is not None:
            condition = condition & predicate.rest
        joined = left.frame().join(right.frame(), condition.column(), "inner")
        read_back = predicate.read_back("left") | predicate.read_back("right")
        position = self.stacking.position(operator)
        carried = self.carried(operator)
        # What the sides carry (their own time included) passes; this join's window is the
        # left side's struct.
        passed = [column(c.name) for c in carried if c.producer != position or c.kind == "time"]
        window_struct = [
            column(left_window).alias(c.name)
            for c in carried
            if c.producer == position and c.kind == "struct"
        ]
        return S.project(
            joined,
            [
                _window_bound(left_window, "start", operator.window, left_shift).alias(
                    operator.start_field
                ),
                _window_bound(left_window, "end", operator.window, left_shift).alias(
                    operator.end_field
                ),
                *(
                    read_back[f.name].alias(f.name) if f.name in read_back else column(f.name)
                    for f in (*operator.left.fields, *operator.right.fields)
                ),
                *passed,
                *window_struct,
            ],
        )


def _carrier_order(carrier: stacking.Carrier) -> str:
    return carrier.name


def _window_field(window_name: str, field: str) -> Sql:
    """A field (``start``, ``end``) of a window struct column."""
    return Sql(f"{quote_identifier(window_name)}.{quote_identifier(field)}")


def _nes_ms(spark_time: Sql, shift_us: int) -> Sql:
    """The NebulaStream milliseconds of a Spark time ``shift_us`` microseconds after them."""
    micros = S.call("unix_micros", spark_time) - shift_us
    return S.call("floor", micros / 1000).cast("BIGINT")


def _window_bound(window_name: str, bound: str, window: plan.Window, shift_us: int = 0) -> Sql:
    """A window's start or end in UINT64 milliseconds; the end is always start + size (the
    struct a gapped sliding window may be assigned ends a slide after its start). Windows
    assigned from a shifted time (:mod:`.stacking`) start ``shift_us`` after their start."""
    start = _nes_ms(_window_field(window_name, "start"), shift_us)
    value = start if bound == "start" else start + window.size_ms
    return value.cast(spark_type_ddl("UINT64"))
