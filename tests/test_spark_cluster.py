"""Agents beyond one process: the end-to-end scenario with both agents on a real Spark
standalone cluster (a master and a worker started from the pyspark wheel's ``spark-class`` on
loopback, each agent one application with one core), and with both agents on a Spark Connect
server (each agent its own session there)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark
import pytest
from test_queries_e2e import create_run_stop_and_drop, deploy

from streamctl.local_ports import free_port, port_open

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SPARK_HOME = Path(pyspark.__file__).parent


def _master_state(ui_port: int) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as reply:
            state: dict[str, Any] = json.load(reply)
            return state
    except OSError:
        return {}


def _alive_workers(ui_port: int) -> int:
    workers = _master_state(ui_port).get("workers", [])
    return sum(1 for worker in workers if worker.get("state") == "ALIVE")


@dataclass
class Cluster:
    master_url: str
    ui_port: int

    def application_names(self) -> list[str]:
        return sorted(app["name"] for app in _master_state(self.ui_port).get("activeapps", []))


@pytest.fixture
def standalone_cluster(tmp_path: Path) -> Iterator[Cluster]:
    """``spark://127.0.0.1:<port>`` of a master with one two-core worker."""
    port, ui_port, worker_ui = free_port(), free_port(), free_port()
    env = {
        **os.environ,
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp_path / "spark-logs"),
        "SPARK_WORKER_DIR": str(tmp_path / "spark-work"),
    }
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    master_url = f"spark://127.0.0.1:{port}"
    processes = []
    with open(tmp_path / "master.log", "ab") as master_log:
        processes.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(ui_port),
                ],
                env=env,
                stdout=master_log,
                stderr=subprocess.STDOUT,
            )
        )
    with open(tmp_path / "worker.log", "ab") as worker_log:
        processes.append(
            subprocess.Popen(
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    master_url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "2",
                    "--memory",
                    "3g",
                    "--webui-port",
                    str(worker_ui),
                ],
                env=env,
                stdout=worker_log,
                stderr=subprocess.STDOUT,
            )
        )
    try:
        deadline = time.monotonic() + 120
        while _alive_workers(ui_port) < 1:
            assert time.monotonic() < deadline, "the standalone worker did not register"
            time.sleep(0.5)
        yield Cluster(master_url, ui_port)
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()


async def test_end_to_end_on_a_standalone_cluster(
    standalone_cluster, start_coordinator, sqlite_url, tmp_path, spark
):
    # Two applications share the worker's two cores: one core each.
    agent_env = {
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_SUBMIT_ARGS": "--conf spark.cores.max=1 --conf spark.executor.memory=1g "
        "pyspark-shell",
    }
    async with deploy(
        start_coordinator, sqlite_url, tmp_path, standalone_cluster.master_url, agent_env
    ) as deployment:
        # Each agent is an application of the cluster, not a local session.
        assert standalone_cluster.application_names() == sorted(
            f"streamctl-agent-{name}" for name in deployment.agents
        )
        await create_run_stop_and_drop(deployment, spark)


@pytest.fixture
def connect_server(tmp_path: Path) -> Iterator[str]:
    """``sc://127.0.0.1:<port>`` of a Spark Connect server (``local[2]``) from the wheel."""
    port = free_port()
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1"}
    with open(tmp_path / "connect.log", "ab") as log:
        server = subprocess.Popen(
            [
                str(SPARK_HOME / "bin" / "spark-submit"),
                "--class",
                "org.apache.spark.sql.connect.service.SparkConnectServer",
                "--master",
                "local[2]",
                "--name",
                "streamctl-test-connect",
                "--conf",
                f"spark.connect.grpc.binding.port={port}",
                "--conf",
                f"spark.pyspark.python={sys.executable}",
                "--conf",
                "spark.ui.enabled=false",
                "--conf",
                "spark.sql.session.timeZone=UTC",
                "spark-internal",
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 120
        while not port_open(port):
            assert server.poll() is None, "the Spark Connect server exited"
            assert time.monotonic() < deadline, "the Spark Connect server did not listen"
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()


async def test_end_to_end_through_spark_connect(
    connect_server, start_coordinator, sqlite_url, tmp_path, spark
):
    async with deploy(start_coordinator, sqlite_url, tmp_path, connect_server) as deployment:
        await create_run_stop_and_drop(deployment, spark)
