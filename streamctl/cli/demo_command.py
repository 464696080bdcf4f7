"""``streamctl demo``: the first command; its wiring into :mod:`streamctl.cli.demo_query`."""

from __future__ import annotations

import typer

from streamctl.cli.common import (
    StateDirOption,
    console,
    resolve_state_dir,
    temporal_address,
)
from streamctl.cli.stack_commands import start_default_stack

app = typer.Typer()


@app.command()
def demo(
    state_dir: StateDirOption = None,
    keep: bool = typer.Option(False, help="Leave the stack running afterwards."),
) -> None:
    """Start the stack if needed, run a windowed aggregation query and print its first rows."""
    from streamctl.cli.demo_query import run_demo
    from streamctl.worker.supervisor import pid_alive, read_stack, stop_stack

    directory = resolve_state_dir(state_dir)
    info = read_stack(directory)
    started_here = info is None or not pid_alive(info.supervisor_pid)
    try:
        if started_here:  # inside the try: a stack that failed to start is stopped too
            start_default_stack(directory)
        run_demo(
            temporal_address(None, directory),
            console,
            expect_agent=started_here,
            state_dir=directory,
        )
    finally:
        if started_here and not keep:
            stop_stack(directory)
