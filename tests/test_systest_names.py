"""A system-test file run's namespace (streamctl/systest/namespace.py), without a stack.

* Its lexer is the planner's: the patterns it cuts statements with are the grammar's terminals.
* Property: a run's statements parse to the statements the file wrote with only the names of
  the logical sources and sinks the file defines changed (where a source or sink name, a
  qualifier or a field's ``qualifier$`` stands), whatever the names, column names that equal
  them, aliases, option keys and string literals that spell them; ``plain`` undoes it.
* Two runs never share a name; a name used before the file defines it stays as written.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamctl.planner import ast
from streamctl.planner.parser import _lark_parser, parse_statements
from streamctl.systest import namespace as systest_names
from streamctl.systest.namespace import SEPARATOR, Namespace, tokens

pytestmark = pytest.mark.quick

TAG = "20260"
"""Digits only, so that upper-casing unquoted names leaves it alone."""


def test_the_lexer_uses_the_grammar_terminals() -> None:
    terminals = {t.name: t.pattern.value for t in _lark_parser().terminals}
    for name in (
        "LINE_COMMENT",
        "BLOCK_COMMENT",
        "QUOTED_IDENTIFIER",
        "SINGLE_QUOTED",
        "DOUBLE_QUOTED",
        "FLOAT",
        "INTEGER",
    ):
        # lark keeps a regex's "\n" as the character itself
        assert getattr(systest_names, name).replace("\\n", "\n") == terminals[name], name
    assert terminals["IDENTIFIER"].endswith(systest_names.WORD)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_property_tokens_join_to_the_text(text: str) -> None:
    assert "".join(token.text for token in tokens(text)) == text


KEYWORDS = {
    str(t.pattern.value).upper()
    for t in _lark_parser().terminals
    if t.pattern.type == "str" and str(t.pattern.value).isalpha()
} | {"FILE", "SEC"}
"""The grammar's keywords, and the type and unit the statements below name."""
NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(
    lambda name: name.upper() not in KEYWORDS and SEPARATOR not in name
)
LITERALS = st.text(st.sampled_from("abs_. $`\"'x"), max_size=12).map(
    lambda text: text.replace("'", "\\'")
)


def file_statements(names: list[str], literal: str) -> list[str]:
    """A file's statements over a few names: two sources, a sink, columns (which may be
    spelled like a source), an alias; the literal may spell names too."""
    src, other, sink, col, col2, alias = names
    return [
        f"SELECT {col} FROM {src} INTO {sink}",  # before the file defines them
        f"CREATE LOGICAL SOURCE {src}({col} INT32, {col2} UINT64 NOT NULL)",
        f"CREATE LOGICAL SOURCE `{other}`({col2} UINT64 NOT NULL)",
        f"CREATE PHYSICAL SOURCE FOR {src} TYPE File SET('{literal}' AS `SOURCE`.FILE_PATH)",
        f"CREATE SINK {sink}({src}.{col} INT32, `{src}${col2}` UINT64) TYPE File "
        f"SET('{src}' AS `SINK`.FILE_PATH, '{literal}' AS {sink}.x)",
        f"SELECT {src}.{col}, {col2} AS {alias}, {src}.*, `{src}${col2}` FROM {src} AS {alias} "
        f"WHERE {col} = '{literal}' -- {src}\n INTO {sink}",
        f"SELECT * FROM {src} INNER JOIN (SELECT * FROM {other}) ON {col} = {other}.{col2} "
        f"WINDOW TUMBLING({col2}, SIZE 1 SEC) INTO {sink}",
        f"SELECT {col} FROM File('{literal}' AS `SOURCE`.FILE_PATH) AS {src} INTO File()",
    ]


def renamed_ast(node: Any, defined: set[str], tag: str) -> Any:
    """The syntax tree as a tuple without positions, with the defined names renamed where
    the namespace renames them: whole names of sources and sinks, qualifiers, and the
    qualifier of ``q$field``."""

    def whole(name: str) -> str:
        if name.casefold() in defined:
            return f"{name}{SEPARATOR}{tag}"
        return dollar(name)

    def dollar(name: str) -> str:
        qualifier, sign, rest = name.partition("$")
        if sign and qualifier.casefold() in defined:
            return f"{qualifier}{SEPARATOR}{tag}${rest}"
        return name

    def chain(parts: tuple[str, ...]) -> tuple[str, ...]:
        if len(parts) > 1:
            return (whole(parts[0]), *parts[1:])
        return (dollar(parts[0]),)

    if isinstance(node, ast.CreateLogicalSource | ast.CreateSink | ast.SourceRef | ast.SinkRef):
        node = dataclasses.replace(node, name=whole(node.name))
    elif isinstance(node, ast.CreatePhysicalSource):
        node = dataclasses.replace(node, logical_source=whole(node.logical_source))
    elif isinstance(node, ast.ColumnRef):
        node = dataclasses.replace(node, parts=chain(node.parts))
    elif isinstance(node, ast.ColumnDef):
        node = dataclasses.replace(node, name=chain(node.name))
    elif isinstance(node, ast.Star) and node.qualifier:
        node = dataclasses.replace(node, qualifier=(whole(node.qualifier[0]), *node.qualifier[1:]))
    return without_positions(node, lambda child: renamed_ast(child, defined, tag))


def without_positions(node: Any, recurse: Any) -> Any:
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        fields = dataclasses.fields(node)
        kept = tuple((f.name, recurse(getattr(node, f.name))) for f in fields if f.name != "line")
        return (type(node).__name__, *(pair for pair in kept if pair[0] != "column"))
    if isinstance(node, tuple | list):
        return tuple(recurse(child) for child in node)
    if isinstance(node, dict):
        return tuple(sorted((k, recurse(v)) for k, v in node.items()))
    return node


def plain_ast(node: Any) -> Any:
    return without_positions(node, plain_ast)


@settings(max_examples=300, deadline=None)
@given(
    names=st.lists(NAMES, min_size=6, max_size=6).flatmap(
        lambda pool: st.lists(st.sampled_from(pool), min_size=6, max_size=6)
    ),
    literal=LITERALS,
)
def test_property_only_the_defined_names_change(names: list[str], literal: str) -> None:
    src, other, sink = names[:3]
    if len({src.casefold(), other.casefold(), sink.casefold()}) < 3:
        return  # one name for two objects: not a file that runs
    namespace = Namespace(tag=TAG)
    defined: set[str] = set()
    for statement in file_statements(names, literal):
        rewritten = namespace.rewrite(statement)
        [original] = parse_statements(statement)
        [parsed] = parse_statements(rewritten)
        if isinstance(original, ast.CreateLogicalSource | ast.CreateSink):
            defined.add(original.name.casefold())
        assert plain_ast(parsed) == renamed_ast(original, defined, TAG), rewritten
        assert namespace.plain(rewritten) == statement
        assert namespace.owns(rewritten) == (rewritten != statement)


def test_two_runs_never_share_a_name_and_earlier_references_stay() -> None:
    first, second = Namespace(), Namespace()
    assert first.tag != second.tag
    query = "SELECT id FROM stream INTO sink"
    assert first.rewrite(query) == query  # nothing defined yet: UNKNOWN_SOURCE as written
    create = "CREATE LOGICAL SOURCE stream(id UINT64); CREATE SINK sink(id UINT64) TYPE File"
    assert first.rewrite(create) != second.rewrite(create)
    assert first.rewrite(query) == f"SELECT id FROM stream__{first.tag} INTO sink__{first.tag}"
    assert not second.owns(first.rewrite(query))
    detail = f"unknown column 'X' in source 'STREAM__{first.tag.upper()}'"
    assert first.plain(detail) == "unknown column 'X' in source 'STREAM'"
