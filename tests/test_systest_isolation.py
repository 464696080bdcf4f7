"""``streamctl systest`` runs against one stack never see each other's objects (issue 18.4).

Through a real coordinator (no agent, no Spark: the queries here are refused when they bind,
or never finish):

* two runs of one file and a run of another file that uses the same names with other columns,
  all at the same time, each created every object it defined, saw its own columns, and leave
  the catalog and their work directories empty; a run in a row after them does the same;
* a file that fails midway (a query that does not finish), a run cancelled midway and a run
  whose request was carried out but whose answer got lost leave nothing behind;
* ``--address``/``--state-dir``: the runner stages in the files directory ``stack.json``
  records and holds that stack's payload key; a state dir whose stack runs at another address
  is refused.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator
from dataclasses import asdict
from pathlib import Path
from typing import Any, cast

import pytest
from rich.console import Console

from streamctl import config
from streamctl.client.client import CoordinatorClient
from streamctl.exit_codes import EXIT_USAGE
from streamctl.protocol import messages as m
from streamctl.systest import progress as systest_cli
from streamctl.systest import runner as systest
from streamctl.systest.progress import OtherStack, run_systest_command, stack_files
from streamctl.systest.runner import Outcome, SystestRunner, find_files, select
from streamctl.worker.supervisor import STACK_FILE, StackInfo

SAME = """# name: iso/same.test
CREATE LOGICAL SOURCE stream(id UINT64 NOT NULL, a UINT64 NOT NULL);
CREATE PHYSICAL SOURCE FOR stream TYPE File;
ATTACH INLINE
1,2

CREATE SINK sink(stream.id UINT64 NOT NULL) TYPE File;

SELECT b AS id FROM stream INTO sink;
----
ERROR 2003

SELECT stream.a FROM stream INTO sink;
----
ERROR 2003
"""
"""Its queries are refused as expected only over its own ``stream`` (no column ``b``) into its
own ``sink`` (column ``id``, not ``a``)."""

OTHER = """# name: iso/other.test
CREATE LOGICAL SOURCE stream(b UINT64 NOT NULL, id UINT64 NOT NULL);
CREATE SINK sink(b UINT64 NOT NULL) TYPE File;

SELECT a AS b FROM stream INTO sink;
----
ERROR 2003
"""

NEVER_ENDS = """# name: iso/never_ends.test
CREATE LOGICAL SOURCE stream(id UINT64 NOT NULL);
CREATE PHYSICAL SOURCE FOR stream TYPE File;
ATTACH INLINE
1

CREATE SINK sink(id UINT64 NOT NULL) TYPE File;

SELECT id FROM stream INTO sink;
----
1

SELECT missing FROM stream INTO sink;
----
ERROR 2003
"""
"""Without an agent its first query never finishes: the file fails midway."""


class Recording:
    """The runner's client, recording each statement's answer; the runs of one ``together``
    barrier wait for each other before their first query, so their objects exist at the same
    time."""

    def __init__(self, client: CoordinatorClient, together: asyncio.Barrier | None = None) -> None:
        self.client = client
        self.answers: list[tuple[str, Any]] = []
        self.barrier = together or asyncio.Barrier(1)
        self.waited = False
        self.lose_answer_to: str | None = None

    async def ask_response(self, request: m.Request) -> Any:
        query = isinstance(request, m.ExecuteStatement) and request.text.startswith("SELECT")
        if query and not self.waited:  # this run's first query
            self.waited = True
            await self.barrier.wait()
        response = await self.client.ask_response(request)
        if isinstance(request, m.ExecuteStatement):
            self.answers.append((request.text, response))
            if self.lose_answer_to and request.text.startswith(self.lose_answer_to):
                raise TimeoutError("the answer got lost")  # carried out, never recorded
        return response

    async def ask(self, request: m.Request) -> Any:
        return await self.client.ask(request)

    async def list_all(self, request: m.Request) -> list[Any]:
        return await self.client.list_all(request)


@pytest.fixture
async def client(start_coordinator: Any, sqlite_url: str) -> AsyncIterator[CoordinatorClient]:
    coordinator = await start_coordinator(sqlite_url)
    connected: CoordinatorClient = await coordinator.client().connect()
    yield connected
    await asyncio.to_thread(connected.close, 5)


def suite(tmp_path: Path, **files: str) -> dict[str, Any]:
    root = tmp_path / "suite"
    (root / "testdata").mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / f"{name}.test").write_text(text)
    return {name: select(find_files([root / f"{name}.test"])) for name in files}


async def catalog(client: CoordinatorClient) -> dict[str, list[Any]]:
    return {
        "logical sources": await client.ask(m.ListLogicalSources()),
        "sinks": await client.ask(m.ListSinks()),
        "queries": await client.ask(m.ListQueries()),
    }


EMPTY: dict[str, list[Any]] = {"logical sources": [], "sinks": [], "queries": []}


def created_names(recording: Recording) -> list[str]:
    return [
        answer["result"]["name"]
        for _text, response in recording.answers
        if response.ok
        for answer in response.result["statements"]
        if answer["statement"] in ("CREATE LOGICAL SOURCE", "CREATE SINK")
    ]


async def test_runs_at_the_same_time_and_in_a_row_see_only_their_own_objects(
    client: CoordinatorClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(systest, "QUERY_TIMEOUT_S", 5.0)  # a query that binds fails soon
    files = suite(tmp_path, same=SAME, other=OTHER)
    work = tmp_path / "files"
    together = asyncio.Barrier(3)
    recordings = [Recording(client, together) for _ in range(3)]
    runners = [
        SystestRunner(cast(CoordinatorClient, recording), work, jobs=2) for recording in recordings
    ]
    summaries = await asyncio.gather(
        runners[0].run(files["same"]), runners[1].run(files["same"]), runners[2].run(files["other"])
    )
    for recording, summary in zip(recordings, summaries, strict=True):
        refused = [(text, r.error_message) for text, r in recording.answers if not r.ok]
        assert all(text.lstrip().startswith("SELECT") for text, _ in refused), refused
        assert summary.line().startswith(f"{len(summary.outcomes)} passed, 0 failed"), [
            asdict(outcome) for outcome in summary.outcomes
        ]
    names = [set(created_names(recording)) for recording in recordings]
    assert all(len(run) == 2 for run in names)
    assert not (names[0] & names[1]) and not (names[0] & names[2]) and not (names[1] & names[2])
    assert await catalog(client) == EMPTY
    assert list(work.iterdir()) == []

    again = Recording(client)
    summary = await SystestRunner(cast(CoordinatorClient, again), work).run(files["same"])
    assert summary.line() == "2 passed, 0 failed, 0 unsupported"
    assert not set(created_names(again)) & names[0]
    assert await catalog(client) == EMPTY


async def test_a_file_that_fails_midway_leaves_nothing_behind(
    client: CoordinatorClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(systest, "QUERY_TIMEOUT_S", 1.0)
    files = suite(tmp_path, never_ends=NEVER_ENDS)
    work = tmp_path / "files"
    reported: list[Outcome] = []
    runner = SystestRunner(client, work, jobs=1, report=reported.append)
    summary = await runner.run(files["never_ends"])
    [first, second] = summary.outcomes
    assert (first.status, second.status) == ("failed", "passed")
    assert "did not finish" in first.detail and "__" not in first.detail
    assert await catalog(client) == EMPTY
    assert list(work.iterdir()) == []


async def test_a_cancelled_run_and_a_lost_answer_leave_nothing_behind(
    client: CoordinatorClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(systest, "QUERY_TIMEOUT_S", 600.0)
    files = suite(tmp_path, never_ends=NEVER_ENDS, same=SAME)
    work = tmp_path / "files"
    started = asyncio.Event()
    runner = SystestRunner(client, work, jobs=1, report=lambda _outcome: None)
    original = runner._wait

    async def waiting(query_id: int) -> dict[str, Any]:
        started.set()
        return await original(query_id)

    monkeypatch.setattr(runner, "_wait", waiting)
    task = asyncio.create_task(runner.run(files["never_ends"]))
    await asyncio.wait_for(started.wait(), 60)
    assert len((await catalog(client))["queries"]) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await catalog(client) == EMPTY
    assert list(work.iterdir()) == []

    lossy = Recording(client)
    lossy.lose_answer_to = "CREATE SINK"
    await SystestRunner(cast(CoordinatorClient, lossy), work).run(files["same"])
    [(_text, created)] = [(t, r) for t, r in lossy.answers if t.startswith("CREATE SINK")]
    assert created.ok  # the runner never learnt of this sink ...
    assert await catalog(client) == EMPTY  # ... and dropped it all the same


# --- the stack's files directory and payload key --------------------------------------------


def write_stack(state: Path, address: str, files_dir: Path | None) -> str:
    state.mkdir(parents=True, exist_ok=True)
    info = StackInfo(1, 2, [3], address, "http://ui", "sqlite://", str(state), [4])
    record = asdict(info)
    if files_dir is None:
        del record["files_dir"]  # as stacks before files_dir was recorded wrote it
    else:
        record["files_dir"] = str(files_dir)
    (state / STACK_FILE).write_text(json.dumps(record))
    return config.ensure_payload_key(state)


@pytest.mark.quick
def test_the_stack_json_names_the_files_dir_and_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STREAMCTL_PAYLOAD_KEY", raising=False)
    monkeypatch.delenv("STREAMCTL_FILES_DIR", raising=False)
    state, elsewhere = tmp_path / "state", tmp_path / "elsewhere"
    key = write_stack(state, "127.0.0.1:7999", elsewhere)
    found = stack_files("localhost:7999", state)
    assert found.files_dir == elsewhere
    assert found.payload_keys == config.parse_payload_keys(key)
    with pytest.raises(OtherStack, match=r"127\.0\.0\.1:7999"):
        stack_files("127.0.0.1:8000", state)
    write_stack(state, "127.0.0.1:7999", None)
    assert stack_files("127.0.0.1:7999", state).files_dir == state.resolve() / "files"
    bare = tmp_path / "bare"  # no stack.json: a coordinator not started by up
    assert stack_files("127.0.0.1:7999", bare).files_dir == bare.resolve() / "files"
    assert stack_files("127.0.0.1:7999", bare).payload_keys == ()


@pytest.mark.quick
def test_a_state_dir_of_another_stack_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    write_stack(state, "127.0.0.1:7999", tmp_path / "files")
    (tmp_path / "a.test").write_text(SAME)
    code = run_systest_command(
        "127.0.0.1:8000", "coordinator", [tmp_path / "a.test"], 1, set(), True, state,
        Console(file=io.StringIO()),
    )  # fmt: skip
    assert code == EXIT_USAGE


async def test_systest_stages_in_the_files_dir_of_the_stack_at_its_address(
    start_coordinator: Any,
    sqlite_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("STREAMCTL_FILES_DIR", raising=False)
    coordinator = await start_coordinator(sqlite_url)
    state, elsewhere = tmp_path / "state", tmp_path / "elsewhere"
    write_stack(state, coordinator.address, elsewhere)
    monkeypatch.setenv("STREAMCTL_PAYLOAD_KEY", "")  # the key comes from the state dir
    files = suite(tmp_path, same=SAME)
    staged_in: list[Path] = []
    temporary = systest_cli.tempfile.TemporaryDirectory

    def recording_temporary(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("prefix") == "systest-":
            staged_in.append(Path(kwargs["dir"]))
        return temporary(*args, **kwargs)

    monkeypatch.setattr(systest_cli.tempfile, "TemporaryDirectory", recording_temporary)
    output = io.StringIO()
    code = await asyncio.to_thread(
        run_systest_command,
        coordinator.address, coordinator.workflow_id, [files["same"][0][0].path], 1, set(),
        False, state, Console(file=output, width=200),
    )  # fmt: skip
    assert output.getvalue().rstrip().splitlines()[-1] == "2 passed, 0 failed, 0 unsupported"
    assert code == 0 and staged_in == [elsewhere]
