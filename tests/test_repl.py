"""``streamctl repl`` as a person uses it, in a real terminal (a pty driven by pexpect): create a
source and a sink, run a query on a Spark agent, SHOW QUERIES, drop it, a bad statement, quit."""

from __future__ import annotations

import asyncio
import sys
import uuid
from pathlib import Path

import pexpect
import pytest
from conftest import wait_until
from test_agent_process import spawn_agent

from streamctl.protocol import messages as m

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PROMPT = "streamctl>"


async def test_a_person_runs_a_query_in_the_repl(start_coordinator, sqlite_url, tmp_path: Path):
    coordinator = await start_coordinator(sqlite_url)
    client = await coordinator.client().connect()
    agent_name = f"r{uuid.uuid4().hex[:6]}"
    agent = spawn_agent(coordinator.address, coordinator.workflow_id, agent_name, tmp_path)
    try:

        async def agent_alive() -> bool:
            response = await client.ask_response(m.GetWorker(agent_name))
            return response.ok and response.result["state"] == "ALIVE"

        await wait_until(agent_alive, timeout=120)
        await asyncio.to_thread(drive_repl, coordinator.address, coordinator.workflow_id, tmp_path)
        assert await client.ask(m.ListQueries()) == []  # dropped in the session
    finally:
        agent.terminate()
        agent.wait(timeout=60)
        await asyncio.to_thread(client.close)


def drive_repl(address: str, workflow_id: str, tmp_path: Path) -> None:
    repl = pexpect.spawn(
        sys.executable,
        ["-m", "streamctl.cli", "repl", "--address", address,
         "--workflow-id", workflow_id, "--state-dir", str(tmp_path / "state")],
        cwd=str(tmp_path),
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 160),
        env={"TERM": "xterm", "PATH": "/usr/bin:/bin", "PROMPT_TOOLKIT_NO_CPR": "1"},
    )  # fmt: skip
    transcript = tmp_path / "repl.log"
    repl.logfile_read = transcript.open("w")
    try:
        repl.expect_exact(PROMPT)
        # A statement over several lines runs at the ';'.
        repl.sendline("CREATE LOGICAL SOURCE ticks(id UINT64 NOT NULL,")
        repl.expect_exact("...>")
        repl.sendline("  v UINT64 NOT NULL);")
        repl.expect_exact("CREATE LOGICAL SOURCE TICKS")
        repl.expect_exact(PROMPT)
        repl.sendline(
            "CREATE PHYSICAL SOURCE FOR ticks TYPE Generator SET("
            "'SEQUENCE UINT64 0 1000000 1, SEQUENCE UINT64 0 1000000 3' AS "
            "`SOURCE`.GENERATOR_SCHEMA, 'NONE' AS `SOURCE`.STOP_GENERATOR_WHEN_SEQUENCE_FINISHES, "
            "'emit_rate 10' AS `SOURCE`.GENERATOR_RATE_CONFIG);"
        )
        repl.expect_exact("CREATE PHYSICAL SOURCE 1")
        repl.sendline("CREATE SINK nowhere(id UINT64 NOT NULL, v UINT64 NOT NULL) TYPE Void;")
        repl.expect_exact("CREATE SINK NOWHERE")
        # Tab completes catalog names: "now" + Tab becomes NOWHERE.
        repl.send("SELECT id, v FROM ticks WHERE v > id INTO now\t")
        repl.expect_exact("NOWHERE")
        repl.sendline(";")
        repl.expect(r"query (\d+) (CREATED|STARTING)")
        query_id = repl.match.group(1)
        for _ in range(60):
            repl.expect_exact(PROMPT)
            repl.sendline("SHOW QUERIES;")
            index = repl.expect(["RUNNING", "STARTING", "CREATED"])
            if index == 0:
                break
        else:
            raise AssertionError("the query did not reach RUNNING")
        repl.expect_exact(PROMPT)
        repl.sendline(f"DROP QUERY {query_id};")
        repl.expect_exact(f"dropped queries {query_id}")
        repl.expect_exact(PROMPT)
        repl.sendline("SELECT nothing FROM ticks INTO nowhere;")
        repl.expect_exact("UNKNOWN_COLUMN")
        repl.expect_exact("line 1, column 8")
        repl.expect_exact(PROMPT)  # the session goes on after an error
        repl.sendline("quit")
        repl.expect(pexpect.EOF)
    finally:
        repl.close()
        repl.logfile_read.close()
    assert repl.exitstatus == 1  # the last statement was refused
