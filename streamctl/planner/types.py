"""NebulaStream's typing rules, as the binder applies them.

Typing follows NebulaStream, whose operators compute on C++ machine types:

* integer operands are promoted like C++ (``INT8``/``INT16``/``UINT8``/``UINT16`` become
  ``INT32``), then both operands get the usual arithmetic conversion's common type (a
  signed/unsigned pair of equal rank becomes unsigned: ``INT32 + UINT32`` is ``UINT32``;
  ``INT64 + UINT32`` is ``INT64``); any ``FLOAT64`` operand makes ``FLOAT64``, else any
  ``FLOAT32`` makes ``FLOAT32``. Comparisons convert their operands the same way (so
  ``INT8(-1) < UINT32(1)`` is false, as in C++);
* ``ABS``, ``CEIL``, ``FLOOR``, ``ROUND`` keep their argument's type; ``SQRT``, ``EXP``,
  ``POW`` give ``FLOAT64``;
* aggregates: ``COUNT`` is ``UINT64``; ``SUM``, ``MIN``, ``MAX`` keep the argument's type;
  ``AVG`` and ``MEDIAN`` are ``FLOAT64``. Nullability (``nes-docs/null_handling.md``,
  "Summary"): ``COUNT(x)`` and ``COUNT(*)`` are always NOT NULL (NULLs are skipped);
  ``SUM``, ``AVG``, ``MIN``, ``MAX``, ``MEDIAN`` are nullable exactly when their argument is
  (one NULL input row makes the result NULL); an expression is nullable when an operand is,
  except ``ISNULL`` and ``<=>``; GROUP BY keys keep theirs; window ``START``/``END`` are NOT
  NULL;
* constants are typed with a type constructor (``UINT64(1)``, ``FLOAT64(3.14)``,
  ``VARSIZED("x")``, ``BOOLEAN(TRUE)``); as an extension, a bare integer constant is
  ``INT32`` (``INT64``/``UINT64`` if it needs to be), a bare decimal ``FLOAT64``, a bare string
  ``VARSIZED``; a type constructor applied to an expression is a C-style conversion.

The rules on operands, comparisons, sinks and aggregates are here; the function table is in
:mod:`.expressions`, constants in :mod:`.folding`. The type names and families themselves are
declared in :mod:`streamctl.nes_types`; how Spark carries each type is
:mod:`streamctl.spark.spark_types`.
"""

from __future__ import annotations

from typing import Final

from streamctl.error_codes import NOT_SUPPORTED, TYPE_MISMATCH
from streamctl.nes_types import (
    FLOAT_TYPES,
    INTEGER_TYPES,
    STRING_TYPES,
    UNSIGNED_TYPES,
    integer_range,
)
from streamctl.planner import ast
from streamctl.planner import plan as ir
from streamctl.planner.planning_errors import _error

_NUMERIC_TYPES: Final = INTEGER_TYPES | FLOAT_TYPES
_INTEGER_BITS: Final[dict[str, int]] = {
    name: (integer_range(name)[1] - integer_range(name)[0]).bit_length() for name in INTEGER_TYPES
}
_SIGNED_OF: Final[dict[str, str]] = {"UINT32": "INT32", "UINT64": "INT64"}
_UNSIGNED_OF: Final[dict[str, str]] = {"INT32": "UINT32", "INT64": "UINT64"}


def _require(
    expression: ir.Expr, allowed: frozenset[str] | set[str], what: str, node: ast.Node
) -> None:
    if expression.type not in allowed:
        kinds = "a number" if allowed == _NUMERIC_TYPES else " or ".join(sorted(allowed))
        raise _error(TYPE_MISMATCH, f"{what} needs {kinds}, got {expression.type}", node)


def _promote(type_name: str) -> str:
    """C++ integral promotion: integer types narrower than 32 bits compute as INT32."""
    if type_name in INTEGER_TYPES and _INTEGER_BITS[type_name] < 32:
        return "INT32"
    return type_name


def _common_numeric(a: str, b: str) -> str:
    """C++'s usual arithmetic conversions on NebulaStream's numeric types."""
    if a in FLOAT_TYPES or b in FLOAT_TYPES:
        return "FLOAT64" if "FLOAT64" in (a, b) else "FLOAT32"
    a, b = _promote(a), _promote(b)
    if a == b:
        return a
    a_unsigned, b_unsigned = a in UNSIGNED_TYPES, b in UNSIGNED_TYPES
    if a_unsigned == b_unsigned:
        return a if _INTEGER_BITS[a] >= _INTEGER_BITS[b] else b
    unsigned, signed = (a, b) if a_unsigned else (b, a)
    if _INTEGER_BITS[unsigned] >= _INTEGER_BITS[signed]:
        return unsigned
    low, high = integer_range(signed)
    if low <= integer_range(unsigned)[0] and integer_range(unsigned)[1] <= high:
        return signed
    return _UNSIGNED_OF[signed]


def _comparison_type(left: ir.Expr, right: ir.Expr, node: ast.BinaryOp) -> str:
    a, b = left.type, right.type
    if a in _NUMERIC_TYPES and b in _NUMERIC_TYPES:
        return _common_numeric(a, b)
    if a in STRING_TYPES and b in STRING_TYPES:
        return a if a == b else "VARSIZED"
    if a == b == "BOOLEAN":
        return "BOOLEAN"
    if {a, b} & STRING_TYPES and "BOOLEAN" in (a, b):
        raise _error(
            NOT_SUPPORTED,
            f"comparing {a} with {b}: NebulaStream compares text with a boolean by the text's "
            "validity, which has no faithful Spark equivalent",
            node,
        )
    raise _error(TYPE_MISMATCH, f"cannot compare {a} with {b} ({node.op})", node)


def _assignable(source: str, target: str) -> bool:
    """Whether a value of ``source`` type can be written into a ``target`` column exactly."""
    if source == target:
        return True
    if source in INTEGER_TYPES and target in INTEGER_TYPES:
        low, high = integer_range(source)
        target_low, target_high = integer_range(target)
        return target_low <= low and high <= target_high
    if source in INTEGER_TYPES and target in FLOAT_TYPES:
        mantissa = 24 if target == "FLOAT32" else 53
        return _INTEGER_BITS[source] <= mantissa
    if source == "FLOAT32" and target == "FLOAT64":
        return True
    return source == "CHAR" and target == "VARSIZED"


def _aggregate_type(
    function: str, argument: ir.Expr | None, call: ast.FunctionCall
) -> tuple[str, bool]:
    if function == "count":
        return "UINT64", False
    assert argument is not None
    if function in ("min", "max"):
        if argument.type not in _NUMERIC_TYPES | STRING_TYPES:
            raise _error(
                TYPE_MISMATCH, f"{call.name} needs a number or text, got {argument.type}", call
            )
        return argument.type, argument.nullable
    _require(argument, _NUMERIC_TYPES, call.name, call)
    if function == "sum":
        return argument.type, argument.nullable
    return "FLOAT64", argument.nullable
