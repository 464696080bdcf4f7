"""A reader of NebulaStream system-test files (``.test``; ``SYSTEST-DSL.md`` of the suite).

It splits a file into blocks in file order:

* ``Statement`` -- a DDL statement (``CREATE ...``); a physical source may carry ``ATTACH
  INLINE`` rows (until a blank line) or an ``ATTACH FILE path`` (relative to the suite's
  ``testdata/``);
* ``Query`` -- a query with its expectation: rows after ``----`` (until a blank line), an
  ``ERROR n`` after ``----``, or a differential query after ``====``.

Statements end at a line ending in ``;``, at ``----``/``====``/``ATTACH``, or at a blank line;
a query's blank lines only end it when a new statement (or nothing) follows, because queries
in the suite spread their select lists over paragraphs. Lines starting with ``#`` are comments,
except the header's ``# groups: [A, B]``, which names the file's groups.

The reader only cuts the file into statement texts; the coordinator parses them.

Guarantees
----------
:func:`read_systest` never raises, whatever the file holds. A file it cannot run is marked
``unsupported`` with the reason, and its queries (those it could still find) are reported so
by the runner: a file that cannot be read or is not UTF-8 text, a line that starts a block but
is no statement and no directive the reader knows (NebulaStream's ``GlobalConfiguration ...``
lines, or anything else), an ``ATTACH`` without a statement, an expectation without a query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_STATEMENT_START = re.compile(r"^[\s(]*(CREATE|SELECT|SHOW|DROP|EXPLAIN)\b", re.IGNORECASE)
_ERROR_LINE = re.compile(r"^\s*error\s+(\d{1,18})\s*$", re.IGNORECASE)
_GROUPS_LINE = re.compile(r"^\s*#\s*groups\s*:\s*\[(.*)\]\s*$", re.IGNORECASE)


@dataclass
class Statement:
    text: str
    line: int
    inline_rows: list[str] | None = None
    attached_file: str | None = None


@dataclass
class Query:
    text: str
    line: int
    index: int
    expected_rows: list[str] | None = None
    expected_error: int | None = None
    differential: str | None = None


@dataclass
class SystestFile:
    path: Path
    name: str
    """The path relative to the suite root it was found under (``guide/guide1.test``)."""
    groups: tuple[str, ...] = ()
    blocks: list[Statement | Query] = field(default_factory=list)
    unsupported: str | None = None
    """Why the file cannot be run as written (None: it can); its queries are unsupported."""

    @property
    def folder(self) -> str:
        return self.name.split("/")[0] if "/" in self.name else "."

    @property
    def queries(self) -> list[Query]:
        return [block for block in self.blocks if isinstance(block, Query)]


def _groups(lines: list[str]) -> tuple[str, ...]:
    for line in lines:
        found = _GROUPS_LINE.match(line)
        if found:
            return tuple(g.strip() for g in found.group(1).split(",") if g.strip())
    return ()


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith("#")


def _is_blank(line: str) -> bool:
    return not line.strip()


def _is_marker(line: str) -> bool:
    return line.strip() in ("----", "====") or line.lstrip().upper().startswith("ATTACH ")


def _is_select(text: str) -> bool:
    return re.match(r"^[\s(]*(SELECT|EXPLAIN)\b", text, re.IGNORECASE) is not None


MAX_REASONS = 3
"""Problems named in a file's ``unsupported`` reason (the rest are counted)."""


def read_systest(path: Path, root: Path | None = None) -> SystestFile:
    """Read ``path``; its name is relative to ``root`` (default: the file's folder's parent).
    Never raises: a file that cannot be run comes back ``unsupported`` with the reason."""
    name = _name(path, root)
    try:
        data = path.read_bytes()
    except OSError as error:
        return SystestFile(path, name, unsupported=f"cannot read the file: {error}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        return SystestFile(
            path, name, unsupported=f"not UTF-8 text (byte {error.start}: {error.reason})"
        )
    return parse_systest(text, path, name)


def _name(path: Path, root: Path | None) -> str:
    base = root if root is not None else path.parent.parent
    try:
        return str(path.resolve().relative_to(base.resolve()))
    except (ValueError, OSError, RuntimeError):  # elsewhere, or a symlink loop
        return path.name


def parse_systest(text: str, path: Path, name: str) -> SystestFile:
    """The blocks of a ``.test`` file's text (see the module docstring); never raises."""
    try:
        return _parse(text, path, name)
    except Exception as error:  # a reader bug must cost this file, never the run
        return SystestFile(
            path, name, unsupported=f"the reader failed on it: {type(error).__name__}: {error}"
        )


def _parse(text: str, path: Path, name: str) -> SystestFile:
    lines = text.splitlines()
    result = SystestFile(path, name, _groups(lines))
    problems: list[str] = []
    position = 0
    query_index = 0

    def next_meaningful(start: int) -> int:
        while start < len(lines) and (_is_blank(lines[start]) or _is_comment(lines[start])):
            start += 1
        return start

    def read_statement(start: int) -> tuple[str, int]:
        collected: list[str] = []
        index = start
        while index < len(lines):
            line = lines[index]
            if _is_comment(line):
                index += 1
                continue
            if _is_marker(line):
                break
            if _is_blank(line):
                following = next_meaningful(index)
                ends = (
                    following >= len(lines)
                    or _STATEMENT_START.match(lines[following]) is not None
                    or _is_marker(lines[following])
                    or not _is_select("\n".join(collected))
                )
                if ends:
                    break
                index += 1
                continue
            collected.append(line)
            index += 1
            if line.rstrip().endswith(";"):
                break
        return "\n".join(collected), index

    def read_rows(start: int) -> tuple[list[str], int]:
        rows: list[str] = []
        index = start
        while index < len(lines) and not _is_blank(lines[index]):
            if not _is_comment(lines[index]):
                rows.append(lines[index])
            index += 1
        return rows, index

    def skip_unknown(start: int) -> int:
        """Past an unknown block: its lines up to a blank line, a statement or a marker."""
        index = start + 1
        while index < len(lines) and not (
            _is_blank(lines[index])
            or _STATEMENT_START.match(lines[index])
            or _is_marker(lines[index])
        ):
            index += 1
        return index

    while position < len(lines):
        line = lines[position]
        if _is_blank(line) or _is_comment(line):
            position += 1
            continue
        where = f"line {position + 1}"
        stripped = line.strip()
        upper = stripped.upper()
        if upper.startswith("ATTACH INLINE"):
            rows, position = read_rows(position + 1)
            statement = _last_statement(result)
            if statement is None:
                problems.append(f"{where}: ATTACH INLINE without a preceding statement")
            else:
                statement.inline_rows = rows
            continue
        if upper.startswith("ATTACH FILE"):
            attached = stripped.split(None, 2)
            statement = _last_statement(result)
            if statement is None:
                problems.append(f"{where}: ATTACH FILE without a preceding statement")
            elif len(attached) < 3:
                problems.append(f"{where}: ATTACH FILE without a file name")
            else:
                statement.attached_file = attached[2]
            position += 1
            continue
        if stripped == "----":
            rows, position = read_rows(position + 1)
            query = _last_query(result)
            error = _ERROR_LINE.match(rows[0]) if len(rows) == 1 else None
            if query is None:
                problems.append(f"{where}: ---- without a preceding query")
            elif error:
                query.expected_error = int(error.group(1))
            else:
                query.expected_rows = rows
            continue
        if stripped == "====":
            text, position = read_statement(position + 1)
            query = _last_query(result)
            if query is None:
                problems.append(f"{where}: ==== without a preceding query")
            elif not text.strip():
                problems.append(f"{where}: ==== without a query after it")
            else:
                query.differential = text
            continue
        if not _STATEMENT_START.match(line):
            problems.append(f"{where}: unknown directive {_excerpt(stripped)}")
            position = skip_unknown(position)
            continue
        text, end = read_statement(position)
        if _is_select(text):
            query_index += 1
            result.blocks.append(Query(text, position + 1, query_index))
        else:
            result.blocks.append(Statement(text, position + 1))
        position = max(end, position + 1)
    if problems:
        more = len(problems) - MAX_REASONS
        result.unsupported = "; ".join(problems[:MAX_REASONS]) + (
            f" (and {more} more)" if more > 0 else ""
        )
    return result


def _excerpt(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _last_statement(result: SystestFile) -> Statement | None:
    for block in reversed(result.blocks):
        if isinstance(block, Statement):
            return block
    return None


def _last_query(result: SystestFile) -> Query | None:
    if result.blocks and isinstance(result.blocks[-1], Query):
        return result.blocks[-1]
    return None
