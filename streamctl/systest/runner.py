"""``streamctl systest``: NebulaStream system-test files run through the coordinator on Spark.

Protocol
--------
The runner is a frontend: it reads ``.test`` files (:mod:`streamctl.systest.suite_files`) and
sends their statements as ``ExecuteStatement`` requests, as a user would type them. Only the
test file's own constructs are its business:

* ``ATTACH INLINE`` rows are written to a CSV file and ``ATTACH FILE`` names a file of the
  suite's ``testdata/``; either path is added to the ``CREATE PHYSICAL SOURCE`` statement as
  ``'<path>' AS `SOURCE`.FILE_PATH``. The coordinator confines every file path to its file
  roots, so the run's work directory (CSV files, sink directories) lies in the stack's files
  directory (``<state dir>/files``, ``STREAMCTL_FILES_DIR``) and ``testdata/`` must be a file
  root for ``ATTACH FILE`` as for inline sources.
* Paths the suite writes relative to its ``testdata/`` become absolute: an inline source's
  ``FILE_PATH`` (``FROM File('small/a.csv' AS `SOURCE`.FILE_PATH, ...)``) and a generator's
  ``WORDLIST small/words.csv``. The coordinator reads files only under its file roots, so a
  stack that runs the suite's files allows ``testdata/`` (``streamctl up
  --file-root``; ``streamctl systest`` starting its own stack does that itself).
* ``File`` and ``Checksum`` sinks without a path get one in the run's work directory, so the
  runner can read what each query wrote (``<path>/q<id>``). An inline sink (``INTO File()``)
  gets its path from the coordinator, and the runner asks for it (``GetSink``).
* A ``TCP`` physical source with ``ATTACH`` data gets a TCP server of the runner's own on
  loopback (``SOCKET_HOST``/``SOCKET_PORT``), which sends the data to every connection and
  closes it, as the suite's own data server does.
* Each query is created with ``SELECT ... INTO``; the runner waits until the coordinator
  reports it ``FINISHED`` (bounded input processed, every window emitted) or ``FAILED``. A
  query over a TCP source never finishes on Spark (its socket source does not end when the
  server closes), so the runner waits instead until its sink holds the expected number of
  rows (or, without a count, until the sink stops growing), then stops it. It reads the sink
  and compares the rows with the expectation as a multiset
  (:mod:`streamctl.systest.compare`), or compares the error number with ``ERROR n``, or
  runs the ``====`` differential query and compares both results. Then it drops the query.
* Each run of a file has its own namespace (:mod:`streamctl.systest.namespace`): the logical
  sources and sinks the file defines get a name unique to the run, in every statement that
  names them, and its staged data and sink directories lie in a work directory of its own
  (``<work root>/<file>-<tag>``). Outcomes name the objects as the file wrote them.
* At the end of a file -- also when it failed midway -- the runner drops the sinks and logical
  sources it created (``CASCADE``: their physical sources and queries with them), then every
  query, sink and logical source of the stack that carries the run's names (one whose request
  timed out after the coordinator carried it out), and removes its work directory. So files,
  and repeated or concurrent invocations against one stack, never see each other's objects.

Every query ends ``passed``, ``failed`` (with the difference or the error) or ``unsupported``
(with a reason: a planner ``NOT_SUPPORTED`` answer, a source the runner cannot provide, or a
file the reader cannot run as written: unreadable, not UTF-8, an unknown directive). Files run
one after the other; up to ``jobs`` queries of a file run at once.

Guarantees
----------
:meth:`SystestRunner.run` never raises for a file: whatever goes wrong in one (a request that
times out, an attachment it cannot stage, a bug) costs that file's remaining queries, reported
``failed`` or ``unsupported`` with the reason, and the run goes on to its summary. A file whose
reader found no query still counts once, so that nothing it holds is silently skipped.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from streamctl.client.client import CoordinatorClient
from streamctl.error_codes import NES_ERROR_NUMBERS, NOT_SUPPORTED
from streamctl.protocol import messages as m
from streamctl.protocol.agent_contract import query_name
from streamctl.sink_files import (
    AnsweredSink,
    SinkFileError,
    read_checksum,
    read_file_sink_lines,
    split_sink_line,
)
from streamctl.systest.compare import Row, compare_rows, split_expected_row
from streamctl.systest.namespace import Namespace
from streamctl.systest.suite_files import Query, Statement, SystestFile, read_systest

log = logging.getLogger(__name__)

QUERY_TIMEOUT_S = 180.0
POLL_S = 0.2
RUNTIME_ERRORS_FROM = 3000
"""NebulaStream error numbers from here on are raised while a query runs, not when it binds."""

_PHYSICAL_SOURCE = re.compile(r"^\s*CREATE\s+PHYSICAL\s+SOURCE\b", re.IGNORECASE)
_SINK = re.compile(r"^\s*CREATE\s+SINK\b", re.IGNORECASE)
_SET_CLAUSE = re.compile(r"\bSET\s*\(", re.IGNORECASE)
_FILE_PATH = re.compile(r"FILE_PATH", re.IGNORECASE)
_TYPE = re.compile(r"\bTYPE\s+([A-Za-z_]+)", re.IGNORECASE)
UNBOUNDED_QUIET_S = 3.0
"""A query over an unbounded source with no row count to wait for is done when its sink has
not grown for this long."""
_READABLE_SINKS = ("FILE", "CHECKSUM")
_INLINE_FILE_PATH = re.compile(
    r"'(?P<path>[^']*)'(?P<key>\s+AS\s+`?SOURCE`?\s*\.\s*`?FILE_PATH`?)", re.IGNORECASE
)
_WORDLIST = re.compile(r"(?P<key>\bWORDLIST\s+)(?P<path>[^\s,']+)", re.IGNORECASE)


@dataclass
class Outcome:
    file: str
    line: int
    index: int
    status: str  # passed | failed | unsupported
    detail: str = ""
    seconds: float = 0.0

    @property
    def folder(self) -> str:
        return self.file.rsplit("/", 1)[0] if "/" in self.file else "."


@dataclass
class Summary:
    outcomes: list[Outcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for outcome in self.outcomes if outcome.status == status)

    def by_folder(self) -> dict[str, Counter[str]]:
        folders: dict[str, Counter[str]] = {}
        for outcome in self.outcomes:
            folders.setdefault(outcome.folder, Counter())[outcome.status] += 1
        return dict(sorted(folders.items()))

    def line(self) -> str:
        return (
            f"{self.count('passed')} passed, {self.count('failed')} failed, "
            f"{self.count('unsupported')} unsupported"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "passed": self.count("passed"),
            "failed": self.count("failed"),
            "unsupported": self.count("unsupported"),
            "folders": {
                folder: {status: counts[status] for status in ("passed", "failed", "unsupported")}
                for folder, counts in self.by_folder().items()
            },
            "queries": [asdict(outcome) for outcome in self.outcomes],
        }


def find_files(paths: list[Path]) -> list[tuple[Path, Path]]:
    """Every ``.test`` file under ``paths``, each with its suite root (the nearest folder up
    that holds ``testdata/``, else the given path's parent)."""
    found: list[tuple[Path, Path]] = []
    for given in paths:
        given = given.resolve()
        files = sorted(given.rglob("*.test")) if given.is_dir() else [given]
        root = _suite_root(given)
        found.extend((file, root) for file in files)
    return found


def select(
    files: list[tuple[Path, Path]], groups: set[str] | None = None
) -> list[tuple[SystestFile, Path]]:
    """The files to run, read, with their suite roots: those in one of ``groups`` if given."""
    wanted = {group.casefold() for group in groups or set()}
    selected = []
    for path, root in files:
        systest = read_systest(path, root)
        if not wanted or wanted & {group.casefold() for group in systest.groups}:
            selected.append((systest, root))
    return selected


def query_count(selected: list[tuple[SystestFile, Path]]) -> int:
    """How many outcomes the run of ``selected`` reports (see :func:`outcomes_without_running`
    for a file without queries)."""
    return sum(
        max(len(systest.queries), systest.unsupported is not None) for systest, _ in selected
    )


def outcomes_without_running(systest: SystestFile, status: str, reason: str) -> list[Outcome]:
    """``status`` with ``reason`` for every query of a file that will not run; one entry for
    the file itself (line 1, query 0) if the reader found none in it."""
    queries = systest.queries
    if not queries:
        return [Outcome(systest.name, 1, 0, status, reason)]
    return [Outcome(systest.name, query.line, query.index, status, reason) for query in queries]


def suite_testdata(paths: list[Path]) -> tuple[Path, ...]:
    """The ``testdata/`` folders of the suites ``paths`` lie in (for the file roots)."""
    folders = {root / "testdata" for _file, root in find_files(paths)}
    return tuple(sorted(folder for folder in folders if folder.is_dir()))


def _suite_root(path: Path) -> Path:
    for candidate in [path, *path.parents]:
        if (candidate / "testdata").is_dir():
            return candidate
    return path if path.is_dir() else path.parent


@dataclass
class _FileRun:
    """What one file's statements created, for reading results and cleaning up."""

    systest: SystestFile
    work_dir: Path
    testdata: Path
    namespace: Namespace
    sinks: dict[str, AnsweredSink] = field(default_factory=dict)
    logical_sources: list[str] = field(default_factory=list)
    unbounded_sources: set[str] = field(default_factory=set)  # logical sources, casefolded
    servers: list[asyncio.Server] = field(default_factory=list)
    setup_errors: list[str] = field(default_factory=list)
    unprovided: list[str] = field(default_factory=list)
    """Attachments the runner could not stage: the queries after them are unsupported."""


class SystestRunner:
    def __init__(
        self,
        client: CoordinatorClient,
        work_root: Path,
        jobs: int = 2,
        report: Callable[[Outcome], None] | None = None,
    ) -> None:
        self.client = client
        self.work_root = work_root
        self.jobs = max(1, jobs)
        self.report = report or (lambda _outcome: None)

    async def run(self, selected: list[tuple[SystestFile, Path]]) -> Summary:
        """Run the files :func:`select` chose, one after the other; never raises for a file
        (module docstring)."""
        summary = Summary()
        for systest, root in selected:
            if systest.unsupported is not None:
                outcomes = outcomes_without_running(systest, "unsupported", systest.unsupported)
                for outcome in outcomes:
                    self.report(outcome)
                summary.outcomes.extend(outcomes)
                continue
            reported: list[Outcome] = []
            try:
                await self.run_file(systest, root, reported)
            except Exception as error:
                log.warning("systest file %s failed", systest.name, exc_info=True)
                done = {outcome.index for outcome in reported}
                reason = f"the runner could not run this file: {type(error).__name__}: {error}"
                for query in systest.queries:
                    if query.index not in done:
                        outcome = Outcome(systest.name, query.line, query.index, "failed", reason)
                        self.report(outcome)
                        reported.append(outcome)
            summary.outcomes.extend(sorted(reported, key=lambda outcome: outcome.index))
        return summary

    async def run_file(
        self, systest: SystestFile, root: Path, reported: list[Outcome] | None = None
    ) -> list[Outcome]:
        """Run one file's blocks in order; each query's outcome is reported, appended to
        ``reported`` as it ends, and returned in file order."""
        ended = reported if reported is not None else []
        slug = re.sub(r"[^A-Za-z0-9_.-]", "_", systest.name)
        namespace = Namespace()
        work_dir = self.work_root / f"{slug}-{namespace.tag}"
        run = _FileRun(systest, work_dir, root / "testdata", namespace)
        run.work_dir.mkdir(parents=True, exist_ok=True)
        slots = asyncio.Semaphore(self.jobs)
        tasks: list[asyncio.Task[Outcome]] = []
        try:
            for block in systest.blocks:
                if isinstance(block, Statement):
                    await self._statement(run, block)
                elif run.unprovided:
                    reason = f"a source the runner cannot provide: {'; '.join(run.unprovided)}"
                    outcome = Outcome(systest.name, block.line, block.index, "unsupported", reason)
                    tasks.append(asyncio.create_task(self._reported(outcome, ended)))
                else:
                    tasks.append(asyncio.create_task(self._bounded(slots, run, block, ended)))
            return list(await asyncio.gather(*tasks))
        finally:
            for task in tasks:
                task.cancel()
            await self._clean_up(run)

    async def _reported(self, outcome: Outcome, ended: list[Outcome]) -> Outcome:
        self.report(outcome)
        ended.append(outcome)
        return outcome

    async def _bounded(
        self, slots: asyncio.Semaphore, run: _FileRun, query: Query, ended: list[Outcome]
    ) -> Outcome:
        async with slots:
            started = time.monotonic()
            try:
                outcome = await self._query(run, query)
            except Exception as error:  # one query's surprise must not end the run
                detail = f"the runner could not run it: {type(error).__name__}: {error}"
                outcome = Outcome(run.systest.name, query.line, query.index, "failed", detail)
            outcome.seconds = round(time.monotonic() - started, 2)
            outcome.detail = run.namespace.plain(outcome.detail)
            return await self._reported(outcome, ended)

    # --- statements -----------------------------------------------------------------------

    async def _statement(self, run: _FileRun, block: Statement) -> None:
        """Send one statement; a refusal or failure is a set-up error of the file (its
        queries say so), an attachment the runner cannot stage makes them unsupported."""
        try:
            await self._send_statement(run, block)
        except _Unprovided as unprovided:
            run.unprovided.append(f"line {block.line}: {unprovided}")
        except Exception as error:
            run.setup_errors.append(f"line {block.line}: {type(error).__name__}: {error}")

    async def _send_statement(self, run: _FileRun, block: Statement) -> None:
        text = in_testdata(run.namespace.rewrite(block.text), run.testdata)
        if _PHYSICAL_SOURCE.match(text):
            path = self._attachment(run, block)
            if path is not None and _statement_type(text) == "TCP":
                port = await _serve(run, path.read_bytes())
                text = with_option(text, "'127.0.0.1' AS `SOURCE`.SOCKET_HOST")
                text = with_option(text, f"{port} AS `SOURCE`.SOCKET_PORT")
            elif path is not None:
                text = with_option(text, f"'{path}' AS `SOURCE`.FILE_PATH")
        elif (
            _SINK.match(text)
            and _statement_type(text) in _READABLE_SINKS
            and not _FILE_PATH.search(text)
        ):
            sink_dir = run.work_dir / f"sink-line-{block.line}"
            text = with_option(text, f"'{sink_dir}' AS `SINK`.FILE_PATH")
        response = await self.client.ask_response(m.ExecuteStatement(text))
        if not response.ok:
            run.setup_errors.append(
                f"line {block.line}: {response.error_code}: {response.error_message}"
            )
            return
        for answer in response.result["statements"]:
            result = answer["result"]
            if answer["statement"] == "CREATE LOGICAL SOURCE":
                run.logical_sources.append(result["name"])
            elif answer["statement"] == "CREATE PHYSICAL SOURCE" and result["type"] == "TCP":
                run.unbounded_sources.add(str(result["logical_source"]).casefold())
            elif answer["statement"] == "CREATE SINK":
                run.sinks[result["name"].casefold()] = AnsweredSink.of(result)

    def _attachment(self, run: _FileRun, block: Statement) -> Path | None:
        """The file holding a physical source's ``ATTACH`` data; :class:`_Unprovided` when
        there is none the runner can read."""
        try:
            if block.inline_rows is not None:
                path = run.work_dir / f"source-line-{block.line}.csv"
                path.write_text("".join(row + "\n" for row in block.inline_rows))
                return path
            if block.attached_file is not None:
                path = (run.testdata / block.attached_file).resolve()
                if not path.is_file():
                    raise _Unprovided(f"ATTACH FILE {block.attached_file}: no such file")
                return path
        except (OSError, ValueError, RuntimeError) as error:  # unwritable, NUL, symlink loop
            raise _Unprovided(f"cannot stage its ATTACH data: {error}") from None
        return None

    async def _clean_up(self, run: _FileRun) -> None:
        """Drop what the file run created, then whatever else carries its names, and remove
        its work directory (module docstring); a failure here is logged and never ends the
        run."""
        for server in run.servers:
            server.close()
        drops: list[m.Request] = [
            m.DropSink(sink.name, cascade=True) for sink in run.sinks.values()
        ]
        drops += [m.DropLogicalSource(name, cascade=True) for name in run.logical_sources]
        for drop in drops:
            await self._drop(run, drop)
        for drop in await self._left_behind(run):
            await self._drop(run, drop)
        shutil.rmtree(run.work_dir, ignore_errors=True)

    async def _drop(self, run: _FileRun, drop: m.Request) -> None:
        try:
            await self.client.ask_response(drop)
        except Exception as error:
            log.warning("cleaning up after %s: %s failed: %s", run.systest.name, drop, error)

    async def _left_behind(self, run: _FileRun) -> list[m.Request]:
        """Drops for the queries, sinks and logical sources of the stack that carry the run's
        names but were not dropped yet."""
        owns = run.namespace.owns
        try:
            queries = await self.client.list_all(m.ListQueries())
            sinks = await self.client.list_all(m.ListSinks())
            sources = await self.client.list_all(m.ListLogicalSources())
        except Exception as error:
            log.warning("cleaning up after %s: cannot list: %s", run.systest.name, error)
            return []
        return [
            *(m.DropQuery(q["id"]) for q in queries if owns(q["statement"]) or owns(q["sink"])),
            *(m.DropSink(sink["name"], cascade=True) for sink in sinks if owns(sink["name"])),
            *(m.DropLogicalSource(s["name"], cascade=True) for s in sources if owns(s["name"])),
        ]

    # --- queries --------------------------------------------------------------------------

    async def _query(self, run: _FileRun, query: Query) -> Outcome:
        def outcome(status: str, detail: str = "") -> Outcome:
            return Outcome(run.systest.name, query.line, query.index, status, detail)

        expected_rows = None if query.expected_rows is None else len(query.expected_rows)
        try:
            result = await self._execute(run, query.text, expected_rows)
        except _Refused as refused:
            return self._refused(outcome, query, refused, run)
        except _Unreadable as reason:
            return outcome("unsupported", str(reason))
        except _Failed as failure:
            if query.expected_error is not None and query.expected_error >= RUNTIME_ERRORS_FROM:
                return outcome("passed")
            return outcome("failed", str(failure))
        if query.expected_error is not None:
            return outcome("failed", f"expected error {query.expected_error}, got rows")
        rows, types = result
        if query.differential is not None:
            try:
                other, _ = await self._execute(run, query.differential)
            except (_Refused, _Failed, _Unreadable) as error:
                return outcome("failed", f"the differential query failed: {error}")
            expected = other
        else:
            expected = [split_expected_row(row, len(types)) for row in query.expected_rows or []]
        difference = compare_rows(expected, rows, types)
        return outcome("failed", difference) if difference else outcome("passed")

    def _refused(
        self, outcome: Callable[..., Outcome], query: Query, refused: _Refused, run: _FileRun
    ) -> Outcome:
        if refused.code == NOT_SUPPORTED:
            return outcome("unsupported", refused.message)
        number = NES_ERROR_NUMBERS.get(refused.code)
        if query.expected_error is not None:
            if number == query.expected_error:
                return outcome("passed")
            return outcome(
                "failed",
                f"expected error {query.expected_error}, got {number} "
                f"({refused.code}: {refused.message})",
            )
        detail = f"{refused.code}: {refused.message}"
        if run.setup_errors:
            detail += f" (after set-up errors: {'; '.join(run.setup_errors)})"
        return outcome("failed", detail)

    async def _execute(
        self, run: _FileRun, text: str, expected_rows: int | None = None
    ) -> tuple[list[Row], list[str]]:
        """Create the query, wait for its end, read its rows, drop it."""
        statement = m.ExecuteStatement(in_testdata(run.namespace.rewrite(text), run.testdata))
        response = await self.client.ask_response(statement)
        if not response.ok:
            raise _Refused(str(response.error_code), str(response.error_message))
        answer = response.result["statements"][-1]
        if answer["statement"] != "SELECT":
            raise _Unreadable(f"{answer['statement']} is not a query with rows to compare")
        created = answer["result"]
        query_id = created["id"]
        try:
            sink = run.sinks.get(str(created["sink"]).casefold()) or await self._sink(
                created["sink"]
            )
            if sink is None or sink.type not in _READABLE_SINKS:
                kind = "an unknown" if sink is None else f"a {sink.type}"
                raise _Unreadable(f"the query writes into {kind} sink, which cannot be read back")
            sources = (await self.client.ask(m.GetQuery(query_id)))["sources"]
            if run.unbounded_sources & {str(name).casefold() for name in sources}:
                return await self._rows_so_far(sink, query_id, expected_rows)
            state = await self._wait(query_id)
            if state["current_state"] == "FAILED":
                raise _Failed(f"the query failed: {_first_line(state['error'])}")
            if state["current_state"] != "FINISHED":
                raise _Failed(
                    f"the query did not finish within {QUERY_TIMEOUT_S:.0f} s "
                    f"(state {state['current_state']}: {state['error'] or 'no error'})"
                )
            return _read_sink(sink, query_id)
        finally:
            await self.client.ask_response(m.DropQuery(query_id))

    async def _sink(self, name: str) -> AnsweredSink | None:
        """A sink the file did not create (one defined inline in the query)."""
        response = await self.client.ask_response(m.GetSink(name))
        if not response.ok:
            return None
        found = response.result
        return AnsweredSink.of(found)

    async def _rows_so_far(
        self, sink: AnsweredSink, query_id: int, expected_rows: int | None
    ) -> tuple[list[Row], list[str]]:
        """The rows of a query over an unbounded source, once it wrote ``expected_rows`` (or,
        without a count, once its sink stopped growing)."""
        deadline = time.monotonic() + QUERY_TIMEOUT_S
        seen, grew_at = -1, time.monotonic()
        while True:
            state: dict[str, Any] = await self.client.ask(m.GetQuery(query_id))
            if state["current_state"] == "FAILED":
                raise _Failed(f"the query failed: {_first_line(state['error'])}")
            rows, types = _read_sink(sink, query_id)
            if len(rows) != seen:
                seen, grew_at = len(rows), time.monotonic()
            if expected_rows is not None and len(rows) >= expected_rows:
                return rows, types
            if expected_rows is None and rows and time.monotonic() - grew_at > UNBOUNDED_QUIET_S:
                return rows, types
            if time.monotonic() > deadline:
                wanted = "rows" if expected_rows is None else f"of {expected_rows} rows"
                raise _Failed(
                    f"the query over an unbounded source wrote {len(rows)} {wanted} within "
                    f"{QUERY_TIMEOUT_S:.0f} s (state {state['current_state']})"
                )
            await asyncio.sleep(POLL_S)

    async def _wait(self, query_id: int) -> dict[str, Any]:
        deadline = time.monotonic() + QUERY_TIMEOUT_S
        while True:
            state: dict[str, Any] = await self.client.ask(m.GetQuery(query_id))
            if state["current_state"] in ("FINISHED", "FAILED", "STOPPED"):
                return state
            if time.monotonic() > deadline:
                return state
            await asyncio.sleep(POLL_S)


class _Refused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class _Failed(Exception):
    pass


class _Unreadable(Exception):
    pass


class _Unprovided(Exception):
    """An ``ATTACH`` the runner cannot stage."""


def _first_line(error: str | None) -> str:
    lines = (error or "no error given").strip().splitlines()
    return lines[0][:500] if lines else "no error given"


def _statement_type(text: str) -> str:
    found = _TYPE.search(text)
    return found.group(1).upper() if found else ""


async def _serve(run: _FileRun, data: bytes) -> int:
    """Start a loopback TCP server that sends ``data`` to every connection, then closes it;
    answer its port."""

    async def send(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(data)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(send, "127.0.0.1", 0)
    run.servers.append(server)
    port: int = server.sockets[0].getsockname()[1]
    return port


def in_testdata(statement: str, testdata: Path) -> str:
    """The statement with its testdata-relative inline source paths and word lists made
    absolute (absolute paths stay as they are)."""

    def absolute(found: re.Match[str]) -> str:
        path = found.group("path")
        if Path(path).is_absolute():
            return found.group(0)
        resolved = str((testdata / path).resolve())
        if found.re is _WORDLIST:
            return f"{found.group('key')}{resolved}"
        return f"'{resolved}'{found.group('key')}"

    return _WORDLIST.sub(absolute, _INLINE_FILE_PATH.sub(absolute, statement))


def with_option(statement: str, option: str) -> str:
    """The statement with one more ``value AS key`` option in its ``SET(...)`` clause."""
    text = statement.rstrip().rstrip(";").rstrip()
    found = _SET_CLAUSE.search(text)
    if found is None:
        return f"{text} SET({option})"
    return f"{text[: found.end()]}{option}, {text[found.end() :]}"


def _read_sink(sink: AnsweredSink, query_id: int) -> tuple[list[Row], list[str]]:
    types = [str(column["type"]) for column in sink.schema]
    config = sink.config  # canonical: as the coordinator stored (and answers) it
    name = query_name(query_id)
    if sink.type == "CHECKSUM":
        checksum = read_checksum(Path(config["file_path"]) / name)
        return [[str(checksum.tuples), str(checksum.checksum)]], ["UINT64", "UINT64"]
    lines = read_file_sink_lines(sink, name)
    delimiter = str(config.get("field_delimiter") or ",")
    quoted = bool(config.get("quote_strings"))
    rows = [_sink_row(line, types, delimiter, quoted) for line in lines]
    return rows, types


def _sink_row(line: str, types: list[str], delimiter: str, quoted: bool) -> Row:
    """A line the sink wrote as a row of texts (``None`` for NULL); a line that does not
    split into the sink's columns stays one field, so the comparison shows it whole."""
    try:
        parts = split_sink_line(line, types, delimiter, quoted)
    except SinkFileError:
        return [line]
    if len(parts) != len(types):
        return [line]
    return [None if part == "NULL" else part for part in parts]
