"""The systest runner finishes, whatever its files hold (issue 16, item 9; measurement 5).

A file with a directive the reader does not know (NebulaStream's ``GlobalConfiguration ...``
lines, or any other line that is no statement), a file that cannot be read or is not UTF-8,
or a malformed file (an expectation without a query) makes that file's queries
``unsupported`` with the reason; the run goes on with the other files and ends with its
summary line. On f29f918 each of these aborted the whole run with a traceback before any file
ran (the tests below fail there on that exception).

The property tests feed arbitrary text and bytes to the reader: it never raises, and it
yields queries, or a file marked unsupported with a reason.
"""

from __future__ import annotations

import asyncio
import io
import os
from pathlib import Path
from typing import Any

import pytest
from conformance import require_suite
from conftest import DevServer, coordinator_worker
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from streamctl.systest.progress import run_systest_command
from streamctl.systest.runner import SystestRunner, find_files, query_count, select
from streamctl.systest.suite_files import Query, Statement, read_systest
from streamctl.worker.coordinator_worker import ensure_coordinator
from streamctl.workflows.wire import connect

GOOD = """# name: good.test
# groups: [Good]
CREATE LOGICAL SOURCE s(a INT32 NOT NULL);
CREATE SINK o(a INT32 NOT NULL) TYPE File;

SELECT missing FROM s INTO o;
----
ERROR 2003
"""
"""A file that runs without Spark: its one query is refused as NebulaStream expects."""

GLOBAL_CONFIGURATION = """# name: config.test
GlobalConfiguration worker.query_engine.number_of_worker_threads: 4
CREATE LOGICAL SOURCE s(a INT32 NOT NULL);
CREATE SINK o(a INT32 NOT NULL) TYPE File;

SELECT a FROM s INTO o;
----
1

SELECT a + 1 AS a FROM s INTO o;
----
2
"""

ORPHAN_EXPECTATION = """CREATE LOGICAL SOURCE s(a INT32 NOT NULL);
----
1
"""


# --- the reader --------------------------------------------------------------------------


@pytest.mark.quick
def test_an_unknown_directive_makes_the_file_unsupported_naming_the_line(tmp_path: Path) -> None:
    path = tmp_path / "config.test"
    path.write_text(GLOBAL_CONFIGURATION)
    systest = read_systest(path, tmp_path)
    assert systest.unsupported is not None
    assert "line 2: unknown directive 'GlobalConfiguration" in systest.unsupported
    assert [q.line for q in systest.queries] == [6, 10]  # its queries are still found
    assert [type(b) for b in systest.blocks] == [Statement, Statement, Query, Query]


@pytest.mark.quick
@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"\xff\xfeSELECT a FROM s INTO o;\n", "not UTF-8 text (byte 0"),
        (ORPHAN_EXPECTATION.encode(), "line 2: ---- without a preceding query"),
        (b"ATTACH INLINE\n1\n", "line 1: ATTACH INLINE without a preceding statement"),
        (b"CREATE LOGICAL SOURCE s(a INT32);\nATTACH FILE\n", "ATTACH FILE without a file name"),
        (b"SELECT a FROM s INTO o;\n----\n1\n\n====\n", "==== without a query after it"),
    ],
)
def test_a_malformed_file_is_unsupported_with_the_reason(
    tmp_path: Path, content: bytes, reason: str
) -> None:
    path = tmp_path / "bad.test"
    path.write_bytes(content)
    systest = read_systest(path, tmp_path)
    assert systest.unsupported is not None and reason in systest.unsupported, systest


@pytest.mark.quick
def test_an_unreadable_file_is_unsupported_with_the_reason(tmp_path: Path) -> None:
    folder = tmp_path / "folder.test"  # a directory where a file is expected
    folder.mkdir()
    systest = read_systest(folder, tmp_path)
    assert systest.unsupported is not None and "cannot read the file" in systest.unsupported
    assert systest.blocks == []


@pytest.mark.quick
def test_the_suite_reads_with_nothing_unsupported() -> None:
    suite = require_suite()
    selected = select(find_files([suite]))
    assert [s.name for s, _ in selected if s.unsupported] == []
    assert query_count(selected) == 289


LINES = st.one_of(
    st.sampled_from(
        [
            "",
            "----",
            "====",
            "ATTACH INLINE",
            "ATTACH FILE small/a.csv",
            "ATTACH FILE",
            "ERROR 2003",
            "ERROR " + "9" * 40,
            "# groups: [A, B]",
            "# a comment",
            "CREATE LOGICAL SOURCE s(a INT32);",
            "CREATE SINK o(a INT32) TYPE File",
            "SELECT a",
            "FROM s INTO o;",
            "(SELECT a FROM s) UNION (SELECT a FROM s) INTO o;",
            "GlobalConfiguration x: 1",
            "1,2,3",
            "   ",
        ]
    ),
    st.text(max_size=40),
)


def _assert_read(systest: Any) -> None:
    assert systest.unsupported is None or systest.unsupported.strip()
    for index, query in enumerate(systest.queries, start=1):
        assert query.index == index and query.line >= 1
    for block in systest.blocks:
        assert isinstance(block, Statement | Query)


@pytest.mark.quick
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(lines=st.lists(LINES, max_size=30), newline=st.sampled_from(["\n", "\r\n"]))
def test_arbitrary_text_never_crashes_the_reader(
    tmp_path: Path, lines: list[str], newline: str
) -> None:
    """Property: any text is read into blocks, or marked unsupported with a reason."""
    path = tmp_path / "fuzz.test"
    path.write_text(newline.join(lines), encoding="utf-8", errors="surrogatepass")
    _assert_read(read_systest(path, tmp_path))


@pytest.mark.quick
@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=st.binary(max_size=400))
def test_arbitrary_bytes_never_crash_the_reader(tmp_path: Path, content: bytes) -> None:
    """Property: any bytes in a ``.test`` file are read, or the file is unsupported."""
    path = tmp_path / "fuzz.test"
    path.write_bytes(content)
    _assert_read(read_systest(path, tmp_path))


# --- the run always finishes ---------------------------------------------------------------


class _NoCoordinator:
    """A client whose every request fails, as one with no coordinator behind it would."""

    async def ask_response(self, request: Any) -> Any:
        raise ConnectionError(f"nobody answers {type(request).__name__}")

    ask = ask_response


@pytest.mark.quick
async def test_a_file_whose_requests_fail_costs_its_queries_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    """Requests that raise (no coordinator) fail the file's queries with the reason; the
    unsupported file still counts; the run returns its summary."""
    (tmp_path / "a_good.test").write_text(GOOD)
    (tmp_path / "b_config.test").write_text(GLOBAL_CONFIGURATION)
    selected = select(find_files([tmp_path]))
    reported: list[Any] = []
    runner = SystestRunner(_NoCoordinator(), tmp_path / "work", 2, reported.append)  # type: ignore[arg-type]
    summary = await runner.run(selected)
    assert summary.line() == "0 passed, 1 failed, 2 unsupported"
    assert len(reported) == 3 == query_count(selected)
    failed = next(o for o in summary.outcomes if o.status == "failed")
    assert "nobody answers" in failed.detail
    assert all("GlobalConfiguration" in o.detail for o in summary.outcomes[1:])


@pytest.fixture
async def coordinator(temporal: DevServer, sqlite_url: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("STREAMCTL_PAYLOAD_KEY", raising=False)
    client = await connect(temporal.address, payload_keys=())
    suffix = os.urandom(5).hex()
    task_queue, workflow_id = f"coordinator-{suffix}", f"coordinator-systest-{suffix}"
    async with coordinator_worker(client, sqlite_url, task_queue):
        handle = await ensure_coordinator(client, workflow_id=workflow_id, task_queue=task_queue)
        yield workflow_id
        await handle.terminate("test over")


async def test_streamctl_systest_ends_with_its_summary_over_files_it_cannot_run(
    temporal: DevServer, coordinator: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``streamctl systest`` over a folder with a good file, a GlobalConfiguration file, an
    undecodable file and an expectation without a query: the good query passes, the others
    are unsupported with their reasons, and the output ends with the summary line (on
    f29f918: a traceback and no summary)."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "a_good.test").write_text(GOOD)
    (suite / "b_config.test").write_text(GLOBAL_CONFIGURATION)
    (suite / "c_binary.test").write_bytes(b"\x00\x9f\x92\x96 not text")
    (suite / "d_orphan.test").write_text(ORPHAN_EXPECTATION)
    output = io.StringIO()
    console = Console(file=output, width=200)
    code = await asyncio.to_thread(
        run_systest_command,
        temporal.address, coordinator, [suite], 1, set(), False, tmp_path / "state", console,
    )  # fmt: skip
    printed = output.getvalue()
    assert printed.rstrip().splitlines()[-1] == "1 passed, 0 failed, 4 unsupported", printed
    assert code == 0
    assert "unknown directive 'GlobalConfiguration" in printed
    assert "not UTF-8 text" in printed and "---- without a preceding query" in printed
    assert "Traceback" not in printed + capsys.readouterr().err
