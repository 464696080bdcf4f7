"""The CPU time and resident memory of a benchmark's processes, read from Linux's ``/proc``.

A benchmark that runs the whole stack on one machine (client, coordinator worker and its pass
processes, Temporal's dev server, PostgreSQL) is bound by the machine's cores as much as by any
one process: ``bench requests`` reports each one's CPU per request, so the figure that bounds
the rate is measured rather than guessed.

:func:`tree_cpu_seconds` counts a process, the descendants it has waited for (the kernel adds
those to the parent's ``cutime``/``cstime``: a pass process that a renewing pool replaced still
counts), and the descendants alive at the reading, whichever thread started them. Not counted:
a descendant whose parent ended before it (it belongs to init then), and one reaped between
the reading of its parent and of the parent's children (missed by that one reading). Elsewhere
than Linux, and for processes that are gone or unreadable, the readings are 0.
:func:`tree_rss_bytes` is the resident memory of a process and its live descendants (found
the same way: the coordinator worker runs its passes in a process pool). :func:`running` says
whether a process has not ended yet (a benchmark's stack must be gone after the benchmark).
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
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    # The command name is in parentheses and may itself hold spaces, parentheses and bytes
    # that are no UTF-8 (the kernel cuts it at 15 bytes, inside a character too).
    return data[data.rfind(b")") + 2 :].decode("ascii").split()


def running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended. A zombie has ended: it only waits for
    its parent to reap it (``os.kill(pid, 0)`` still finds it)."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def _children(pid: int) -> list[int]:
    """The live children of ``pid``, whichever of its threads started them."""
    children: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return children
    for task in tasks:
        try:
            children.extend(int(child) for child in (task / "children").read_text().split())
        except OSError:
            continue  # the thread ended meanwhile
    return children


def tree_cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of ``pid``, of the children it has waited for, and of its
    live descendants (each counted the same way)."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    # utime, stime, cutime, cstime: fields 14-17 of stat, 12-15 after the name and state.
    own = sum(int(value) for value in fields[11:15]) / _TICKS_PER_SECOND
    return own + sum(tree_cpu_seconds(child) for child in _children(pid))


def tree_rss_bytes(pid: int) -> int:
    """The resident memory of ``pid`` and of its live descendants, in bytes (0 when gone)."""
    total = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total = int(line.split()[1]) * 1024
    except OSError:  # it ended meanwhile
        return 0
    return total + sum(tree_rss_bytes(child) for child in _children(pid))


def cpu_by_pid(pids: Iterable[int]) -> dict[int, float]:
    """:func:`tree_cpu_seconds` of each of ``pids`` that can be read."""
    return {pid: seconds for pid in pids if (seconds := tree_cpu_seconds(pid)) > 0.0}


def command_name(pid: int) -> str | None:
    """The process's command name (``/proc/<pid>/comm``), or None when it is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_bytes().decode(errors="replace").strip()
    except OSError:
        return None
