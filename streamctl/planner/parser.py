"""Parse NebulaStream statements into the syntax tree of :mod:`.ast`.

Guarantees:

* :func:`parse_statements` and :func:`parse_query` return frozen AST nodes or raise
  :class:`~streamctl.planner.planning_errors.PlannerError` -- never a lark exception,
  ``RecursionError``
  or anything else, whatever the input;
* parsing is LALR(1) (linear in the input) on input of at most :data:`MAX_STATEMENT_CHARS`
  characters, and syntax nested deeper than :data:`MAX_NESTING` levels is refused before any
  recursive step, so pathological input costs bounded time and stack;
* syntax errors name the line, the column and the offending text, and list what would have
  been accepted there.

The grammar lives in ``grammar.lark`` next to this module.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any, Final, NoReturn, TypedDict, cast

import lark
from lark import Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken
from lark.tree import Meta

from streamctl.error_codes import INVALID_STATEMENT, NOT_SUPPORTED, SYNTAX_ERROR
from streamctl.limits import MAX_IN_LIST_VALUES
from streamctl.nes_types import NES_TYPE_NAMES, TYPE_NAME_ALIASES
from streamctl.planner import ast
from streamctl.planner.planning_errors import PlannerError

MAX_STATEMENT_CHARS: Final = 1_000_000
"""Longest statement text accepted (characters)."""

MAX_NESTING: Final = 200
"""Deepest nesting of syntax (parentheses, operator chains, subqueries) accepted."""

_TERMINAL_DESCRIPTIONS: Final[dict[str, str]] = {
    "IDENTIFIER": "an identifier",
    "QUOTED_IDENTIFIER": "a `quoted identifier`",
    "INTEGER": "an integer",
    "FLOAT": "a number",
    "SINGLE_QUOTED": "a string",
    "DOUBLE_QUOTED": "a string",
    "COMPARISON": "a comparison operator",
    "DOT_STAR": "'.*'",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "SEMICOLON": "';'",
    "DOT": "'.'",
    "BANG": "'!'",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "STAR": "'*'",
    "SLASH": "'/'",
    "PERCENT": "'%'",
    "CONCAT_PIPE": "'||'",
    "$END": "the end of the statement",
}


@functools.cache
def _lark_parser() -> lark.Lark:
    grammar = resources.files("streamctl.planner").joinpath("grammar.lark").read_text("utf-8")
    return lark.Lark(
        grammar,
        parser="lalr",
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=True,
    )


def parse_statements(text: str) -> list[ast.Statement]:
    """Parse one or more statements separated by ``;`` (empty statements are skipped)."""
    try:
        return _parse(text)
    except PlannerError:
        raise
    except Exception as error:  # defensive: the contract is "only PlannerError"
        raise PlannerError(SYNTAX_ERROR, f"cannot parse statement: {error}") from None


def parse_query(text: str) -> ast.QueryStatement:
    """Parse exactly one query statement (``SELECT ... INTO sink``)."""
    statements = parse_statements(text)
    if len(statements) != 1:
        raise PlannerError(
            INVALID_STATEMENT, f"expected exactly one query statement, got {len(statements)}"
        )
    statement = statements[0]
    if not isinstance(statement, ast.QueryStatement):
        raise PlannerError(
            INVALID_STATEMENT,
            f"expected a query (SELECT ... INTO sink), got {statement_kind(statement)}",
            statement.line,
            statement.column,
        )
    return statement


def statement_kind(statement: ast.Statement) -> str:
    """What a statement is, as users write it: ``CREATE SINK``, ``SELECT``, ``SHOW``..."""
    return {
        ast.QueryStatement: "SELECT",
        ast.ExplainStatement: "EXPLAIN",
        ast.CreateLogicalSource: "CREATE LOGICAL SOURCE",
        ast.CreatePhysicalSource: "CREATE PHYSICAL SOURCE",
        ast.CreateSink: "CREATE SINK",
        ast.CreateWorker: "CREATE WORKER",
        ast.ShowStatement: "SHOW",
        ast.DropStatement: "DROP",
    }.get(type(statement), type(statement).__name__)


def _parse(text: str) -> list[ast.Statement]:
    if not isinstance(text, str):
        raise PlannerError(SYNTAX_ERROR, f"statement text must be a string, got {type(text)}")
    if len(text) > MAX_STATEMENT_CHARS:
        raise PlannerError(
            SYNTAX_ERROR,
            f"statement text is {len(text)} characters long; at most {MAX_STATEMENT_CHARS}",
        )
    try:
        tree = _lark_parser().parse(text)
    except UnexpectedInput as error:
        _raise_syntax_error(error, text)
    _check_nesting(tree)
    try:
        statements = _AstBuilder().transform(tree)
    except lark.exceptions.VisitError as error:
        if isinstance(error.orig_exc, PlannerError):
            raise error.orig_exc from None
        raise
    return cast(list[ast.Statement], statements)


def _raise_syntax_error(error: UnexpectedInput, text: str) -> NoReturn:
    line, column = error.line, error.column
    if isinstance(error, UnexpectedCharacters):
        position = error.pos_in_stream
        char = text[position] if position is not None and 0 <= position < len(text) else "?"
        message = f"unexpected character {char!r}"
        if char in "'\"`":
            message += " (unterminated quote?)"
    elif isinstance(error, UnexpectedToken):
        token = error.token
        if token.type == "$END":
            message = "unexpected end of the statement"
            line, column = _end_position(text)
        else:
            message = f"unexpected {str(token)!r}"
        message += "; expected " + _describe_expected(error.expected)
    elif isinstance(error, UnexpectedEOF):
        message = "unexpected end of the statement"
        line, column = _end_position(text)
    else:
        message = str(error)
    if line is None or line < 1:
        line, column = _end_position(text)
    raise PlannerError(SYNTAX_ERROR, message, line, column)


def _end_position(text: str) -> tuple[int, int]:
    lines = text.split("\n")
    return len(lines), len(lines[-1]) + 1


def _describe_expected(expected: set[str] | frozenset[str]) -> str:
    names = sorted({_TERMINAL_DESCRIPTIONS.get(name, name) for name in expected})
    if len(names) > 12:
        names = [*names[:12], "..."]
    return "one of " + ", ".join(names) if len(names) > 1 else "".join(names)


def _check_nesting(tree: Tree[Token]) -> None:
    """Refuse trees deeper than MAX_NESTING, iteratively (so the check itself cannot overflow)."""
    stack: list[tuple[Tree[Token], int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            meta = node.meta
            raise PlannerError(
                SYNTAX_ERROR,
                f"statement is nested more than {MAX_NESTING} levels deep",
                getattr(meta, "line", None),
                getattr(meta, "column", None),
            )
        stack.extend((child, depth + 1) for child in node.children if isinstance(child, Tree))


# ---- tree -> AST -----------------------------------------------------------------------------


def _identifier(token: Token) -> str:
    """NebulaStream identifier normalisation: unquoted upper-cased, back-quoted kept."""
    if token.type == "QUOTED_IDENTIFIER":
        return str(token)[1:-1].replace("``", "`")
    return str(token).upper()


_ESCAPES: Final = {"n": "\n", "t": "\t", "r": "\r", "0": "\0"}


def _unescape_string(token: Token) -> str:
    body = str(token)[1:-1]
    out: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        if char == "\\" and index + 1 < len(body):
            following = body[index + 1]
            out.append(_ESCAPES.get(following, following))
            index += 2
        else:
            out.append(char)
            index += 1
    return "".join(out)


class _Position(TypedDict):
    line: int
    column: int


def _pos(meta: Meta) -> _Position:
    return {"line": getattr(meta, "line", 1), "column": getattr(meta, "column", 1)}


def _token_pos(token: Token) -> _Position:
    return {"line": token.line or 1, "column": token.column or 1}


def _syntax_error(message: str, where: Token | Meta) -> PlannerError:
    line = getattr(where, "line", None)
    column = getattr(where, "column", None)
    return PlannerError(SYNTAX_ERROR, message, line, column)


def _type_name(tokens: list[Token]) -> tuple[str, Token]:
    spelled = " ".join(_identifier(token).upper() for token in tokens)
    canonical = TYPE_NAME_ALIASES.get(spelled)
    if canonical is None:
        raise _syntax_error(
            f"unknown data type {spelled!r}; expected one of {', '.join(NES_TYPE_NAMES)}",
            tokens[0],
        )
    return canonical, tokens[0]


def _duration(amount: Token, unit: Token, meta: Meta) -> ast.Duration:
    unit_name = _identifier(unit).upper()
    if unit_name not in ast.TIME_UNIT_MILLIS:
        raise _syntax_error(
            f"unknown time unit {str(unit)!r}; expected one of MS, SEC, MINUTE(S), HOUR(S), DAY(S)",
            unit,
        )
    return ast.Duration(amount=int(amount), unit=unit_name, **_pos(meta))


@dataclass(frozen=True)
class _JoinPart:
    right: ast.Relation
    condition: ast.Expression | None
    window: ast.WindowSpec
    line: int
    column: int


@dataclass(frozen=True)
class _WindowPart:
    group_by: tuple[ast.Expression, ...]
    window: ast.WindowSpec | None
    watermark: ast.Watermark | None


def _present(children: list[Any]) -> list[Any]:
    """Children without the placeholders of absent optional parts."""
    return [child for child in children if child is not None]


_COMPARISON_OPERATORS: Final[dict[str, ast.BinaryOperator]] = {
    "=": "==",
    "==": "==",
    "!=": "!=",
    "<>": "!=",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
    "<=>": "<=>",
}
_ARITHMETIC_OPERATORS: Final[dict[str, ast.BinaryOperator]] = {
    "+": "+",
    "-": "-",
    "*": "*",
    "/": "/",
    "%": "%",
    "||": "||",
}


@v_args(meta=True)
class _AstBuilder(Transformer[Token, Any]):
    """Builds :mod:`.ast` nodes bottom-up; one method per named grammar rule or alias."""

    # statements

    def start(self, meta: Meta, children: list[Any]) -> list[ast.Statement]:
        return _present(children)

    def create_logical_source(self, meta: Meta, c: list[Any]) -> ast.CreateLogicalSource:
        return ast.CreateLogicalSource(name=_identifier(c[3]), columns=c[4], **_pos(meta))

    def create_physical_source(self, meta: Meta, c: list[Any]) -> ast.CreatePhysicalSource:
        return ast.CreatePhysicalSource(
            logical_source=_identifier(c[4]),
            source_type=_identifier(c[6]).upper(),
            options=c[7] or (),
            **_pos(meta),
        )

    def create_sink(self, meta: Meta, c: list[Any]) -> ast.CreateSink:
        return ast.CreateSink(
            name=_identifier(c[2]),
            columns=c[3],
            sink_type=_identifier(c[5]).upper(),
            options=c[6] or (),
            **_pos(meta),
        )

    def create_worker(self, meta: Meta, c: list[Any]) -> ast.CreateWorker:
        token: Token = c[2]
        is_string = token.type in ("SINGLE_QUOTED", "DOUBLE_QUOTED")
        name = _unescape_string(token) if is_string else _identifier(token)
        return ast.CreateWorker(name=name, options=c[3] or (), **_pos(meta))

    def schema_definition(self, meta: Meta, c: list[Any]) -> tuple[ast.ColumnDef, ...]:
        return tuple(c)

    def column_definition(self, meta: Meta, c: list[Any]) -> ast.ColumnDef:
        name, (type_name, _), not_token = c[0], c[1], c[2]
        return ast.ColumnDef(
            name=tuple(name), type=type_name, not_null=not_token is not None, **_pos(meta)
        )

    def type_name(self, meta: Meta, c: list[Token]) -> tuple[str, Token]:
        return _type_name(c)

    def options_clause(self, meta: Meta, c: list[Any]) -> tuple[ast.Option, ...]:
        return tuple(_present(c[1:]))

    def option(self, meta: Meta, c: list[Any]) -> ast.Option:
        key = tuple(part.upper() for part in c[2])
        return ast.Option(key=key, value=c[0], **_pos(meta))

    def schema_value(self, meta: Meta, c: list[Any]) -> ast.SchemaValue:
        return ast.SchemaValue(columns=c[1], **_pos(meta))

    # SHOW / DROP / EXPLAIN

    def show_statement(self, meta: Meta, c: list[Any]) -> ast.ShowStatement:
        subject, for_name = c[1]
        format_token: Token | None = c[5]
        output_format = "TEXT"
        if format_token is not None:
            output_format = _identifier(format_token).upper()
            if output_format not in ("TEXT", "JSON"):
                raise _syntax_error(
                    f"unknown output format {str(format_token)!r}; expected TEXT or JSON",
                    format_token,
                )
        return ast.ShowStatement(
            subject=subject,
            for_logical_source=for_name,
            filter=c[3],
            format=cast(Any, output_format),
            **_pos(meta),
        )

    def show_queries(self, meta: Meta, c: list[Any]) -> tuple[str, None]:
        return "QUERIES", None

    def show_logical_sources(self, meta: Meta, c: list[Any]) -> tuple[str, None]:
        return "LOGICAL SOURCES", None

    def show_physical_sources(self, meta: Meta, c: list[Any]) -> tuple[str, str | None]:
        return "PHYSICAL SOURCES", None if c[3] is None else _identifier(c[3])

    def show_sinks(self, meta: Meta, c: list[Any]) -> tuple[str, None]:
        return "SINKS", None

    def show_workers(self, meta: Meta, c: list[Any]) -> tuple[str, None]:
        return "WORKERS", None

    def drop_statement(self, meta: Meta, c: list[Any]) -> ast.DropStatement:
        return ast.DropStatement(subject=c[1], filter=c[2], cascade=c[3] is not None, **_pos(meta))

    def drop_query(self, meta: Meta, c: list[Any]) -> str:
        return "QUERY"

    def drop_logical_source(self, meta: Meta, c: list[Any]) -> str:
        return "LOGICAL SOURCE"

    def drop_physical_source(self, meta: Meta, c: list[Any]) -> str:
        return "PHYSICAL SOURCE"

    def drop_sink(self, meta: Meta, c: list[Any]) -> str:
        return "SINK"

    def drop_worker(self, meta: Meta, c: list[Any]) -> str:
        return "WORKER"

    def where_target(self, meta: Meta, c: list[Any]) -> ast.Filter:
        return cast(ast.Filter, c[1])

    def name_target(self, meta: Meta, c: list[Any]) -> ast.Filter:
        token: Token = c[0]
        value = ast.Literal(kind="string", text=_identifier(token), **_token_pos(token))
        return ast.Filter(attribute="NAME", value=value, **_pos(meta))

    def constant_target(self, meta: Meta, c: list[Any]) -> ast.Filter:
        value: ast.Literal = c[0]
        attribute = "ID" if value.kind == "integer" else "NAME"
        return ast.Filter(attribute=attribute, value=value, **_pos(meta))

    def filter(self, meta: Meta, c: list[Any]) -> ast.Filter:
        operator: Token = c[1]
        if str(operator) not in ("=", "=="):
            raise _syntax_error(f"filters compare with '=', not {str(operator)!r}", operator)
        return ast.Filter(attribute=_identifier(c[0]).upper(), value=c[2], **_pos(meta))

    def explain_statement(self, meta: Meta, c: list[Any]) -> ast.ExplainStatement:
        return ast.ExplainStatement(statement=c[1], **_pos(meta))

    # queries

    def query_statement(self, meta: Meta, c: list[Any]) -> ast.QueryStatement:
        return ast.QueryStatement(query=c[0], sink=c[2], options=c[3] or (), **_pos(meta))

    def union(self, meta: Meta, c: list[Any]) -> ast.Union:
        return ast.Union(left=c[0], right=c[2], **_pos(meta))

    def select(self, meta: Meta, c: list[Any]) -> ast.Select:
        window_part: _WindowPart = c[5] or _WindowPart((), None, None)
        return ast.Select(
            items=c[1],
            source=c[3],
            where=c[4],
            group_by=window_part.group_by,
            window=window_part.window,
            watermark=window_part.watermark,
            having=c[6],
            **_pos(meta),
        )

    def select_list(self, meta: Meta, c: list[Any]) -> tuple[ast.SelectItem, ...]:
        return tuple(c)

    def star(self, meta: Meta, c: list[Any]) -> ast.Star:
        return ast.Star(qualifier=None, **_pos(meta))

    def qualified_star(self, meta: Meta, c: list[Any]) -> ast.Star:
        return ast.Star(qualifier=tuple(c[0]), **_pos(meta))

    def select_expression(self, meta: Meta, c: list[Any]) -> ast.SelectExpression:
        alias = None if c[2] is None else _identifier(c[2])
        return ast.SelectExpression(expression=c[0], alias=alias, **_pos(meta))

    def where_clause(self, meta: Meta, c: list[Any]) -> ast.Expression:
        return cast(ast.Expression, c[1])

    def having_clause(self, meta: Meta, c: list[Any]) -> ast.Expression:
        return cast(ast.Expression, c[1])

    def window_part(self, meta: Meta, c: list[Any]) -> _WindowPart:
        if isinstance(c[0], ast.WindowSpec):
            window, group_by, watermark = c
        else:
            group_by, window, watermark = c
        return _WindowPart(group_by or (), window, watermark)

    def group_by(self, meta: Meta, c: list[Any]) -> tuple[ast.Expression, ...]:
        return self.group_key_list(meta, c[2:-1])  # the last child: no grouping_analytics

    def grouping_analytics(self, meta: Meta, c: list[Any]) -> NoReturn:
        raise PlannerError(
            NOT_SUPPORTED,
            f"GROUP BY ... {' '.join(str(t) for t in c[:2]).upper()} is not supported: "
            "NebulaStream parses it but groups by the fields named only; write GROUP BY a, b",
            meta.line,
            meta.column,
        )

    def group_key_list(self, meta: Meta, c: list[Any]) -> tuple[ast.Expression, ...]:
        # `(a, b)` names its keys like `a, b`: flatten (inner lists are already tuples).
        keys: list[ast.Expression] = []
        for key in c:
            keys.extend(key if isinstance(key, tuple) else (key,))
        return tuple(keys)

    def window_clause(self, meta: Meta, c: list[Any]) -> ast.WindowSpec:
        return cast(ast.WindowSpec, c[1])

    # A window names its event-time column, or (a join's, as newer NebulaStream grammars
    # write it) each input's, left first: TUMBLING(ts1, ts2, SIZE 1 SEC).
    def tumbling(self, meta: Meta, c: list[Any]) -> ast.WindowSpec:
        *columns, size = c[1:]
        left, right = self._time_columns(columns)
        return ast.WindowSpec(
            kind="TUMBLING", time_column=left, right_time_column=right, size=size, **_pos(meta)
        )

    def sliding(self, meta: Meta, c: list[Any]) -> ast.WindowSpec:
        *columns, size, advance = c[1:]
        left, right = self._time_columns(columns)
        return ast.WindowSpec(
            kind="SLIDING",
            time_column=left,
            right_time_column=right,
            size=size,
            advance=advance,
            **_pos(meta),
        )

    def _time_columns(
        self, columns: list[Any]
    ) -> tuple[ast.ColumnRef | None, ast.ColumnRef | None]:
        """The window's event-time column (None: not named) and a join's right input's."""
        right = columns[1] if len(columns) > 1 else None
        return self._time_column(columns[0]), self._time_column(right)

    def count_window(self, meta: Meta, c: list[Any]) -> ast.WindowSpec:
        return ast.WindowSpec(
            kind="COUNT", time_column=None, size=None, count=int(c[1]), **_pos(meta)
        )

    @staticmethod
    def _time_column(parts: tuple[str, ...] | None) -> ast.ColumnRef | None:
        if parts is None:
            return None
        chain = cast(_Chain, parts)
        return ast.ColumnRef(parts=tuple(chain), line=chain.line, column=chain.column)

    def size(self, meta: Meta, c: list[Any]) -> ast.Duration:
        return _duration(c[1], c[2], meta)

    def advance(self, meta: Meta, c: list[Any]) -> ast.Duration:
        return _duration(c[2], c[3], meta)

    def watermark_clause(self, meta: Meta, c: list[Any]) -> ast.Watermark:
        column = self._time_column(c[1])
        assert column is not None
        return ast.Watermark(time_column=column, delay=_duration(c[2], c[3], meta), **_pos(meta))

    def relation(self, meta: Meta, c: list[Any]) -> ast.Relation:
        relation: ast.Relation = c[0]
        for part in c[1:]:
            join = cast(_JoinPart, part)
            relation = ast.Join(
                left=relation,
                right=join.right,
                condition=join.condition,
                window=join.window,
                line=join.line,
                column=join.column,
            )
        return relation

    def join(self, meta: Meta, c: list[Any]) -> _JoinPart:
        pos = _pos(meta)
        return _JoinPart(c[2], c[4], c[5], pos["line"], pos["column"])

    def source_reference(self, meta: Meta, c: list[Any]) -> ast.SourceRef:
        chain: _Chain = c[0]
        if len(chain) != 1:
            raise _syntax_error(
                f"source names are not qualified: {'.'.join(chain)!r}", cast(Meta, chain)
            )
        return ast.SourceRef(name=chain[0], alias=c[1], **_pos(meta))

    def subquery(self, meta: Meta, c: list[Any]) -> ast.SubqueryRef:
        return ast.SubqueryRef(query=c[0], alias=c[1], **_pos(meta))

    def inline_source(self, meta: Meta, c: list[Any]) -> ast.InlineSource:
        return ast.InlineSource(
            source_type=_identifier(c[0]).upper(),
            options=tuple(_present(c[1:-1])),
            alias=c[-1],
            **_pos(meta),
        )

    def alias(self, meta: Meta, c: list[Any]) -> str:
        return _identifier(c[1])

    def sink_reference(self, meta: Meta, c: list[Any]) -> ast.SinkRef:
        return ast.SinkRef(name=_identifier(c[0]), **_pos(meta))

    def inline_sink(self, meta: Meta, c: list[Any]) -> ast.InlineSink:
        return ast.InlineSink(
            sink_type=_identifier(c[0]).upper(), options=tuple(_present(c[1:])), **_pos(meta)
        )

    # expressions

    def logical_or(self, meta: Meta, c: list[Any]) -> ast.BinaryOp:
        return ast.BinaryOp(op="OR", left=c[0], right=c[2], **_pos(meta))

    def logical_and(self, meta: Meta, c: list[Any]) -> ast.BinaryOp:
        return ast.BinaryOp(op="AND", left=c[0], right=c[2], **_pos(meta))

    def logical_not(self, meta: Meta, c: list[Any]) -> ast.UnaryOp:
        return ast.UnaryOp(op="NOT", operand=c[1], **_pos(meta))

    def is_null(self, meta: Meta, c: list[Any]) -> ast.IsNull:
        return ast.IsNull(operand=c[0], negated=c[2] is not None, **_pos(meta))

    def between(self, meta: Meta, c: list[Any]) -> ast.Expression:
        # ``x [NOT] BETWEEN low AND high`` is ``[NOT] (x >= low AND x <= high)``, as in SQL
        # (both bounds inclusive; a NULL anywhere makes it NULL unless the other side decides).
        operand, negated, _, low, _, high = c
        position = _pos(meta)
        within = ast.BinaryOp(
            op="AND",
            left=ast.BinaryOp(op=">=", left=operand, right=low, **position),
            right=ast.BinaryOp(op="<=", left=operand, right=high, **position),
            **position,
        )
        return within if negated is None else ast.UnaryOp(op="NOT", operand=within, **position)

    def in_list(self, meta: Meta, c: list[Any]) -> ast.Expression:
        # ``x [NOT] IN (a, b, ...)`` is ``[NOT] (x = a OR x = b OR ...)``, as in SQL.
        # The ORs form a balanced tree: a chain would nest as deep as the list is long, and
        # the binder's recursion refused lists of a few hundred.
        operand, negated, _, *candidates = c
        if len(candidates) > MAX_IN_LIST_VALUES:
            raise _syntax_error(
                f"an IN list holds at most {MAX_IN_LIST_VALUES} values, not {len(candidates)}",
                meta,
            )
        position = _pos(meta)
        equals: list[ast.Expression] = [
            ast.BinaryOp(op="==", left=operand, right=candidate, **position)
            for candidate in candidates
        ]
        while len(equals) > 1:
            paired: list[ast.Expression] = [
                ast.BinaryOp(op="OR", left=left, right=right, **position)
                for left, right in zip(equals[::2], equals[1::2], strict=False)
            ]
            equals = paired + equals[len(paired) * 2 :]
        matches = equals[0]
        return matches if negated is None else ast.UnaryOp(op="NOT", operand=matches, **position)

    def binary(self, meta: Meta, c: list[Any]) -> ast.BinaryOp:
        text = str(c[1])
        operator = _COMPARISON_OPERATORS.get(text) or _ARITHMETIC_OPERATORS[text]
        return ast.BinaryOp(op=operator, left=c[0], right=c[2], **_pos(meta))

    def unary(self, meta: Meta, c: list[Any]) -> ast.Expression:
        operand: ast.Expression = c[1]
        if str(c[0]) == "+":
            return ast.UnaryOp(op="+", operand=operand, **_pos(meta))
        if isinstance(operand, ast.Literal) and operand.kind in ("integer", "float"):
            # A minus written before a number is part of the constant.
            negated = operand.text[1:] if operand.text.startswith("-") else "-" + operand.text
            return ast.Literal(kind=operand.kind, text=negated, **_pos(meta))
        return ast.UnaryOp(op="-", operand=operand, **_pos(meta))

    def column_reference(self, meta: Meta, c: list[Any]) -> ast.ColumnRef:
        return ast.ColumnRef(parts=tuple(c[0]), **_pos(meta))

    def function_call(self, meta: Meta, c: list[Any]) -> ast.FunctionCall:
        return ast.FunctionCall(
            name=_identifier(c[0]).upper(), args=tuple(_present(c[1:])), **_pos(meta)
        )

    def function_call_star(self, meta: Meta, c: list[Any]) -> ast.FunctionCall:
        return ast.FunctionCall(name=_identifier(c[0]).upper(), args=(), star=True, **_pos(meta))

    def identifier_chain(self, meta: Meta, c: list[Token]) -> _Chain:
        return _Chain([_identifier(token) for token in c], meta)

    # constants

    def integer_literal(self, meta: Meta, c: list[Token]) -> ast.Literal:
        return ast.Literal(kind="integer", text=str(int(c[0])), **_token_pos(c[0]))

    def float_literal(self, meta: Meta, c: list[Token]) -> ast.Literal:
        return ast.Literal(kind="float", text=str(c[0]), **_token_pos(c[0]))

    def negative_integer_literal(self, meta: Meta, c: list[Token]) -> ast.Literal:
        return ast.Literal(kind="integer", text=str(-int(c[1])), **_token_pos(c[0]))

    def negative_float_literal(self, meta: Meta, c: list[Token]) -> ast.Literal:
        return ast.Literal(kind="float", text="-" + str(c[1]), **_token_pos(c[0]))

    def string_literal(self, meta: Meta, c: list[Token]) -> ast.Literal:
        return ast.Literal(kind="string", text=_unescape_string(c[0]), **_token_pos(c[0]))

    def true_literal(self, meta: Meta, c: list[Token]) -> ast.Literal:
        return ast.Literal(kind="boolean", text="TRUE", **_token_pos(c[0]))

    def false_literal(self, meta: Meta, c: list[Token]) -> ast.Literal:
        return ast.Literal(kind="boolean", text="FALSE", **_token_pos(c[0]))

    def null_literal(self, meta: Meta, c: list[Token]) -> ast.Literal:
        return ast.Literal(kind="null", text="NULL", **_token_pos(c[0]))


class _Chain(tuple[str, ...]):
    """An identifier chain that remembers where it was written."""

    line: int
    column: int

    def __new__(cls, parts: list[str], meta: Meta) -> _Chain:
        chain = super().__new__(cls, parts)
        chain.line = getattr(meta, "line", 1)
        chain.column = getattr(meta, "column", 1)
        return chain
