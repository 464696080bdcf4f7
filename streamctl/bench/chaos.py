"""``streamctl bench chaos``: steady load while every process of the stack is killed -9; then
the books are checked.

What runs
---------
A private stack: a PostgreSQL cluster of its own (``initdb``/``pg_ctl`` in a temporary
directory on a free port, trust authentication, run as the ``postgres`` user when the
benchmark runs as root; the machine's own PostgreSQL server is never touched), and the
:class:`~streamctl.worker.supervisor.Supervisor` that ``streamctl up`` uses, with 2
coordinator worker processes and 2 Spark agents (``local[1]``, capacity 4) whose ``watch()``
restarts a dead Temporal dev server, coordinator worker or agent. For ``seconds`` (default
300) the benchmark keeps up, at once:

* **requests**: ``request_rate`` ``CreateLogicalSource`` requests per second (open loop: a
  new one is sent on time whatever is still waiting), each with a unique name and a
  client-generated request id, through one :class:`~streamctl.client.client.CoordinatorClient`
  whose ``request_timeout`` (180 s) outlasts the outages, since the client retries with the
  same id;
* **heartbeats** of 50 simulated agents (registered with capacity 0, so no query is placed
  on them) every 2 s through one client's event path (``try_send``; the outbox keeps and
  retries them through outages);
* **4 queries** on the 2 real agents: ``SELECT id, v FROM src_N INTO sink_N`` over File
  sources (CSV directories) that the benchmark feeds with a new file of sequential ids every
  second, into File sinks (CSV);
* **kills**: at seeded random times (``seed``) within the first three quarters of the run,
  at least 8 s apart, ``kill -9`` of: a coordinator worker process, an agent process, an
  agent's Spark driver JVM (the ``java`` child of the agent process), the Temporal dev server,
  and the PostgreSQL postmaster. Per 5 minutes: 4 coordinator workers, 2 dev servers, 2
  PostgreSQL, 2 agents, 2 Spark JVMs (at least one of each). The supervisor restarts workers,
  agents and the dev server; the benchmark restarts PostgreSQL with ``pg_ctl`` after 2-6 s of
  downtime; the agent itself must notice its dead JVM and build a new one
  (:mod:`streamctl.worker.spark_watchdog`).

Then it stops sending and feeding, waits for the requests still under way (each ends by its
deadline), waits (at most ``sink_timeout``) until every sink holds every id fed and every
query is ``RUNNING``, and reads the catalog directly (SQL on the private cluster).

Figures
-------
* ``requests_acked``: requests answered ok. ``requests_failed``: not answered by their
  deadline or failed in the client (allowed; reported, with how many were applied anyway).
  ``requests_refused``: answered with an error, by code.
* ``lost``: acked requests whose source is not in the catalog.
* ``doubled``: requests with exact evidence of a second application: answered
  ``ALREADY_EXISTS`` (every name is sent once, so only a retry applied again can find it), or
  whose source has more than one ``create`` in the ``changelog``.
  ``changelog_applied_twice``: groups of (message id, entity, key, action) in the whole
  changelog that occur more than once (no message may change an entity twice).
  ``refused_but_applied``: requests answered with an error whose source exists all the same.
* ``healthy_agents_declared_dead``: ``->DEAD`` transitions in the changelog of the 50
  simulated agents and of the real agents, except a real agent's between a kill of its process
  and its next registration (that agent was dead). ``dead_transitions`` lists every one.
* ``queries_running_at_end``: queries ``RUNNING`` (``ListQueries``) after the wait.
* ``sink_rows_lost``/``sink_rows_doubled``: the committed rows of each File sink (only files
  its ``_spark_metadata`` log lists) against the rows fed, as multisets: fed rows missing, and
  rows present more often than fed. ``sink_rows_unexpected``: rows never fed.
* ``kills``: per target, each kill's time (seconds into the load), the pid, which process, and
  how long until a new one ran (``restarted_after_s``; PostgreSQL: until it answered again).
  ``kills_missed``: scheduled kills that found no process to kill. A killed agent's record
  also says how long its driver JVM outlived it (``jvm_exited_after_s``; a JVM that goes on
  would be a second writer of its queries' checkpoints once they restart elsewhere).
* ``processes_left_after_stop``: processes of the run still alive after the supervisor
  stopped the stack (orphans of killed processes), by name; the run then kills them.
* ``durations``: setup, load, request drain, sink wait, verification, total (seconds).
* ``ok``: ``lost``, ``doubled``, ``changelog_applied_twice``, ``refused_but_applied``,
  ``healthy_agents_declared_dead``, the three sink figures and ``kills_missed`` are 0 and every
  query is ``RUNNING`` at the end. The command exits 1 when not ok.

What is guaranteed: every figure is measured, never assumed; a figure the benchmark could not
measure makes the run fail (``error``) rather than report 0. The run's directory (Supervisor
state dir with every process's log, the PostgreSQL log, the fed files and sinks) is removed
when the run is ok and kept, with its path in ``state_dir``, when it is not (or with
``keep_state``). Every process the run started is killed at the end, found by the run's state
directory in its environment (orphans of killed processes included).
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import itertools
import os
import pwd
import random
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from streamctl import config as settings
from streamctl.client.client import CoordinatorClient
from streamctl.client.errors import ClientError, OutboxFull, RequestTimeout
from streamctl.client.outbox import new_id
from streamctl.worker.supervisor import Supervisor, pid_alive
from streamctl.worker.temporal_server import free_port, port_open
from streamctl.workflows import messages as m
from streamctl.workflows.config import CoordinatorConfig

TARGETS = ("coordinator_worker", "agent", "spark_jvm", "temporal", "postgres")
KILLS_PER_5_MIN = {
    "coordinator_worker": 4,
    "temporal": 2,
    "postgres": 2,
    "agent": 2,
    "spark_jvm": 2,
}
SPARK_TARGETS = ("agent", "spark_jvm")
COLUMNS = (m.ColumnSpec("id", "UINT64", False), m.ColumnSpec("v", "UINT64", False))
SINK_SCHEMA = [{"name": c.name, "type": c.type, "nullable": c.nullable} for c in COLUMNS]
KILL_WINDOW = (0.1, 0.75)
"""Kills fall within these fractions of the run, leaving a quarter of it to recover."""
MIN_KILL_GAP_S = 8.0
POSTGRES_DOWNTIME_S = (2.0, 6.0)
ROWS_PER_FILE = 10


@dataclass
class ChaosSettings:
    seconds: float = 300.0
    seed: int = 0
    agents: int = 2
    queries: int = 4
    coordinators: int = 2
    simulated_agents: int = 50
    request_rate: float = 4.0
    heartbeat_interval: float = 2.0
    feed_interval: float = 1.0
    request_timeout: float = 180.0
    sink_timeout: float = 300.0
    master: str = "local[1]"
    capacity: int = 4
    kills: dict[str, int] | None = None
    """Kills per target for the whole run; None: :data:`KILLS_PER_5_MIN` scaled to ``seconds``."""
    keep_state: bool = False

    def kill_counts(self) -> dict[str, int]:
        if self.kills is not None:
            unknown = set(self.kills) - set(TARGETS)
            if unknown:
                raise ValueError(f"unknown kill targets {sorted(unknown)}; known: {TARGETS}")
            counts = dict(self.kills)
        else:
            counts = {
                target: max(1, round(per_5_min * self.seconds / 300))
                for target, per_5_min in KILLS_PER_5_MIN.items()
            }
        if self.agents == 0:
            for target in SPARK_TARGETS:
                if counts.get(target):
                    if self.kills is not None:
                        raise ValueError(f"cannot kill {target} without agents")
                    counts.pop(target)
        return {target: n for target, n in counts.items() if n > 0}


def kill_schedule(settings_: ChaosSettings) -> list[tuple[float, str]]:
    """(seconds into the load, target) for every kill, sorted; the same seed, the same list."""
    rng = random.Random(settings_.seed)
    targets = [t for t, n in sorted(settings_.kill_counts().items()) for _ in range(n)]
    rng.shuffle(targets)
    low, high = (fraction * settings_.seconds for fraction in KILL_WINDOW)
    gap = min(MIN_KILL_GAP_S, (high - low) / (len(targets) + 1)) if targets else 0.0
    for _ in range(1000):
        times = sorted(rng.uniform(low, high) for _ in targets)
        if all(b - a >= gap for a, b in itertools.pairwise(times)):
            break
    else:  # evenly spread, jittered within the gap
        step = (high - low) / max(1, len(targets))
        times = [low + step * i + rng.uniform(0, step - gap) for i in range(len(targets))]
    return [(round(at, 2), target) for at, target in zip(times, targets, strict=True)]


# --- the private PostgreSQL cluster ------------------------------------------------------------


def _postgres_bin() -> Path:
    for candidate in sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name)
    )[::-1]:
        if (Path(candidate) / "pg_ctl").exists() and (Path(candidate) / "initdb").exists():
            return Path(candidate)
    found = shutil.which("pg_ctl")
    if found is not None and shutil.which("initdb") is not None:
        return Path(found).parent
    raise RuntimeError(
        "the chaos benchmark needs PostgreSQL's server binaries (initdb, pg_ctl) for a cluster "
        "of its own: apt-get install postgresql"
    )


class PrivatePostgres:
    """A PostgreSQL cluster of the run's own, on a free port; killed and restarted at will."""

    def __init__(self) -> None:
        self.bin = _postgres_bin()
        self.directory = Path(tempfile.mkdtemp(prefix="streamctl-chaos-pg-"))
        self.data = self.directory / "data"
        self.log = self.directory / "postgresql.log"
        self.port = free_port()
        self._as_owner: list[str] = []
        if os.geteuid() == 0:  # PostgreSQL refuses to run as root
            owner = pwd.getpwnam("postgres")
            os.chown(self.directory, owner.pw_uid, owner.pw_gid)
            self._as_owner = ["runuser", "-u", "postgres", "--"]

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/streamctl"

    def _run(self, *command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._as_owner, *command],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def start(self) -> None:
        done = self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
        )
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr.strip() or done.stdout.strip()}")
        error = self._pg_ctl_start()
        if error is not None:
            raise RuntimeError(f"pg_ctl start failed: {error}")
        with psycopg.connect(self._admin_url(), autocommit=True) as connection:
            connection.execute('CREATE DATABASE "streamctl"')

    def _admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _pg_ctl_start(self) -> str | None:
        options = (
            f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1 "
            "-c max_connections=300"
        )
        done = self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-w",
            "-t",
            "60",
            "-o",
            options,
            "start",
        )
        return None if done.returncode == 0 else (done.stderr.strip() or done.stdout.strip())

    def postmaster_pid(self) -> int | None:
        try:
            pid = int((self.data / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if pid_alive(pid) else None

    def answers(self) -> bool:
        try:
            with psycopg.connect(self._admin_url(), connect_timeout=2, autocommit=True) as c:
                c.execute("SELECT 1")
            return True
        except psycopg.Error:
            return False

    def restart(self, timeout: float = 120.0) -> None:
        """``pg_ctl start`` until it succeeds: backends orphaned by the killed postmaster hold
        its shared memory until they notice and exit."""
        deadline = time.monotonic() + timeout
        while True:
            error = self._pg_ctl_start()
            if error is None:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"PostgreSQL did not restart within {timeout}s: {error}")
            time.sleep(0.5)

    def stop(self) -> None:
        if self.data.exists():
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)


# --- processes ---------------------------------------------------------------------------------


def _children(pid: int, command: str | None = None) -> list[int]:
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


def _processes_of_run(state_dir: Path) -> list[int]:
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


def _command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def _kill_run_processes(state_dir: Path) -> int:
    killed = 0
    for _ in range(5):
        pids = _processes_of_run(state_dir)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
        time.sleep(0.2)
    return killed


# --- the run -----------------------------------------------------------------------------------


@dataclass
class _Request:
    name: str
    request_id: str
    sent_s: float
    outcome: str = "pending"
    """``ok``, an error code, or ``failed: <client error>``."""
    latency_s: float | None = None


@dataclass
class Kill:
    target: str
    at_s: float
    scheduled_s: float
    pid: int | None = None
    which: str | None = None
    slot: int | None = None
    """The supervisor's index of the killed coordinator worker or agent."""
    restarted_after_s: float | None = None
    jvm_exited_after_s: float | None = None
    """An agent's kill: how long its driver JVM outlived it (None: still alive after 60 s)."""
    jvms: list[int] = field(default_factory=list)
    wall: float = 0.0
    note: str | None = None

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "at_s": round(self.at_s, 1),
            "pid": self.pid,
            "which": self.which,
            "restarted_after_s": (
                None if self.restarted_after_s is None else round(self.restarted_after_s, 1)
            ),
        }
        if self.target == "agent":
            out["jvm_exited_after_s"] = (
                None if self.jvm_exited_after_s is None else round(self.jvm_exited_after_s, 1)
            )
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class _Run:
    settings: ChaosSettings
    root: Path
    supervisor: Supervisor
    postgres: PrivatePostgres
    t0: float = 0.0
    wall0: float = 0.0
    stopping: bool = False
    requests: list[_Request] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    fed: dict[int, int] = field(default_factory=dict)
    """Rows fed per query index (ids 1..n)."""
    heartbeats_sent: int = 0
    heartbeats_outbox_full: int = 0
    heartbeat_max_gap_s: float = 0.0
    supervisor_failures: list[str] = field(default_factory=list)
    background: list[asyncio.Task[Any]] = field(default_factory=list)

    def now_s(self) -> float:
        return time.monotonic() - self.t0


def _sim_names(count: int) -> list[str]:
    return [f"sim_{index:03d}" for index in range(count)]


async def _watch(run: _Run) -> None:
    """The supervisor's watch; if it fails (a restart that did not come up), that is recorded
    and watching goes on, so the rest of the run is still measured."""
    while not run.stopping:
        try:
            await run.supervisor.watch()
            return
        except asyncio.CancelledError:
            raise
        except Exception as error:
            run.supervisor_failures.append(f"{run.now_s():.1f}s: {type(error).__name__}: {error}")
            await asyncio.sleep(1)


async def _send_requests(run: _Run, client: CoordinatorClient, tag: str) -> None:
    interval = 1.0 / run.settings.request_rate
    under_way: set[asyncio.Task[None]] = set()

    async def one(request: _Request) -> None:
        started = time.monotonic()
        try:
            response = await client.ask_response(
                m.CreateLogicalSource(request.name, COLUMNS), request_id=request.request_id
            )
            request.outcome = "ok" if response.ok else str(response.error_code)
        except RequestTimeout:
            request.outcome = "failed: RequestTimeout"
        except ClientError as error:
            request.outcome = f"failed: {type(error).__name__}"
        request.latency_s = time.monotonic() - started

    sequence = 0
    next_at = time.monotonic()
    while not run.stopping:
        sequence += 1
        request = _Request(f"chaos_{sequence:06d}", f"chaos-{tag}-{sequence}", run.now_s())
        run.requests.append(request)
        task = asyncio.create_task(one(request))
        under_way.add(task)
        task.add_done_callback(under_way.discard)
        next_at += interval
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    if under_way:
        await asyncio.gather(*under_way)


async def _send_heartbeats(run: _Run, client: CoordinatorClient, names: list[str]) -> None:
    last = time.monotonic()
    while True:
        for name in names:
            try:
                client.try_send(m.Heartbeat(name, load=0, capacity=0))
                run.heartbeats_sent += 1
            except OutboxFull:
                run.heartbeats_outbox_full += 1
        await asyncio.sleep(run.settings.heartbeat_interval)
        now = time.monotonic()
        run.heartbeat_max_gap_s = max(run.heartbeat_max_gap_s, now - last)
        last = now


def _write_rows(directory: Path, file_no: int, first_id: int, count: int) -> None:
    """One CSV file of ids ``first_id ..``, made visible in one rename (Spark skips the
    dot-prefixed name it is written under)."""
    text = "".join(f"{i},{2 * i}\n" for i in range(first_id, first_id + count))
    temporary = directory / f".part-{file_no:06d}.csv.tmp"
    temporary.write_text(text)
    os.replace(temporary, directory / f"part-{file_no:06d}.csv")


async def _feed(run: _Run, sources: dict[int, Path]) -> None:
    file_no = 0
    next_at = time.monotonic()
    while not run.stopping:
        file_no += 1
        for index, directory in sources.items():
            _write_rows(directory, file_no, run.fed[index] + 1, ROWS_PER_FILE)
            run.fed[index] += ROWS_PER_FILE
        next_at += run.settings.feed_interval
        await asyncio.sleep(max(0.0, next_at - time.monotonic()))


def _victim(run: _Run, kill: Kill) -> int | None:
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
        jvms = _children(agent.pid, "java")
        return jvms[0] if jvms else None
    if kill.target == "temporal":
        server = supervisor.temporal
        kill.which = "Temporal dev server"
        return server.pid if server is not None and server.poll() is None else None
    kill.which = "PostgreSQL postmaster"
    return run.postgres.postmaster_pid()


def _replacement_running(run: _Run, kill: Kill) -> bool:
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
        return any(pid != kill.pid for pid in _children(agent.pid, "java"))
    return run.postgres.answers()


async def _await_restart(run: _Run, kill: Kill, timeout: float = 300.0) -> None:
    killed_at = time.monotonic()
    while time.monotonic() - killed_at < timeout:
        if await asyncio.to_thread(_replacement_running, run, kill):
            kill.restarted_after_s = time.monotonic() - killed_at
            return
        await asyncio.sleep(0.2)


async def _await_jvm_exit(kill: Kill, timeout: float = 60.0) -> None:
    """A killed agent's driver JVM must not go on writing its queries' checkpoints."""
    killed_at = time.monotonic()
    while time.monotonic() - killed_at < timeout:
        if not any(pid_alive(pid) for pid in kill.jvms):
            kill.jvm_exited_after_s = time.monotonic() - killed_at
            return
        await asyncio.sleep(0.2)


async def _restart_postgres(run: _Run, downtime: float) -> None:
    await asyncio.sleep(downtime)
    await asyncio.to_thread(run.postgres.restart)


async def _kill_all(run: _Run, schedule: list[tuple[float, str]]) -> None:
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
            pid = _victim(run, kill)
            if pid is not None or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.5)
        kill.at_s, kill.wall, kill.pid = run.now_s(), time.time(), pid
        run.kills.append(kill)
        if pid is None:
            kill.note = "no live process to kill within 60 s"
            continue
        if target == "agent":
            kill.jvms = _children(pid, "java")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            kill.note = "the process was gone before the signal"
            continue
        if target == "agent":
            run.background.append(asyncio.create_task(_await_jvm_exit(kill)))
        if target == "postgres":
            downtime = rng.uniform(*POSTGRES_DOWNTIME_S)
            kill.note = f"restarted with pg_ctl after {downtime:.1f}s down"
            run.background.append(
                asyncio.create_task(_restart_postgres(run, downtime), name=f"pg-{kill.at_s}")
            )
        run.background.append(asyncio.create_task(_await_restart(run, kill)))


async def _ask_until(client: CoordinatorClient, request: m.Request, timeout: float = 120) -> Any:
    """A setup request, asked again (a new id) while the stack is still coming up."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await client.ask(request)
        except ClientError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(1)


async def _wait_for(what: str, check: Any, timeout: float, interval: float = 1.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} within {timeout:g}s")
        await asyncio.sleep(interval)


def _sink_rows(data: Path, index: int) -> Counter[tuple[Any, ...]]:
    from streamctl.spark.sinks import read_file_sink
    from streamctl.spark.specs import SinkSpec

    spec = SinkSpec(
        f"sink_{index}", "FILE", {"file_path": str(data / f"sink_{index}")}, SINK_SCHEMA
    )
    return Counter(read_file_sink(None, spec))


def sink_figures(data: Path, fed: dict[int, int]) -> dict[str, Any]:
    """The committed rows of sinks ``data/sink_N`` against the rows fed to ``src_N``
    (``fed[N]`` rows: ids 1..fed[N], ``v = 2 * id``), as multisets."""
    lost = doubled = unexpected = read = 0
    per_sink = {}
    for index, count in fed.items():
        got = _sink_rows(data, index)
        expected = Counter((i, 2 * i) for i in range(1, count + 1))
        sink_lost = sum((expected - got).values())
        extra = got - expected
        sink_doubled = sum(n for row, n in extra.items() if row in expected)
        sink_unexpected = sum(n for row, n in extra.items() if row not in expected)
        per_sink[f"sink_{index}"] = {
            "fed": count,
            "read": sum(got.values()),
            "lost": sink_lost,
            "doubled": sink_doubled,
            "unexpected": sink_unexpected,
        }
        lost, doubled, unexpected = (
            lost + sink_lost,
            doubled + sink_doubled,
            unexpected + sink_unexpected,
        )
        read += sum(got.values())
    return {
        "sink_rows_fed": sum(fed.values()),
        "sink_rows_read": read,
        "sink_rows_lost": lost,
        "sink_rows_doubled": doubled,
        "sink_rows_unexpected": unexpected,
        "sinks": per_sink,
    }


def _catalog_figures(run: _Run) -> dict[str, Any]:
    """Everything read straight from the catalog tables of the private cluster."""
    with psycopg.connect(run.postgres.url, connect_timeout=10) as connection:
        sources = {
            row[0]
            for row in connection.execute(
                "SELECT name FROM logical_sources WHERE name LIKE 'chaos\\_%'"
            )
        }
        creates = Counter(
            {
                row[0]: row[1]
                for row in connection.execute(
                    "SELECT key, count(*) FROM changelog WHERE entity = 'logical_source' "
                    "AND action = 'create' AND key LIKE 'chaos\\_%' GROUP BY key"
                )
            }
        )
        twice = connection.execute(
            "SELECT count(*) FROM (SELECT 1 FROM changelog GROUP BY message_id, entity, key, "
            "action HAVING count(*) > 1) AS groups"
        ).fetchone()
        changelog = list(
            connection.execute(
                "SELECT s.committed_at, c.version, c.seq, c.entity, c.key, c.action, c.reason "
                "FROM changelog c JOIN snapshot_versions s ON s.version = c.version "
                "WHERE c.entity <> 'logical_source' ORDER BY c.version, c.seq"
            )
        )
        query_actions: dict[str, int] = dict(
            connection.execute(
                "SELECT action, count(*) FROM changelog WHERE entity = 'query' GROUP BY action"
            ).fetchall()
        )
    # For the diagnosis of a run that is kept: what happened to workers, queries and sinks.
    with (run.root / "changelog.tsv").open("w") as out:
        for at, version, seq, entity, key, action, reason in changelog:
            line = [f"{at - run.wall0:.2f}", version, seq, entity, key, action, reason]
            out.write("\t".join(str(part).replace("\n", " ") for part in line) + "\n")
    workers = [
        (key, action, at) for at, _, _, entity, key, action, _ in changelog if entity == "worker"
    ]
    return {
        "sources": sources,
        "creates": creates,
        "applied_twice": int(twice[0]) if twice else 0,
        "workers": workers,
        "worker_actions": dict(Counter(action for _, action, _ in workers)),
        "query_actions": query_actions,
    }


def dead_figures(
    kills: list[Kill], wall0: float, workers: list[tuple[str, str, float]]
) -> dict[str, Any]:
    """``->DEAD`` transitions among ``workers`` ((name, action, wall time) of the changelog),
    each counted unless its agent's process had been killed and had not registered again yet
    (``wall0``: when the load began)."""
    agent_kills: dict[str, list[float]] = {}
    for kill in kills:
        if kill.target == "agent" and kill.pid is not None and kill.which is not None:
            agent_kills.setdefault(kill.which, []).append(kill.wall)
    transitions = []
    counted = 0
    for name, action, at in workers:
        if not action.endswith("->DEAD"):
            continue
        excused = None
        for killed_at in agent_kills.get(name, []):
            back = next(
                (
                    t
                    for n, a, t in workers
                    if n == name and t > killed_at and (a == "register" or a.endswith("->ALIVE"))
                ),
                None,
            )
            if killed_at <= at and (back is None or at <= back):
                excused = f"its process was killed at {killed_at - wall0:.1f}s"
        transitions.append(
            {
                "agent": name,
                "at_s": round(at - wall0, 1),
                "counted": excused is None,
                **({"excused": excused} if excused else {}),
            }
        )
        counted += excused is None
    return {"healthy_agents_declared_dead": counted, "dead_transitions": transitions}


async def _failed_workflow_tasks(run: _Run) -> int | None:
    from streamctl.bench.adversarial import failed_workflow_tasks
    from streamctl.workflows.config import COORDINATOR_WORKFLOW_ID

    client = run.supervisor.client
    if client is None:
        return None
    try:
        return await failed_workflow_tasks(client, COORDINATOR_WORKFLOW_ID)
    except Exception:
        return None


async def _chaos(run: _Run) -> dict[str, Any]:
    s = run.settings
    supervisor = run.supervisor
    data = run.root / "data"
    began = time.monotonic()
    await supervisor.start()
    watcher = asyncio.create_task(_watch(run))
    keys = settings.parse_payload_keys(supervisor.payload_key)
    client = await CoordinatorClient(
        supervisor.address, request_timeout=s.request_timeout, payload_keys=keys
    ).connect()
    beats = await CoordinatorClient(
        supervisor.address, payload_keys=keys, sender=f"chaos-heartbeats-{new_id()}"
    ).connect()
    heartbeats: asyncio.Task[None] | None = None
    try:
        # --- setup: agents, queries, simulated agents -----------------------------------------
        async def agents_alive() -> bool:
            rows = await _ask_until(client, m.ListWorkers())
            alive = {r["name"] for r in rows if r["state"] == "ALIVE"}
            return set(supervisor.agent_names) <= alive

        await _wait_for("the agents did not register", agents_alive, 300)
        sources = {}
        for index in range(1, s.queries + 1):
            source_dir, sink_dir = data / f"src_{index}", data / f"sink_{index}"
            source_dir.mkdir(parents=True)
            sources[index] = source_dir
            run.fed[index] = 0
            await _ask_until(client, m.CreateLogicalSource(f"src_{index}", COLUMNS))
            await _ask_until(
                client,
                m.CreatePhysicalSource(f"src_{index}", "FILE", {"file_path": str(source_dir)}),
            )
            await _ask_until(
                client, m.CreateSink(f"sink_{index}", COLUMNS, "FILE", {"file_path": str(sink_dir)})
            )
            await _ask_until(
                client, m.CreateQuery(f"SELECT id, v FROM src_{index} INTO sink_{index}")
            )

        async def queries_running() -> bool:
            listed = await _ask_until(client, m.ListQueries())
            return all(q["current_state"] == "RUNNING" for q in listed)

        await _wait_for("not every query reached RUNNING", queries_running, 300)
        names = _sim_names(s.simulated_agents)
        await beats.send_many(m.RegisterWorker(name, capacity=0) for name in names)
        setup_s = time.monotonic() - began

        # --- load and kills ---------------------------------------------------------------------
        schedule = kill_schedule(s)
        run.t0, run.wall0 = time.monotonic(), time.time()
        heartbeats = asyncio.create_task(_send_heartbeats(run, beats, names))
        senders = asyncio.create_task(_send_requests(run, client, new_id().replace("-", "")))
        feeder = asyncio.create_task(_feed(run, sources))
        killer = asyncio.create_task(_kill_all(run, schedule))
        await asyncio.sleep(s.seconds)
        load_s = run.now_s()
        run.stopping = True
        await killer
        await feeder
        drain_began = time.monotonic()
        await senders
        # PostgreSQL up again (a restart that failed raises here); restarts measured.
        await asyncio.gather(*(t for t in run.background if t.get_name().startswith("pg")))
        await asyncio.wait(run.background, timeout=120)
        drain_s = time.monotonic() - drain_began

        # --- the end: every sink complete, every query RUNNING ---------------------------------
        sinks_began = time.monotonic()

        async def sinks_complete() -> bool:
            for index, count in run.fed.items():
                got = await asyncio.to_thread(_sink_rows, data, index)
                if any((i, 2 * i) not in got for i in range(1, count + 1)):
                    return False
            listed = await _ask_until(client, m.ListQueries())
            return all(q["current_state"] == "RUNNING" for q in listed)

        with contextlib.suppress(RuntimeError):
            await _wait_for("sinks incomplete", sinks_complete, s.sink_timeout, interval=2)
        sink_wait_s = time.monotonic() - sinks_began

        verify_began = time.monotonic()
        listed = await _ask_until(client, m.ListQueries())
        sink = await asyncio.to_thread(sink_figures, data, run.fed)
        try:
            await asyncio.to_thread(beats.flush_events, 120)
            unflushed = False
        except TimeoutError:
            unflushed = True
        catalog = await asyncio.to_thread(_catalog_figures, run)
        failed_tasks = await _failed_workflow_tasks(run)
        verify_s = time.monotonic() - verify_began
    finally:
        run.stopping = True
        if heartbeats is not None:
            heartbeats.cancel()
        for task in run.background:
            task.cancel()
        watcher.cancel()
        await asyncio.gather(watcher, *run.background, return_exceptions=True)
        await asyncio.to_thread(beats.close, 10)
        await asyncio.to_thread(client.close, 10)

    # --- figures ------------------------------------------------------------------------------
    acked = [r for r in run.requests if r.outcome == "ok"]
    failed = [r for r in run.requests if r.outcome.startswith("failed")]
    refused = [r for r in run.requests if r.outcome != "ok" and not r.outcome.startswith("failed")]
    present: set[str] = catalog["sources"]
    doubled = {r.name for r in refused if r.outcome == "ALREADY_EXISTS"} | {
        name for name, n in catalog["creates"].items() if n > 1
    }
    refused_applied = [r for r in refused if r.outcome != "ALREADY_EXISTS" and r.name in present]
    latencies = sorted(r.latency_s for r in acked if r.latency_s is not None)
    dead = dead_figures(run.kills, run.wall0, catalog["workers"])
    kills: dict[str, list[dict[str, Any]]] = {}
    for kill in run.kills:
        kills.setdefault(kill.target, []).append(kill.report())
    states = Counter(q["current_state"] for q in listed)
    figures: dict[str, Any] = {
        "seconds": s.seconds,
        "seed": s.seed,
        "requests_sent": len(run.requests),
        "requests_acked": len(acked),
        "requests_failed": len(failed),
        "requests_failed_but_applied": sum(r.name in present for r in failed),
        "requests_refused": dict(Counter(r.outcome for r in refused)),
        "sources_in_catalog": len(present),
        "lost": sum(r.name not in present for r in acked),
        "doubled": len(doubled),
        "changelog_applied_twice": catalog["applied_twice"],
        "refused_but_applied": len(refused_applied),
        "request_latency_s": {
            "p50": round(statistics.median(latencies), 3) if latencies else None,
            "p99": round(latencies[int(0.99 * (len(latencies) - 1))], 3) if latencies else None,
            "max": round(latencies[-1], 3) if latencies else None,
        },
        "simulated_agents": s.simulated_agents,
        "heartbeats_sent": run.heartbeats_sent,
        "heartbeats_outbox_full": run.heartbeats_outbox_full,
        "heartbeat_max_gap_s": round(run.heartbeat_max_gap_s, 2),
        "heartbeats_unflushed_at_end": unflushed,
        **dead,
        "worker_transitions": catalog["worker_actions"],
        "queries": s.queries,
        "queries_running_at_end": states.get("RUNNING", 0),
        "query_states_at_end": dict(states),
        "query_transitions": catalog["query_actions"],
        **sink,
        "kills": kills,
        "kills_total": sum(k.pid is not None for k in run.kills),
        "kills_missed": sum(k.pid is None for k in run.kills),
        "supervisor_failures": run.supervisor_failures,
        "failed_workflow_tasks": failed_tasks,
        "durations": {
            "setup_s": round(setup_s, 1),
            "load_s": round(load_s, 1),
            "request_drain_s": round(drain_s, 1),
            "sink_wait_s": round(sink_wait_s, 1),
            "verify_s": round(verify_s, 1),
        },
    }
    figures["ok"] = (
        all(
            figures[name] == 0
            for name in (
                "lost",
                "doubled",
                "changelog_applied_twice",
                "refused_but_applied",
                "healthy_agents_declared_dead",
                "sink_rows_lost",
                "sink_rows_doubled",
                "sink_rows_unexpected",
                "kills_missed",
            )
        )
        and figures["queries_running_at_end"] == s.queries
    )
    return figures


def run_chaos_bench(chaos: ChaosSettings | None = None) -> dict[str, Any]:
    """Run the benchmark (module docstring) and return its figures."""
    s = chaos or ChaosSettings()
    if s.queries and not s.agents:
        raise ValueError("queries need agents")
    s.kill_counts()  # refuse unknown targets before starting anything
    began = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="streamctl-chaos-"))
    state_dir = root / "stack"
    postgres = PrivatePostgres()
    result: dict[str, Any]
    try:
        postgres.start()
        supervisor = Supervisor(
            state_dir,
            postgres.url,
            free_port(),
            free_port(),
            CoordinatorConfig(),
            s.coordinators,
            s.agents,
            s.master,
            s.capacity,
            (root / "data",),
        )
        run = _Run(s, root, supervisor, postgres)
        try:
            result = asyncio.run(_chaos(run))
        finally:
            supervisor.stop()
            # What outlived its stop: orphans of killed processes (process pools, JVMs).
            leftovers = [_command_name(pid) for pid in _processes_of_run(state_dir)]
        result["processes_left_after_stop"] = dict(Counter(leftovers))
    except Exception as error:
        result = {"ok": False, "error": f"{type(error).__name__}: {error}"}
    finally:
        if state_dir.exists():
            _kill_run_processes(state_dir)
        postgres.stop()
        with contextlib.suppress(OSError):
            shutil.copy(postgres.log, root / "postgresql.log")
        postgres.remove()
    result.setdefault("durations", {})["total_s"] = round(time.monotonic() - began, 1)
    if result["ok"] and not s.keep_state:
        shutil.rmtree(root, ignore_errors=True)
    else:
        result["state_dir"] = str(root)
    return result
