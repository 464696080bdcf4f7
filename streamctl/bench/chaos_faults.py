"""The faults of a chaos run (:mod:`streamctl.bench.chaos`): finding the process a kill targets
(by the run's state directory in its environment), ``kill -9`` on schedule, and waiting for
the supervisor (or the benchmark, for PostgreSQL) to bring a replacement up."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from pathlib import Path

from streamctl.bench.chaos_state import POSTGRES_DOWNTIME_S, SPARK_TARGETS, ChaosRun, Kill
from streamctl.local_ports import port_open
from streamctl.worker.supervisor import pid_alive

KILLS_PER_5_MIN = {
    "coordinator_worker": 4,
    "temporal": 2,
    "postgres": 2,
    "agent": 2,
    "spark_jvm": 2,
}


def children(pid: int, command: str | None = None) -> list[int]:
    """Live child processes of ``pid`` (whose executable name is ``command``, if given)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[1]) == pid and fields[0] != "Z" and (command is None or name == command):
            found.append(int(entry.name))
    return found


def processes_of_run(state_dir: Path) -> list[int]:
    """Every process whose environment names this run's state directory: what the supervisor
    started and their descendants (JVMs, process pools), killed parents' orphans included."""
    marker = f"STREAMCTL_STATE_DIR={state_dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environment = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environment.split(b"\0"):
            found.append(int(entry.name))
    return found


def command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def kill_run_processes(state_dir: Path) -> int:
    killed = 0
    for _ in range(5):
        pids = processes_of_run(state_dir)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(0.2)
    return killed


def victim(run: ChaosRun, kill: Kill) -> int | None:
    """The pid to kill for ``kill`` (its slot chosen already), or None if none runs now;
    sets what it is."""
    supervisor = run.supervisor
    if kill.target == "coordinator_worker":
        assert kill.slot is not None
        worker = supervisor.workers[kill.slot]
        kill.which = f"coordinator worker {kill.slot + 1}"
        return worker.pid if worker.poll() is None else None
    if kill.target in ("agent", "spark_jvm"):
        assert kill.slot is not None
        agent = supervisor.agents[kill.slot]
        name = supervisor.agent_names[kill.slot]
        kill.which = name if kill.target == "agent" else f"Spark JVM of {name}"
        if agent.poll() is not None:
            return None
        if kill.target == "agent":
            return agent.pid
        jvms = children(agent.pid, "java")
        return jvms[0] if jvms else None
    if kill.target == "temporal":
        server = supervisor.temporal
        kill.which = "Temporal dev server"
        return server.pid if server is not None and server.poll() is None else None
    kill.which = "PostgreSQL postmaster"
    return run.postgres.postmaster_pid()


def replacement_running(run: ChaosRun, kill: Kill) -> bool:
    """Whether a new process runs where the killed one did."""
    supervisor = run.supervisor
    if kill.target == "coordinator_worker":
        assert kill.slot is not None
        worker = supervisor.workers[kill.slot]
        return worker.pid != kill.pid and worker.poll() is None
    if kill.target == "temporal":
        server = supervisor.temporal
        replaced = server is not None and server.pid != kill.pid and server.poll() is None
        return replaced and port_open(supervisor.port)
    if kill.target in ("agent", "spark_jvm"):
        assert kill.slot is not None
        agent = supervisor.agents[kill.slot]
        if agent.poll() is not None:
            return False
        if kill.target == "agent":
            return agent.pid != kill.pid
        return any(pid != kill.pid for pid in children(agent.pid, "java"))
    return run.postgres.answers()


async def await_restart(run: ChaosRun, kill: Kill, timeout: float = 300.0) -> None:
    killed_at = time.monotonic()
    while time.monotonic() - killed_at < timeout:
        if await asyncio.to_thread(replacement_running, run, kill):
            kill.restarted_after_s = time.monotonic() - killed_at
            return
        await asyncio.sleep(0.2)


async def await_jvm_exit(kill: Kill, timeout: float = 60.0) -> None:
    """A killed agent's driver JVM must not go on writing its queries' checkpoints."""
    killed_at = time.monotonic()
    while time.monotonic() - killed_at < timeout:
        if not any(pid_alive(pid) for pid in kill.jvms):
            kill.jvm_exited_after_s = time.monotonic() - killed_at
            return
        await asyncio.sleep(0.2)


async def restart_postgres(run: ChaosRun, downtime: float) -> None:
    await asyncio.sleep(downtime)
    await asyncio.to_thread(run.postgres.restart)


async def kill_all(run: ChaosRun, schedule: list[tuple[float, str]]) -> None:
    rng = random.Random(run.settings.seed + 1)
    for scheduled, target in schedule:
        await asyncio.sleep(max(0.0, scheduled - run.now_s()))
        kill = Kill(target, run.now_s(), scheduled)
        if target == "coordinator_worker":
            kill.slot = rng.randrange(len(run.supervisor.workers))
        elif target in SPARK_TARGETS:
            kill.slot = rng.randrange(len(run.supervisor.agents))
        # A process being restarted has nobody to kill yet: wait for it (at most a minute).
        deadline = time.monotonic() + 60
        while True:
            pid = victim(run, kill)
            if pid is not None or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        kill.at_s, kill.wall, kill.pid = run.now_s(), time.time(), pid
        run.kills.append(kill)
        if pid is None:
            kill.note = "no live process to kill within 60 s"
            continue
        if target == "agent":
            kill.jvms = children(pid, "java")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            kill.note = "the process was gone before the signal"
            continue
        if target == "agent":
            run.background.append(asyncio.create_task(await_jvm_exit(kill)))
        if target == "postgres":
            downtime = rng.uniform(*POSTGRES_DOWNTIME_S)
            kill.note = f"restarted with pg_ctl after {downtime:.1f}s down"
            run.background.append(
                asyncio.create_task(restart_postgres(run, downtime), name=f"pg-{kill.at_s}")
            )
        run.background.append(asyncio.create_task(await_restart(run, kill)))
