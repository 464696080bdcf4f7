"""Constants: NebulaStream's typed constants, and conversions folded at bind time.

``TYPE(constant)`` is a typed constant (:func:`_typed_literal`: ``UINT64(1)``,
``BOOLEAN(TRUE)``); a constant written without a type gets one from its form
(:func:`_bare_literal`, an extension of NebulaStream). :func:`_cast` converts an expression
with C++ semantics and converts a constant right away where it can (integers wrap, ``FLOAT32``
rounds), so the plan carries the converted value instead of a ``cast`` call.
"""

from __future__ import annotations

import struct

from streamctl.error_codes import TYPE_MISMATCH
from streamctl.nes_types import FLOAT_TYPES, INTEGER_TYPES, STRING_TYPES, integer_range
from streamctl.planner import ast
from streamctl.planner import plan as ir
from streamctl.planner.planning_errors import _error
from streamctl.planner.types import _NUMERIC_TYPES


def _float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _wrap_integer(value: int, type_name: str) -> int:
    low, high = integer_range(type_name)
    return (value - low) % (high - low + 1) + low


def _float_text(value: float, type_name: str) -> str:
    return repr(_float32(value) if type_name == "FLOAT32" else value)


def _bare_literal(node: ast.Literal) -> ir.LiteralExpr:
    """A constant written without a type constructor (an extension of NebulaStream)."""
    if node.kind == "integer":
        value = int(node.text)
        for candidate in ("INT32", "INT64", "UINT64"):
            low, high = integer_range(candidate)
            if low <= value <= high:
                return ir.LiteralExpr(str(value), candidate)
        raise _error(TYPE_MISMATCH, f"integer constant {node.text} is out of range", node)
    if node.kind == "float":
        return ir.LiteralExpr(repr(float(node.text)), "FLOAT64")
    if node.kind == "string":
        return ir.LiteralExpr(node.text, "VARSIZED")
    if node.kind == "boolean":
        return ir.LiteralExpr(node.text, "BOOLEAN")
    raise _error(
        TYPE_MISMATCH,
        "the type of NULL is unknown here; write a typed NULL such as INT32(NULL)",
        node,
    )


def _typed_literal(type_name: str, node: ast.Literal) -> ir.LiteralExpr:
    """``TYPE(constant)``: NebulaStream's typed constants (``UINT64(1)``, ``BOOLEAN(TRUE)``)."""
    if node.kind == "null":
        return ir.LiteralExpr(None, type_name)
    text = node.text
    problem = (
        f"{type_name}({text if node.kind != 'string' else repr(text)}) is not a valid {type_name}"
    )
    if type_name in INTEGER_TYPES:
        try:
            value = int(text.strip()) if node.kind in ("integer", "string") else None
        except ValueError:
            value = None
        if value is None:
            raise _error(TYPE_MISMATCH, problem, node)
        low, high = integer_range(type_name)
        if not low <= value <= high:
            raise _error(
                TYPE_MISMATCH, f"{value} is out of range for {type_name} ({low}..{high})", node
            )
        return ir.LiteralExpr(str(value), type_name)
    if type_name in FLOAT_TYPES:
        try:
            number = float(text) if node.kind in ("integer", "float", "string") else None
        except ValueError:
            number = None
        if number is None:
            raise _error(TYPE_MISMATCH, problem, node)
        return ir.LiteralExpr(_float_text(number, type_name), type_name)
    if type_name == "BOOLEAN":
        truth = {"TRUE": "TRUE", "FALSE": "FALSE", "1": "TRUE", "0": "FALSE"}.get(
            text.strip().upper()
        )
        if truth is None or node.kind == "float":
            raise _error(TYPE_MISMATCH, problem, node)
        return ir.LiteralExpr(truth, "BOOLEAN")
    if type_name == "CHAR" and len(text) != 1:
        raise _error(TYPE_MISMATCH, f"CHAR holds one character, got {text!r}", node)
    return ir.LiteralExpr(text, type_name)


def _cast(expression: ir.Expr, type_name: str) -> ir.Expr:
    """Convert to ``type_name`` with C++ semantics; constants are converted right away."""
    if expression.type == type_name:
        return expression
    if isinstance(expression, ir.LiteralExpr):
        folded = _fold_constant(expression, type_name)
        if folded is not None:
            return folded
    return ir.CallExpr("cast", (expression,), type_name, expression.nullable)


def _fold_constant(literal: ir.LiteralExpr, type_name: str) -> ir.LiteralExpr | None:
    if literal.value is None:
        return ir.LiteralExpr(None, type_name)
    if literal.type in INTEGER_TYPES and type_name in INTEGER_TYPES:
        return ir.LiteralExpr(str(_wrap_integer(int(literal.value), type_name)), type_name)
    if literal.type in _NUMERIC_TYPES and type_name in FLOAT_TYPES:
        return ir.LiteralExpr(_float_text(float(literal.value), type_name), type_name)
    if literal.type in STRING_TYPES and type_name == "VARSIZED":
        return ir.LiteralExpr(literal.value, type_name)
    return None
