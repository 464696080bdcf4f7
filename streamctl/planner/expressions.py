"""Binding expressions: column names, operators, functions and type constructors, typed.

:class:`_ExpressionBinder` binds an expression of the syntax tree in a scope
(:mod:`.scopes`) into a typed plan expression (:mod:`.plan`): it resolves column names
(a name several inputs share resolves as NebulaStream resolves it, to the first; unknown
ones are errors naming the candidates), applies NebulaStream's typing
rules (:mod:`.types`), inserting explicit ``cast`` calls for its implicit conversions, and
folds constants (:mod:`.folding`). The query binder (:mod:`.binder`) extends it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from streamctl.error_codes import (
    INVALID_STATEMENT,
    NOT_SUPPORTED,
    TYPE_MISMATCH,
    UNKNOWN_COLUMN,
)
from streamctl.nes_types import INTEGER_TYPES, NES_TYPE_NAMES, STRING_TYPES, TYPE_NAME_ALIASES
from streamctl.planner import ast
from streamctl.planner import plan as ir
from streamctl.planner.folding import _bare_literal, _cast, _typed_literal
from streamctl.planner.planning_errors import _error
from streamctl.planner.scopes import _Column, _column_expr, _matches, _Scope
from streamctl.planner.types import (
    _NUMERIC_TYPES,
    _common_numeric,
    _comparison_type,
    _promote,
    _require,
)

_AGGREGATES: Final[dict[str, str]] = {
    "COUNT": "count",
    "SUM": "sum",
    "MIN": "min",
    "MAX": "max",
    "AVG": "avg",
    "MEDIAN": "median",
}
_SAME_TYPE_FUNCTIONS: Final[dict[str, str]] = {
    "ABS": "abs",
    "CEIL": "ceil",
    "FLOOR": "floor",
    "ROUND": "round",
}
_FLOAT64_FUNCTIONS: Final[dict[str, str]] = {"SQRT": "sqrt", "EXP": "exp"}
_SCALAR_FUNCTION_NAMES: Final = (
    "ABS",
    "CEIL",
    "FLOOR",
    "ROUND",
    "SQRT",
    "EXP",
    "POW",
    "POWER",
    "CONCAT",
    "ISNULL",
    "CASTTOUNIXTS",
    "CASTFROMUNIXTS",
)
_COMPARISONS: Final[dict[str, str]] = {
    "==": "eq",
    "!=": "ne",
    "<": "lt",
    "<=": "le",
    ">": "gt",
    ">=": "ge",
    "<=>": "eq_null_safe",
}
_ARITHMETIC: Final[dict[str, str]] = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod"}


class _ExpressionBinder:
    """Binds expressions in a scope (stateless; the query binder extends it)."""

    # -- names

    def resolve(self, reference: ast.ColumnRef, scope: _Scope) -> _Column:
        # NebulaStream's rule (scopes._matches): an exact qualified name, else the first field
        # of that name in schema order; a name several inputs share is not an error.
        matches = _matches(scope.columns, reference.parts)
        if matches:
            return matches[0]
        available = ", ".join(c.shown.replace("$", ".") for c in scope.columns)
        message = (
            f"unknown column {reference.text!r} in {scope.description}; columns are {available}"
        )
        if scope.aggregate_hint:
            message += f" ({scope.aggregate_hint})"
        raise _error(UNKNOWN_COLUMN, message, reference)

    # -- expressions

    def condition(self, node: ast.Expression, scope: _Scope, clause: str) -> ir.Expr:
        calls = list(_aggregate_calls(node))
        if calls:
            raise _error(
                NOT_SUPPORTED,
                f"aggregate functions in {clause} are not supported; give the aggregate a name in "
                "the select list (MAX(x) AS m) and use the name in HAVING",
                calls[0],
            )
        expression = self.expression(node, scope)
        if expression.type != "BOOLEAN":
            raise _error(
                TYPE_MISMATCH, f"the {clause} condition is {expression.type}, not BOOLEAN", node
            )
        return expression

    def expression(self, node: ast.Expression, scope: _Scope) -> ir.Expr:
        if isinstance(node, ast.Literal):
            return _bare_literal(node)
        if isinstance(node, ast.ColumnRef):
            return _column_expr(self.resolve(node, scope))
        if isinstance(node, ast.FunctionCall):
            return self.function(node, scope)
        if isinstance(node, ast.IsNull):
            operand = self.operand(node.operand, scope, None)
            result: ir.Expr = ir.CallExpr("is_null", (operand,), "BOOLEAN", False)
            if node.negated:
                result = ir.CallExpr("not", (result,), "BOOLEAN", False)
            return result
        if isinstance(node, ast.UnaryOp):
            return self.unary(node, scope)
        return self.binary(node, scope)

    def operand(self, node: ast.Expression, scope: _Scope, null_type: str | None) -> ir.Expr:
        """Bind an operand; a bare NULL takes ``null_type`` (the other operand's type)."""
        if isinstance(node, ast.Literal) and node.kind == "null":
            if null_type is None:
                raise _error(
                    TYPE_MISMATCH,
                    "the type of NULL is unknown here; write a typed NULL such as INT32(NULL)",
                    node,
                )
            return ir.LiteralExpr(None, null_type)
        return self.expression(node, scope)

    def pair(
        self, left: ast.Expression, right: ast.Expression, scope: _Scope
    ) -> tuple[ir.Expr, ir.Expr]:
        if isinstance(left, ast.Literal) and left.kind == "null":
            bound_right = self.operand(right, scope, None)
            return self.operand(left, scope, bound_right.type), bound_right
        bound_left = self.expression(left, scope)
        return bound_left, self.operand(right, scope, bound_left.type)

    def unary(self, node: ast.UnaryOp, scope: _Scope) -> ir.Expr:
        if node.op == "NOT":
            operand = self.operand(node.operand, scope, "BOOLEAN")
            _require(operand, {"BOOLEAN"}, "NOT", node)
            return ir.CallExpr("not", (operand,), "BOOLEAN", operand.nullable)
        operand = self.expression(node.operand, scope)
        _require(operand, _NUMERIC_TYPES, f"unary {node.op}", node)
        promoted = _cast(operand, _promote(operand.type))
        if node.op == "+":
            return promoted
        return ir.CallExpr("neg", (promoted,), promoted.type, promoted.nullable)

    def binary(self, node: ast.BinaryOp, scope: _Scope) -> ir.Expr:
        left, right = self.pair(node.left, node.right, scope)
        nullable = left.nullable or right.nullable
        if node.op in ("AND", "OR"):
            _require(left, {"BOOLEAN"}, node.op, node.left)
            _require(right, {"BOOLEAN"}, node.op, node.right)
            return ir.CallExpr(node.op.lower(), (left, right), "BOOLEAN", nullable)
        if node.op == "||":
            return self.concat(left, right, node)
        if node.op in _ARITHMETIC:
            _require(left, _NUMERIC_TYPES, node.op, node.left)
            _require(right, _NUMERIC_TYPES, node.op, node.right)
            common = _common_numeric(left.type, right.type)
            return ir.CallExpr(
                _ARITHMETIC[node.op], (_cast(left, common), _cast(right, common)), common, nullable
            )
        common = _comparison_type(left, right, node)
        function = _COMPARISONS[node.op]
        if function == "eq_null_safe":
            nullable = False
        return ir.CallExpr(
            function, (_cast(left, common), _cast(right, common)), "BOOLEAN", nullable
        )

    def concat(self, left: ir.Expr, right: ir.Expr, node: ast.Node) -> ir.Expr:
        _require(left, STRING_TYPES, "CONCAT", node)
        _require(right, STRING_TYPES, "CONCAT", node)
        return ir.CallExpr(
            "concat",
            (_cast(left, "VARSIZED"), _cast(right, "VARSIZED")),
            "VARSIZED",
            left.nullable or right.nullable,
        )

    def function(self, call: ast.FunctionCall, scope: _Scope) -> ir.Expr:
        name = call.name
        if name in _AGGREGATES:
            if scope.aggregates is None or call not in scope.aggregates:
                raise _error(
                    INVALID_STATEMENT,
                    f"aggregate function {name} is only allowed in a windowed query's select list",
                    call,
                )
            return scope.aggregates[call]
        if call.star:
            raise _error(
                INVALID_STATEMENT, f"{name}(*) is not a function call; did you mean COUNT(*)?", call
            )
        type_name = TYPE_NAME_ALIASES.get(name)
        if type_name is not None:
            return self.type_constructor(type_name, call, scope)
        if name in ("CONCAT",):
            if len(call.args) < 2:
                raise _error(INVALID_STATEMENT, "CONCAT takes at least two arguments", call)
            result = self.expression(call.args[0], scope)
            for arg in call.args[1:]:
                result = self.concat(result, self.expression(arg, scope), arg)
            return result
        if name not in _SCALAR_FUNCTION_NAMES:
            raise _error(
                INVALID_STATEMENT,
                f"unknown function {name}; functions are {', '.join(_SCALAR_FUNCTION_NAMES)}, "
                f"the aggregates {', '.join(_AGGREGATES)} and the type constructors "
                f"{', '.join(NES_TYPE_NAMES)}",
                call,
            )
        expected_arguments = 2 if name in ("POW", "POWER") else 1
        if len(call.args) != expected_arguments:
            raise _error(
                INVALID_STATEMENT,
                f"{name} takes {expected_arguments} argument(s), got {len(call.args)}",
                call,
            )
        if name == "ISNULL":
            return ir.CallExpr(
                "is_null", (self.operand(call.args[0], scope, "BOOLEAN"),), "BOOLEAN", False
            )
        args = [self.expression(arg, scope) for arg in call.args]
        nullable = any(arg.nullable for arg in args)
        if name in _SAME_TYPE_FUNCTIONS:
            _require(args[0], _NUMERIC_TYPES, name, call)
            return ir.CallExpr(_SAME_TYPE_FUNCTIONS[name], (args[0],), args[0].type, nullable)
        if name in _FLOAT64_FUNCTIONS:
            _require(args[0], _NUMERIC_TYPES, name, call)
            return ir.CallExpr(
                _FLOAT64_FUNCTIONS[name], (_cast(args[0], "FLOAT64"),), "FLOAT64", nullable
            )
        if name in ("POW", "POWER"):
            for value, written in zip(args, call.args, strict=True):
                _require(value, _NUMERIC_TYPES, name, written)
            return ir.CallExpr("pow", tuple(_cast(a, "FLOAT64") for a in args), "FLOAT64", nullable)
        if name == "CASTTOUNIXTS":
            _require(args[0], STRING_TYPES, name, call)
            return ir.CallExpr(
                "iso_text_to_unix_ms", (_cast(args[0], "VARSIZED"),), "UINT64", nullable
            )
        _require(args[0], INTEGER_TYPES, name, call)  # CASTFROMUNIXTS
        return ir.CallExpr("unix_ms_to_iso_text", (_cast(args[0], "UINT64"),), "VARSIZED", nullable)

    def type_constructor(self, type_name: str, call: ast.FunctionCall, scope: _Scope) -> ir.Expr:
        if len(call.args) != 1:
            raise _error(INVALID_STATEMENT, f"{call.name}(...) takes exactly one value", call)
        argument = call.args[0]
        if isinstance(argument, ast.Literal):
            return _typed_literal(type_name, argument)
        value = self.expression(argument, scope)
        if value.type == type_name:
            return value
        if value.type in _NUMERIC_TYPES and type_name in _NUMERIC_TYPES:
            return _cast(value, type_name)
        if value.type in STRING_TYPES and type_name in STRING_TYPES:
            return _cast(value, type_name)
        raise _error(TYPE_MISMATCH, f"cannot convert {value.type} to {type_name}", call)


def _aggregate_calls(node: ast.Expression) -> Iterator[ast.FunctionCall]:
    """Aggregate calls inside an expression (outermost first, not descending into them)."""
    pending: list[ast.Expression] = [node]
    while pending:
        current = pending.pop()
        if isinstance(current, ast.FunctionCall):
            if current.name in _AGGREGATES:
                yield current
                continue
            pending.extend(reversed(current.args))
        elif isinstance(current, ast.BinaryOp):
            pending.extend((current.right, current.left))
        elif isinstance(current, ast.UnaryOp | ast.IsNull):
            pending.append(current.operand)
