"""The reference engine: NebulaStream's answer to a bound query over bounded input, computed by
DuckDB, independently of the Spark translation.

It shares the parser and the binder with the product (its input is the same
:class:`~streamctl.planner.plan.QueryPlan`) and nothing of the execution: :mod:`.sql`
translates the plan a second time, into set-based SQL, and :mod:`.engine` runs it over rows
given per source.

Protocol::

    from streamctl.reference import run_reference
    rows = run_reference(bound.plan, {"stream": [(0, 1), (20, None)], "inline:0": [...]})

* input: for each leaf of the plan, its rows as tuples of plain Python values in the source's
  column order, under the logical source's name (``Scan.source``) or the inline source's id
  (``InlineScan.id``);
* output: the rows the query writes into its sink, as tuples of plain Python values
  (``int`` for every integer type including UINT64, ``float``, ``bool``, ``str``, ``None``)
  in the order of ``plan.output``, sorted; compare them with another engine's as multisets.

Guarantees:

* NebulaStream's deviations from standard SQL are applied explicitly, each in one place with
  the documentation passage it comes from (:mod:`.nes_semantics`, :data:`.nes_semantics.RULES`):
  C++ integer arithmetic and conversions, IEEE float comparisons, NULL in aggregates per
  ``null_handling.md``, half-open event-time windows starting at multiples of the advance
  from 0 (sliding windows with gaps included), no output for windows without rows;
* every input row counts exactly once, whatever the order of the rows (the input is bounded
  and every window is complete: NES emits it when the watermark passes its end);
* never a different answer: where the plan uses something the reference does not translate,
  or the data reaches a case the NES documentation leaves open (a float division by zero, a
  NaN in MIN/MAX, a float out of an integer type's range, a negative event time, ...),
  :class:`ReferenceUnsupported` says why; where NES documents that the query fails (an
  integer division by zero), :class:`NesQueryFailure`;
* integer results are exact; float results are IEEE results of the same operations, except
  that SUM/AVG of floats are computed in double precision in an unspecified order (NES adds in
  arrival order, in the argument's type): compare float aggregates with a tolerance.
"""

from streamctl.reference.engine import run_reference, to_sql
from streamctl.reference.reference_errors import NesQueryFailure, ReferenceUnsupported

__all__ = ["NesQueryFailure", "ReferenceUnsupported", "run_reference", "to_sql"]
