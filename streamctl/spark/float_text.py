"""NebulaStream's float text (:func:`streamctl.nes_text.format_float`) computed by Spark itself,
so that sinks format floats without a Python UDF: by streamctl's Java UDF where the session
has it (:mod:`streamctl.spark.jvm_functions`), else by the Spark expressions below.

The rule is C's ``printf("%.6f")``: the exact binary value of the double rounded to six
decimals, ties to even, every integer digit written out (``1e23`` is
``99999999999999991611392``), then trailing zeros dropped down to one (``153.0``); ``nan``,
``inf`` and ``-inf`` as such, a negative value that rounds to zero (and ``-0.0``) as ``-0.0``.
Java's formatters round the shortest decimal form instead of the binary value, so the digits
are computed from the double with exact arithmetic only:

* the value ``a = |v|`` splits exactly into ``ip + fp`` (``fp = a % 1``: Java's remainder is
  exact);
* ``fp * 10**6`` is computed exactly as the sum ``p + e`` of two doubles (Dekker's product with
  Veltkamp's split; ``10**6`` needs no split, it has 14 significant bits): IEEE double
  arithmetic, which the JVM guarantees. It rounds to nearest, ties to even, exactly:
  ``rint(p)``, unless ``p`` is a half-integer, where the sign of ``e`` decides and only
  ``e == 0`` is a tie;
* ``ip`` below ``2**63`` is a ``long``; at or above, the value is an integer (every double
  that large is), and its exact digits are the JVM's own: ``scala.math.BigDecimal.exact``
  (the binary value, not the shortest decimal form) called through Spark's ``reflect``, in a
  ``CASE`` branch only such rows take. No Python on the data path: a vectorised Python
  function here made Spark ship every row of the sink through a Python worker, and Spark's
  higher-order functions could multiply the digits out but cost every row even in a branch
  never taken.

A FLOAT32 value is widened to double first (exact), as the Python formatter does.

**Staged.** Each intermediate is a column of its own projection (:func:`with_float_texts`), not
a subexpression: an expression tree names ``fp`` in several places, and Spark would copy a
reused subexpression into every place (and every ``CASE`` branch), ~1,700 nodes per column, past
the 64 KB limit of a generated method with two float columns. Spark's optimizer keeps
projections apart when a later one uses a computed column more than once (``CollapseProject``
does not duplicate non-trivial expressions), so every step is computed once per row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from streamctl.spark import sql_text as S
from streamctl.spark.jvm_functions import float_text_function
from streamctl.spark.sql_text import Relation, Sql

if TYPE_CHECKING:
    Helper = Callable[[int, str], Sql]
    """``h(index, step)``: the helper column of a step for the float column at ``index``."""

__all__ = ["with_float_texts"]

_SPLITTER: Final = 134217729.0  # 2**27 + 1: Veltkamp's split of a double into 26-bit halves
_EXACT_DECIMAL: Final = ("scala.math.BigDecimal", "exact")
"""A static JVM method (Scala's companion forwarder) from a double to the exact decimal value of
its binary form; its ``toString`` of an integer-valued double is the plain digits."""
_MICRO: Final = 1e6  # exact in a double, 14 significant bits: its Veltkamp split is (1e6, 0)
_INFINITY: Final = float("inf")


def with_float_texts(df: Relation, columns: list[str], prefix: str) -> tuple[Relation, list[str]]:
    """``df`` with one more string column per name in ``columns`` (FLOAT32 or FLOAT64 values):
    its NES text, NULL where the value is NULL. Returns the frame and the text columns' names
    (``prefix`` + an index; the helper columns of the stages are dropped again).

    Where the session has streamctl's jar, each text is one call of its Java UDF
    (``jvm/NesFloatText.java``, the same rule); the stages below are for sessions without it.

    The steps are Spark SQL text (:mod:`streamctl.spark.sql_text`): a stage reaches the JVM
    in one call per column it adds, not per node (~1,300 calls for two float columns), and
    the stages are steps of one :class:`~streamctl.spark.sql_text.Relation`, analysed once."""
    if not columns:
        return df, []
    kept = list(df.columns)
    names = [f"{prefix}{index}" for index in range(len(columns))]
    function = float_text_function(df.session)
    if function is not None:  # the same rule in one Java call per value
        texts = [
            S.call(function, S.col(column).cast("DOUBLE")).alias(name)
            for column, name in zip(columns, names, strict=True)
        ]
        return S.project(df, [*(S.col(c) for c in kept), *texts]), names

    def stage(frame: Relation, make: dict[str, Callable[[int], Sql]]) -> Relation:
        """Add the columns ``{suffix: f(index) -> Sql}`` for every float column."""
        added = [
            make_column(index).alias(f"{name}#{suffix}")
            for index, name in enumerate(names)
            for suffix, make_column in make.items()
        ]
        return S.project(frame, ["*", *added])

    def h(index: int, suffix: str) -> Sql:
        return S.col(f"{names[index]}#{suffix}")

    doubles = zip(columns, names, strict=True)
    frame = S.project(df, ["*", *(S.col(c).cast("DOUBLE").alias(f"{n}#v") for c, n in doubles)])
    # NULL, NaN and the infinities get their text at the end; the steps work on 0.0 instead
    # (every step runs on every row, and ANSI casts of NaN to a long fail the query).
    frame = stage(
        frame,
        {
            "a": lambda i: S.when(
                S.call("isnan", h(i, "v")) | (S.call("abs", h(i, "v")) == _INFINITY), 0.0
            ).otherwise(S.call("coalesce", S.call("abs", h(i, "v")), 0.0))
        },
    )
    frame = stage(frame, {"fp": lambda i: h(i, "a") % 1.0})
    frame = stage(
        frame,
        {
            "p": lambda i: h(i, "fp") * _MICRO,
            "c": lambda i: h(i, "fp") * _SPLITTER,
        },
    )
    frame = stage(frame, {"xh": lambda i: h(i, "c") - (h(i, "c") - h(i, "fp"))})
    frame = stage(
        frame,
        {
            # Dekker: p + e == fp * 1e6 exactly (y = 1e6 splits into yh = 1e6, yl = 0)
            "e": lambda i: (h(i, "xh") * _MICRO - h(i, "p")) + (h(i, "fp") - h(i, "xh")) * _MICRO,
            "down": lambda i: S.call("floor", h(i, "p")),
        },
    )
    frame = stage(frame, {"micro": _round_half_even(h)})
    frame = stage(
        frame,
        {
            "int": lambda i: S.when(h(i, "a") < 2.0**63, _small_integer(h, i)).otherwise(
                _huge_integer(h, i)
            ),
            # the six decimals without their trailing zeros ("" for none)
            "frac": lambda i: Sql(
                f"trim(TRAILING '0' FROM lpad(CAST({h(i, 'micro').text} % 1000000 AS STRING), "
                "6, '0'))"
            ),
        },
    )
    texts = []
    for index, name in enumerate(names):
        v = h(index, "v")
        # -0.0 is "-0.0": only its text tells it from 0.0 (Spark's atan2 and division hide it)
        negative = (v < 0.0) | ((v == 0.0) & v.cast("STRING").startswith("-"))
        frac = h(index, "frac")
        text = S.call(
            "concat",
            S.when(negative, "-").otherwise(""),
            h(index, "int"),
            ".",
            S.when(frac == "", "0").otherwise(frac),
        )
        texts.append(
            S.when(v.isNull(), S.lit(None).cast("STRING"))
            .when(S.call("isnan", v), "nan")
            .when(v == _INFINITY, "inf")
            .when(v == -_INFINITY, "-inf")
            .otherwise(text)
            .alias(name)
        )
    return S.project(frame, [*(S.col(c) for c in kept), *texts]), names


def _small_integer(h: Helper, i: int) -> Sql:
    """The integer part's digits below ``2**63``, carrying a fraction rounded up to 1."""
    ip = (h(i, "a") - h(i, "fp")).cast("BIGINT")
    return (ip + (h(i, "micro") == 1_000_000).cast("BIGINT")).cast("STRING")


def _huge_integer(h: Helper, i: int) -> Sql:
    """The digits of an integer-valued double at or above ``2**63``: its exact binary value.

    ``reflect`` evaluates row by row inside the JVM (no code generation), and only where the
    ``CASE`` around it takes this branch."""
    return S.call("reflect", _EXACT_DECIMAL[0], _EXACT_DECIMAL[1], h(i, "a"))


def _round_half_even(h: Helper) -> Callable[[int], Sql]:
    """``micro``: the exact ``p + e`` rounded to the nearest integer, ties to even, as a long.

    ``p`` is the double nearest to ``p + e``: a rounding boundary ``n + 0.5`` can lie strictly
    between them only where ``p`` is that boundary itself, and there ``e`` decides.
    """

    def make(i: int) -> Sql:
        p, e, down = h(i, "p"), h(i, "e"), h(i, "down")
        nearest = S.call("rint", p).cast("BIGINT")
        half = (p - down.cast("DOUBLE")) == 0.5
        beyond = S.when(e > 0.0, down + 1).when(e < 0.0, down)
        return S.when(half, beyond.otherwise(nearest)).otherwise(nearest)

    return make
