"""A PostgreSQL cluster of the benchmark's own (``initdb``/``pg_ctl`` in a temporary directory
on a free port, trust authentication, run as the ``postgres`` user when the benchmark runs as
root), which ``streamctl bench chaos`` kills and restarts; the machine's own server is never
touched."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg

from streamctl.local_ports import free_port
from streamctl.worker.supervisor import pid_alive

KILLS_PER_5_MIN = {
    "coordinator_worker": 4,
    "temporal": 2,
    "postgres": 2,
    "agent": 2,
    "spark_jvm": 2,
}


def postgres_bin() -> Path:
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
        self.bin = postgres_bin()
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
