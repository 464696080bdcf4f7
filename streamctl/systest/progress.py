"""``streamctl systest`` output: a line per query as it ends under a progress bar (queries
done of all selected, on a terminal), a table per folder, and the closing ``N passed, N failed,
N unsupported`` line (``--json``: one JSON object instead).

The run uses the files directory and the payload key of the stack it runs on
(:func:`stack_files`): the ones ``<state dir>/stack.json`` records for a stack that ``streamctl
up`` started there (the one ``streamctl systest`` starts itself, or the user's with
``--address``). Each file stages its data in a work directory of its own under that files
directory, the one directory every stack lets file sources and sinks use, and the runner's
client holds the key, so it reads the answers that stack encrypts. A state dir whose stack runs
at another address is refused (exit 2) rather than used with the wrong directory and key. The run
always ends with its summary: a coordinator that cannot be reached fails every query with the
reason instead of ending in a traceback.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from streamctl import config
from streamctl.client.client import CoordinatorClient
from streamctl.exit_codes import EXIT_USAGE
from streamctl.systest.runner import (
    Outcome,
    Summary,
    SystestRunner,
    find_files,
    outcomes_without_running,
    query_count,
    select,
)
from streamctl.systest.suite_files import SystestFile
from streamctl.worker.supervisor import read_stack

MARKS = {"passed": "[green]✓[/]", "failed": "[red]✗[/]", "unsupported": "[yellow]-[/]"}


@dataclass(frozen=True)
class StackFiles:
    """Where a stack lets the runner stage files, and the keys of its encrypted answers."""

    files_dir: Path
    payload_keys: tuple[bytes, ...]


class OtherStack(Exception):
    """The state dir belongs to a stack at another address."""


def stack_files(address: str, state_dir: Path) -> StackFiles:
    """The files directory and payload keys of the stack at ``address``: those of the stack
    ``state_dir/stack.json`` describes (its recorded files directory, else ``<its state
    dir>/files``); without a ``stack.json`` (a coordinator not started by ``up``) those of
    ``state_dir`` itself. :class:`OtherStack` if ``stack.json`` names another address."""
    info = read_stack(state_dir)
    if info is None:
        return StackFiles(config.files_dir(state_dir), config.payload_keys(state_dir))
    if _endpoint(info.address) != _endpoint(address):
        raise OtherStack(
            f"the stack in {state_dir} runs at {info.address}, not at {address}; pass the "
            "state dir of the stack at that address with --state-dir"
        )
    stack_dir = Path(info.state_dir)
    files = Path(info.files_dir) if info.files_dir else config.files_dir(stack_dir)
    return StackFiles(files, config.payload_keys(stack_dir))


def _endpoint(address: str) -> tuple[str, str]:
    host, _, port = address.strip().rpartition(":")
    host = host.strip("[]").lower()
    return ("127.0.0.1" if host in ("localhost", "::1", "") else host), port


def run_systest_command(
    address: str,
    workflow_id: str,
    paths: list[Path],
    jobs: int,
    groups: set[str],
    as_json: bool,
    state_dir: Path,
    console: Console,
) -> int:
    try:
        stack = stack_files(address, state_dir)
    except OtherStack as error:
        Console(stderr=True).print(f"[red]{escape(str(error))}")
        return EXIT_USAGE
    selected = select(find_files(paths), groups or None)
    progress = Progress(
        TextColumn("[bold]systest"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("queries"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=as_json or not console.is_terminal,
    )
    task = progress.add_task("queries", total=query_count(selected))

    def report(outcome: Outcome) -> None:
        progress.advance(task)
        if as_json:
            return
        where = f"{outcome.file}:{outcome.line} #{outcome.index}"
        detail = f"  {escape(outcome.detail)}" if outcome.detail else ""
        progress.console.print(f"{MARKS[outcome.status]} {where} ({outcome.seconds:.1f}s){detail}")

    started = time.monotonic()
    # Staged ATTACH data and sink directories go in the stack's files directory, the one file
    # root every stack allows (the coordinator refuses paths outside its file roots).
    files = stack.files_dir
    files.mkdir(parents=True, exist_ok=True)
    with (
        progress,
        tempfile.TemporaryDirectory(prefix="systest-", dir=files) as work,
    ):
        summary = asyncio.run(
            _run(address, workflow_id, selected, jobs, Path(work), report, stack.payload_keys)
        )
    if as_json:
        print(json.dumps({**summary.as_json(), "seconds": round(time.monotonic() - started, 1)}))
    else:
        console.print(_folder_table(summary))
        console.print(summary.line())
    return 1 if summary.count("failed") else 0


async def _run(
    address: str,
    workflow_id: str,
    selected: list[tuple[SystestFile, Path]],
    jobs: int,
    work: Path,
    report: Callable[[Outcome], None],
    payload_keys: tuple[bytes, ...],
) -> Summary:
    client: CoordinatorClient | None = None
    try:
        client = CoordinatorClient(address, workflow_id=workflow_id, payload_keys=payload_keys)
        await client.connect()
    except Exception as error:
        if client is not None:
            await asyncio.to_thread(client.close, 0)
        reason = f"no coordinator to run it: {type(error).__name__}: {error}"
        summary = Summary()
        for systest, _root in selected:
            summary.outcomes.extend(outcomes_without_running(systest, "failed", reason))
        for outcome in summary.outcomes:
            report(outcome)
        return summary
    try:
        runner = SystestRunner(client, work, jobs, report)
        return await runner.run(selected)
    finally:
        await asyncio.to_thread(client.close)


def _folder_table(summary: Summary) -> Table:
    table = Table(title="conformance by folder", title_justify="left")
    for column in ("folder", "passed", "failed", "unsupported", "pass rate (runnable)"):
        table.add_column(column)
    for folder, counts in summary.by_folder().items():
        runnable = counts["passed"] + counts["failed"]
        rate = f"{100 * counts['passed'] / runnable:.0f}%" if runnable else "-"
        table.add_row(
            folder, str(counts["passed"]), str(counts["failed"]), str(counts["unsupported"]), rate
        )
    return table
