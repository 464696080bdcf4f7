"""Listings longer than one answer, end to end through Temporal: ``streamctl sql "SHOW
QUERIES"`` (the real CLI process) and the client's ``list_all`` page through every query, and a
whole unpaged listing too large for one answer is refused ``TOO_LARGE`` naming the way out.

The queries stay ``CREATED`` (no agent runs them); a long statement per query makes each
listing item about 1.5 KB, so 600 of them (about 0.9 MB) need two pages (500 a page) and exceed what
one answer may carry (``MAX_RESPONSE_BYTES``).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from streamctl.client.coordinator_errors import CoordinatorError
from streamctl.limits import MAX_RESPONSE_BYTES
from streamctl.protocol import messages as m

QUERIES = 600
SCHEMA = (m.ColumnSpec("id", "UINT64", False), m.ColumnSpec("v", "INT64", False))
PADDING = " AND ".join(f"v != {n}" for n in range(110))  # ~1.3 KB of statement text


async def test_show_queries_and_list_all_page_through_every_query(
    start_coordinator, sqlite_url: str, tmp_path: Path
) -> None:
    coordinator = await start_coordinator(sqlite_url)
    client = await coordinator.client().connect()
    try:
        await client.ask(m.CreateLogicalSource("src", SCHEMA))
        await client.ask(m.CreatePhysicalSource("src", "FILE", {"file_path": "src.csv"}))
        await client.ask(m.CreateSink("out", SCHEMA, "Print"))
        created: list[int] = []
        for start in range(0, QUERIES, 500):
            statements = [
                m.CreateQuery(f"SELECT id, v FROM src WHERE {PADDING} AND v != -{n} INTO out")
                for n in range(start, min(QUERIES, start + 500))
            ]
            responses = await client.ask_many(statements)
            assert all(r.ok for r in responses), [r for r in responses if not r.ok][:1]
            created.extend(int(r.result["id"]) for r in responses)

        # the whole listing does not fit one answer: refused, naming the way out
        try:
            await client.ask(m.ListQueries())
            raise AssertionError("an unpaged listing of ~0.9 MB was answered")
        except CoordinatorError as error:
            assert error.code == "TOO_LARGE" and "pages" in error.message
            assert str(MAX_RESPONSE_BYTES) in error.message

        listed = await client.list_all(m.ListQueries())
        assert [q["id"] for q in listed] == sorted(created)

        shown = await asyncio.to_thread(
            subprocess.run,
            [
                sys.executable, "-m", "streamctl.cli", "sql", "SHOW QUERIES", "--json",
                "--address", coordinator.address, "--workflow-id", coordinator.workflow_id,
                "--state-dir", str(tmp_path / "state"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        answer = json.loads(shown.stdout)
        [show] = answer["statements"]
        assert [row["id"] for row in show["result"]["rows"]] == sorted(created)
        assert show["result"]["next"] is None
    finally:
        await asyncio.to_thread(client.close)
