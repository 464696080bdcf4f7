"""NebulaStream's float text (:func:`streamctl.nes_text.format_float`) as a native Spark
expression, so sinks format floats without a row-at-a-time Python UDF.

The rule is C's ``printf("%.6f")``: the exact binary value of the double rounded to six
decimals, ties to even, every integer digit written out (``1e23`` is
``99999999999999991611392``), then trailing zeros dropped down to one (``153.0``); ``nan``,
``inf`` and ``-inf`` as such, a negative value that rounds to zero (and ``-0.0``) as ``-0.0``.
Java's formatters round the shortest decimal form instead of the binary value, so the digits
are computed here from the double's bits with exact arithmetic only:

* the value ``a = |v|`` splits exactly into ``ip + fp`` (``fp = a % 1``: Java's remainder is
  exact);
* ``fp * 10**6`` is computed exactly as the sum ``p + e`` of two doubles (Dekker's product with
  Veltkamp's split: IEEE double arithmetic, which the JVM guarantees); it rounds to nearest,
  ties to even, exactly: ``rint(p)``, unless ``p`` is a half-integer, where the sign of ``e``
  decides and only ``e == 0`` is a tie;
* ``ip`` below ``2**63`` is a ``long``; above, its digits come from ``m * 2**k`` (the 53-bit
  significand times a power of two) multiplied out in base ``10**9`` limbs with Spark's
  higher-order functions (only rows that large evaluate that branch).

A FLOAT32 value is widened to double first (exact), as the Python formatter does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from pyspark.sql import Column

__all__ = ["nes_float_text"]

_SPLITTER: Final = 134217729.0  # 2**27 + 1: Veltkamp's split of a double into 26-bit halves
_LIMB: Final = 1_000_000_000
_STEP_BITS: Final = 20  # a limb (< 10**9) times 2**20 stays below 2**63


def nes_float_text(value: Column) -> Column:
    """The NES text of a FLOAT32/FLOAT64 column (NULL stays NULL)."""
    from pyspark.sql import functions as F

    v = value.cast("double")
    a = F.abs(v)
    fp = a % F.lit(1.0)
    ip = a - fp
    micro = _round_half_even(_two_product(fp, 1e6))  # 0 .. 10**6, a long
    carry = (micro == F.lit(1_000_000)).cast("long")
    small_int = (ip.cast("long") + carry).cast("string")
    int_text = F.when(a < F.lit(2.0**63), small_int).otherwise(_integer_digits(a))
    frac_text = F.lpad((micro % F.lit(1_000_000)).cast("string"), 6, "0")
    # -0.0 is "-0.0": only its text tells it from 0.0 (Spark's atan2 and division hide it)
    negative = (v < F.lit(0.0)) | ((v == F.lit(0.0)) & v.cast("string").startswith("-"))
    text = F.concat(
        F.when(negative, F.lit("-")).otherwise(F.lit("")), int_text, F.lit("."), frac_text
    )
    trimmed = F.regexp_replace(text, r"(\.[0-9]*?[0-9])0+$", "$1")
    return (
        F.when(v.isNull(), F.lit(None).cast("string"))
        .when(F.isnan(v), F.lit("nan"))
        .when(v == F.lit(float("inf")), F.lit("inf"))
        .when(v == F.lit(float("-inf")), F.lit("-inf"))
        .otherwise(trimmed)
    )


def _split(x: Column) -> tuple[Column, Column]:
    """Veltkamp: ``x == hi + lo`` exactly, each half of at most 26 significant bits."""
    from pyspark.sql import functions as F

    c = x * F.lit(_SPLITTER)
    hi = c - (c - x)
    return hi, x - hi


def _two_product(x: Column, factor: float) -> tuple[Column, Column]:
    """Dekker: ``(p, e)`` with ``p = fl(x * factor)`` and ``p + e == x * factor`` exactly."""
    from pyspark.sql import functions as F

    y = F.lit(factor)
    p = x * y
    xh, xl = _split(x)
    yh, yl = _split(y)
    e = (((xh * yh - p) + xh * yl) + xl * yh) + xl * yl
    return p, e


def _round_half_even(product: tuple[Column, Column]) -> Column:
    """The exact ``p + e`` rounded to the nearest integer, ties to even, as a long.

    ``p`` is the double nearest to ``p + e``: a rounding boundary ``n + 0.5`` can lie strictly
    between them only where ``p`` is that boundary itself, and there ``e`` decides.
    """
    from pyspark.sql import functions as F

    p, e = product
    down = F.floor(p)  # a long
    half = (p - down.cast("double")) == F.lit(0.5)
    beyond = F.when(e > F.lit(0.0), down + F.lit(1)).when(e < F.lit(0.0), down)
    return F.when(half, beyond.otherwise(F.rint(p).cast("long"))).otherwise(F.rint(p).cast("long"))


def _integer_digits(a: Column) -> Column:
    """The decimal digits of an integer-valued double ``a >= 2**63``: ``m * 2**k`` (``m`` the
    significand, ``k >= 11``) multiplied out in little-endian base-10**9 limbs."""
    from pyspark.sql import functions as F

    guess = F.floor(F.log2(a)).cast("int")
    exponent = (
        F.when(F.pow(F.lit(2.0), guess) > a, guess - 1)
        .when(F.pow(F.lit(2.0), guess + 1) <= a, guess + 1)
        .otherwise(guess)
    )
    significand = (a * F.pow(F.lit(2.0), F.lit(52) - exponent)).cast("long")
    shift = exponent - F.lit(52)
    limbs = F.array(significand % F.lit(_LIMB), _exact_quotient(significand, _LIMB))
    full_steps = F.sequence(F.lit(1), F.greatest(shift / F.lit(_STEP_BITS), F.lit(1)).cast("int"))
    step_count = (shift / F.lit(_STEP_BITS)).cast("int")
    by_steps = F.aggregate(
        full_steps,
        limbs,
        lambda acc, step: F.when(step <= step_count, _times(acc, F.lit(1 << _STEP_BITS))).otherwise(
            acc
        ),
    )
    rest = F.pow(F.lit(2.0), shift % F.lit(_STEP_BITS)).cast("long")  # exact: a power of 2
    digits = F.reverse(_times(by_steps, rest))
    head = F.element_at(digits, 1).cast("string")
    tail = F.transform(F.slice(digits, 2, 1000), lambda limb: F.lpad(limb.cast("string"), 9, "0"))
    return F.concat(head, F.array_join(tail, ""))


def _times(limbs: Column, factor: Column) -> Column:
    """Little-endian base-10**9 limbs times ``factor`` (< 2**20 fits: no limb overflows)."""
    from pyspark.sql import functions as F

    start = F.struct(
        F.array().cast("array<bigint>").alias("out"), F.lit(0).cast("long").alias("carry")
    )

    def step(acc: Column, limb: Column) -> Column:
        total = limb * factor + acc["carry"]
        return F.struct(
            F.concat(acc["out"], F.array(total % F.lit(_LIMB))).alias("out"),
            _exact_quotient(total, _LIMB).alias("carry"),
        )

    def finish(acc: Column) -> Column:
        return F.when(acc["carry"] > 0, F.concat(acc["out"], F.array(acc["carry"]))).otherwise(
            acc["out"]
        )

    return F.aggregate(limbs, start, step, finish)


def _exact_quotient(number: Column, divisor: int) -> Column:
    """``number div divisor`` for a long below 2**53: the remainder is taken off first, so the
    double division that Spark's ``/`` does is exact."""
    from pyspark.sql import functions as F

    return ((number - number % F.lit(divisor)) / F.lit(divisor)).cast("long")
