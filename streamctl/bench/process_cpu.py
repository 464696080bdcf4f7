"""The CPU time of a benchmark's processes, read from Linux's ``/proc``.

A benchmark that runs the whole stack on one machine (client, coordinator worker and its pass
processes, Temporal's dev server, PostgreSQL) is bound by the machine's cores as much as by any
one process: ``bench requests`` reports each one's CPU per request, so the figure that bounds
the rate is measured rather than guessed.

:func:`tree_cpu_seconds` counts a process, its live descendants, and the descendants it has
already waited for (the kernel adds those to the parent's ``cutime``/``cstime``): a pass process
that a renewing pool replaced between two readings still counts. Elsewhere than Linux, and for
processes that are gone or unreadable, the readings are 0.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

_TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state is the first), or
    None when the process is gone or unreadable."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may itself hold spaces and parentheses.
    return text[text.rfind(")") + 2 :].split()


def _children(pid: int) -> list[int]:
    try:
        return [
            int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        ]
    except OSError:
        return []


def tree_cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of ``pid``, of the children it has waited for, and of its
    live descendants (each counted the same way)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    # utime, stime, cutime, cstime: fields 14-17 of stat, 12-15 after the name and state.
    own = sum(int(value) for value in fields[11:15]) / _TICKS_PER_SECOND
    return own + sum(tree_cpu_seconds(child) for child in _children(pid))


def cpu_seconds(pids: Iterable[int]) -> float:
    """:func:`tree_cpu_seconds` summed over ``pids``."""
    return sum(tree_cpu_seconds(pid) for pid in pids)
