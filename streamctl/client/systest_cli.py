"""``streamctl systest`` output: a line per query as it ends, a table per folder, and the
closing ``N passed, N failed, N unsupported`` line (``--json``: one JSON object instead)."""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from streamctl.client.client import CoordinatorClient
from streamctl.client.systest import Outcome, Summary, SystestRunner, find_files

MARKS = {"passed": "[green]✓[/]", "failed": "[red]✗[/]", "unsupported": "[yellow]-[/]"}


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
    def report(outcome: Outcome) -> None:
        if as_json:
            return
        where = f"{outcome.file}:{outcome.line} #{outcome.index}"
        detail = f"  {escape(outcome.detail)}" if outcome.detail else ""
        console.print(f"{MARKS[outcome.status]} {where} ({outcome.seconds:.1f}s){detail}")

    started = time.monotonic()
    state_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="systest-", dir=state_dir) as work:
        summary = asyncio.run(
            _run(address, workflow_id, find_files(paths), jobs, groups, Path(work), report)
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
    files: list[tuple[Path, Path]],
    jobs: int,
    groups: set[str],
    work: Path,
    report: Callable[[Outcome], None],
) -> Summary:
    client = await CoordinatorClient(address, workflow_id=workflow_id).connect()
    try:
        runner = SystestRunner(client, work, jobs, report)
        return await runner.run(files, groups or None)
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
