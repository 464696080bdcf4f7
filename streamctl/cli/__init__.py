"""``streamctl``: the one command (kubectl / temporal CLI conventions).

Human tables by default, ``--json`` for scripts. Exit codes: 0 success, 1 a request failed or
a benchmark missed nothing but reported, 2 bad usage, 3 the stack is not reachable.

The typer application is assembled here from one module per command group; :func:`main` is
the console script's entry point.
"""

from __future__ import annotations

import os
import sys

import typer

from streamctl.cli import (
    bench_commands,
    demo_command,
    history_commands,
    process_commands,
    query_commands,
    schedule_commands,
    stack_commands,
    statement_commands,
)

app = typer.Typer(
    help="Coordinator for continuous stream queries on Temporal and Spark.", no_args_is_help=True
)
# Each group's commands, in the order ``streamctl --help`` lists them.
for group in (stack_commands, statement_commands, history_commands, process_commands, demo_command):
    app.add_typer(group.app)
app.add_typer(bench_commands.bench_app, name="bench")
app.add_typer(query_commands.query_app, name="query")
app.add_typer(schedule_commands.schedule_app, name="schedule")


def main() -> None:
    """Run the command, then leave without interpreter finalization: the Temporal client's
    Tokio threads (its Rust core) can outlive the command and race the interpreter's teardown,
    which aborts the process (``Fatal Python error: PyGILState_Release``) after the command
    has done its work. This is the SDK's open issue temporalio/sdk-python#300; skipping
    finalization (after flushing) is the known way around it."""
    import logging

    from streamctl.gc_policy import collect_young_garbage_less_often

    collect_young_garbage_less_often()  # streamctl's processes handle messages in bulk
    code: int = 0
    try:
        app()
    except SystemExit as leaving:
        code = leaving.code if isinstance(leaving.code, int) else (0 if leaving.code is None else 1)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
