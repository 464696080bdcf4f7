"""A system-test file run's namespace: the names its statements define, made unique per run.

The coordinator's catalog is shared by everyone using the stack, and the suite's files reuse the
same few names (``stream``, ``sink``, ``s``...). So that files, and repeated or concurrent
``streamctl systest`` invocations against one stack, never see each other's objects, every run
of a file renames the logical sources and sinks the file defines: ``stream`` becomes
``stream__<tag>``, with a random ``tag`` per file run.

Protocol
--------
:meth:`Namespace.rewrite` takes one statement as the file wrote it and returns it as the runner
sends it. A name counts as defined from the statement that defines it on (``CREATE LOGICAL
SOURCE name``, ``CREATE SINK name``), so a query that names a source before the file creates it
(expecting ``UNKNOWN_SOURCE``) still names one that does not exist. Statements are cut into the
lexical tokens of the planner's grammar (``streamctl/planner/grammar.lark``: identifiers,
back-quoted identifiers, strings, numbers, comments; ``tests/test_systest_names.py`` checks the
patterns against the grammar's terminals), and only identifier tokens that name a defined
source or sink change, matched as NebulaStream matches names (case-insensitively):

* a name where the grammar takes a source or sink name: after ``SOURCE`` (``CREATE``/``DROP
  LOGICAL SOURCE``), ``FOR`` (``PHYSICAL SOURCE FOR``, ``PHYSICAL SOURCES FOR``), ``SINK``
  (``CREATE``/``DROP SINK``), ``FROM``, ``JOIN`` and ``INTO`` (not an inline ``File(...)``);
* a qualifier: the first name of a chain ``stream.id``, ``stream.*``;
* the qualifier of a NebulaStream field name, the part before the first ``$``: ``stream$id``,
  ```S$SPEED```.

A token right after ``AS`` never changes: that is an alias or an option key (``'x' AS
`SINK`.FILE_PATH``). String literals, numbers, comments, column names and every other
identifier stay byte for byte, so a query's columns and values are what the file wrote; sink
columns are matched to a query's output by their unqualified names, so qualified sink columns
(``stream.id``, ```S$SPEED```) match either way.

Guarantees
----------
* Renaming is consistent within a run (one name, one new name) and injective across runs: two
  runs' tags differ (64 random bits), so two runs never define the same name.
* :meth:`Namespace.owns` tells whether a catalog name (as the coordinator answers it) or a
  statement text belongs to this run, for dropping what a run created even when its own record
  is incomplete (a request that timed out after the coordinator carried it out).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass, field
from typing import Final

SEPARATOR: Final = "__"
"""Between a name as written and the run's tag."""

# The grammar's terminals (grammar.lark), in the order its lexer tries them where they overlap.
LINE_COMMENT: Final = r"(?:--|#)[^\n]*"
BLOCK_COMMENT: Final = r"\/\*[\s\S]*?\*\/"
QUOTED_IDENTIFIER: Final = r"`(?:[^`]|``)*`"
SINGLE_QUOTED: Final = r"'(?:[^'\\]|\\[\s\S])*'"
DOUBLE_QUOTED: Final = r'"(?:[^"\\]|\\[\s\S])*"'
FLOAT: Final = r"(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+"
INTEGER: Final = r"\d+"
WORD: Final = r"[A-Za-z_][A-Za-z0-9_$]*"
"""IDENTIFIER without its reserved-word look-ahead: keywords are words here too."""

_TOKEN = re.compile(
    "|".join(
        f"(?P<{kind}>{pattern})"
        for kind, pattern in (
            ("space", r"\s+"),
            ("comment", f"{LINE_COMMENT}|{BLOCK_COMMENT}"),
            ("quoted", QUOTED_IDENTIFIER),
            ("string", f"{SINGLE_QUOTED}|{DOUBLE_QUOTED}"),
            ("number", f"{FLOAT}|{INTEGER}"),
            ("word", WORD),
            ("other", r"[\s\S]"),
        )
    )
)

_NAME_AFTER: Final = frozenset({"SOURCE", "FOR", "SINK", "FROM", "JOIN", "INTO"})
"""Keywords the grammar follows with a source or sink name."""
_INLINE_AFTER: Final = frozenset({"FROM", "JOIN", "INTO"})
"""... where ``name(`` is an inline source or sink instead (``FROM File(...)``)."""


@dataclass(frozen=True)
class _Token:
    kind: str
    text: str

    @property
    def keyword(self) -> str:
        """The word upper-cased if this is an unquoted word (a keyword candidate), else ``""``."""
        return self.text.upper() if self.kind == "word" else ""

    @property
    def name(self) -> str | None:
        """The identifier as NebulaStream reads it (unquoted: upper-cased), else None."""
        if self.kind == "word":
            return self.text.upper()
        if self.kind == "quoted":
            return self.text[1:-1].replace("``", "`")
        return None


def tokens(text: str) -> list[_Token]:
    """``text`` cut into tokens; joined, they are ``text`` again."""
    return [_Token(str(found.lastgroup), found.group()) for found in _TOKEN.finditer(text)]


def _fold(name: str) -> str:
    return name.casefold()


@dataclass
class Namespace:
    """The names one file run defines and their per-run replacements."""

    tag: str = field(default_factory=lambda: secrets.token_hex(8))
    defined: set[str] = field(default_factory=set)
    """The names the run's statements defined so far, folded."""

    def rewrite(self, statement: str) -> str:
        """The statement with the run's names (module docstring); defines the names it
        creates first."""
        parts = tokens(statement)
        significant = [i for i, token in enumerate(parts) if token.kind not in ("space", "comment")]
        self._define(parts, significant)
        if not self.defined:
            return statement
        out = [token.text for token in parts]
        for position, index in enumerate(significant):
            token = parts[index]
            if token.name is None:
                continue
            before = parts[significant[position - 1]] if position > 0 else None
            after = parts[significant[position + 1]] if position + 1 < len(significant) else None
            out[index] = self._renamed(token, before, after)
        return "".join(out)

    def owns(self, text: str) -> bool:
        """Whether a catalog name or a statement text holds one of this run's names."""
        return f"{SEPARATOR}{self.tag}".casefold() in text.casefold()

    def plain(self, text: str) -> str:
        """``text`` (an error message, a difference) with the names as the file wrote them,
        so that reports of two runs compare equal."""
        return re.sub(re.escape(f"{SEPARATOR}{self.tag}"), "", text, flags=re.IGNORECASE)

    def _define(self, parts: list[_Token], significant: list[int]) -> None:
        words = [parts[i] for i in significant]
        for position, token in enumerate(words):
            if token.name is None or position < 2:
                continue
            first, second = words[position - 2].keyword, words[position - 1].keyword
            creates = (second == "SOURCE" and first == "LOGICAL") or (
                second == "SINK" and first == "CREATE"
            )
            if creates:
                self.defined.add(_fold(token.name))

    def _renamed(self, token: _Token, before: _Token | None, after: _Token | None) -> str:
        assert token.name is not None
        previous = before.keyword if before is not None else ""
        if previous == "AS" or (before is not None and before.text == "."):
            return token.text  # an alias, an option key, or not the first name of a chain
        next_text = after.text if after is not None else ""
        named = previous in _NAME_AFTER and not (previous in _INLINE_AFTER and next_text == "(")
        # As written (a quoted name unescaped), so the new name keeps the file's spelling.
        written = token.text if token.kind == "word" else token.name
        if (named or next_text == ".") and _fold(token.name) in self.defined:
            return _spelled(token, f"{written}{SEPARATOR}{self.tag}")
        qualifier, dollar, field_name = written.partition("$")
        if dollar and _fold(qualifier) in self.defined:
            return _spelled(token, f"{qualifier}{SEPARATOR}{self.tag}${field_name}")
        return token.text


def _spelled(token: _Token, name: str) -> str:
    """``name`` as a token of ``token``'s kind (back-quoted again if it was)."""
    if token.kind == "quoted":
        return "`" + name.replace("`", "``") + "`"
    return name
