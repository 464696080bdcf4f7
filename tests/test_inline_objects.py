"""Inline sources and sinks in the pass, on both catalogs: ``FROM File(...)`` and ``INTO
File()`` become catalog objects owned by their query, confined to the file roots, dropped with
the query and never on their own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_pass_activity import codes, run_pass

from streamctl.activities.pass_activity import CatalogWork
from streamctl.planner.plan import InlineScan, QueryPlan, Scan, walk
from streamctl.protocol import messages as m

pytestmark = pytest.mark.quick

SCHEMA = "SCHEMA(id UINT64 NOT NULL, amount INT64 NOT NULL) AS `SOURCE`.`SCHEMA`"


def inline_query(path: str, sink: str = "File()", extra: str = "") -> str:
    return (
        f"SELECT id, amount FROM File('{path}' AS `SOURCE`.FILE_PATH, {extra}{SCHEMA}) "
        f"WHERE amount > 1 INTO {sink}"
    )


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "files"
    monkeypatch.setenv("STREAMCTL_FILES_DIR", str(directory))
    monkeypatch.setenv("STREAMCTL_FILE_ROOTS", str(tmp_path / "shared"))
    return directory


def names(answer: dict[str, Any]) -> list[str]:
    return [row["name"] for row in answer["result"]]


def test_an_inline_source_and_sink_become_catalog_objects_of_the_query(catalog_url, files):
    activities = CatalogWork(catalog_url)
    [created] = run_pass(activities, 1, [m.CreateQuery(inline_query("in/a.csv"))])
    assert created["ok"], created
    query = created["result"]
    assert query["sink"] == f"query{query['id']}.sink"
    [got, sources, physical, sink] = run_pass(
        activities,
        2,
        [
            m.GetQuery(query["id"]),
            m.ListLogicalSources(),
            m.ListPhysicalSources(),
            m.GetSink(query["sink"]),
        ],
    )
    source = f"query{query['id']}.source1"
    assert got["result"]["sources"] == [source]
    scans = walk(QueryPlan.from_json_text(got["result"]["plan"]).root)
    assert [op.source for op in scans if isinstance(op, Scan)] == [source]
    assert not any(isinstance(op, InlineScan) for op in scans)
    assert names(sources) == [source]
    assert physical["result"][0]["config"]["file_path"] == str(files / "in" / "a.csv")
    assert sink["result"]["type"] == "FILE"
    assert sink["result"]["config"]["file_path"] == str(files / "sinks" / query["sink"])
    assert [c["name"] for c in sink["result"]["schema"]] == ["ID", "AMOUNT"]

    refused = run_pass(
        activities, 3, [m.DropSink(query["sink"], cascade=True), m.DropLogicalSource(source)]
    )
    assert codes(refused) == ["INVALID_REQUEST", "INVALID_REQUEST"]
    assert f"drop query {query['id']} instead" in refused[0]["error_message"]

    [dropped] = run_pass(activities, 4, [m.DropQuery(query["id"])])
    assert dropped["ok"], dropped
    # Passes run sources and sinks before queries: list in the next pass.
    [sources_after, sinks_after, physical_after] = run_pass(
        activities, 5, [m.ListLogicalSources(), m.ListSinks(), m.ListPhysicalSources()]
    )
    assert (sources_after["result"], sinks_after["result"], physical_after["result"]) == (
        [],
        [],
        [],
    )


def test_paths_outside_the_file_roots_are_refused_and_create_nothing(catalog_url, files):
    activities = CatalogWork(catalog_url)
    outside = files.parent / "elsewhere" / "a.csv"
    answers = run_pass(
        activities,
        1,
        [
            m.CreateQuery(inline_query(str(outside))),
            m.CreateQuery(inline_query("../escape.csv")),
            m.CreateQuery(inline_query("in/a.csv", "File('/tmp/out' AS `SINK`.FILE_PATH)")),
            m.CreateQuery(inline_query("in/a.csv", extra="'nowhere' AS `SOURCE`.`HOST`, ")),
            m.ListLogicalSources(),
            m.ListSinks(),
            m.ListQueries(),
        ],
    )
    assert codes(answers) == ["INVALID_STATEMENT"] * 3 + ["UNKNOWN_WORKER"] + ["ok"] * 3
    assert "line 1, column 24: the inline FILE source's path" in answers[0]["error_message"]
    assert "STREAMCTL_FILE_ROOTS" in answers[1]["error_message"]
    assert "inline FILE sink's path '/tmp/out'" in answers[2]["error_message"]
    assert "worker 'nowhere'" in answers[3]["error_message"]
    assert [a["result"] for a in answers[4:]] == [[], [], []]
    [allowed] = run_pass(
        activities, 2, [m.CreateQuery(inline_query(str(files.parent / "shared" / "b.csv")))]
    )
    assert allowed["ok"], allowed
    assert allowed["result"]["id"] == 1  # the refused queries took no id


def test_statements_mix_inline_and_catalog_objects(catalog_url, files):
    activities = CatalogWork(catalog_url)
    script = (
        "CREATE SINK kept(id UINT64 NOT NULL, amount INT64 NOT NULL) TYPE File;\n"
        f"{inline_query('a.csv', 'kept')};\n"
        f"{inline_query('b.csv', 'Checksum()')};\n"
        "SHOW SINKS;"
    )
    [answer] = run_pass(activities, 1, [m.ExecuteStatement(script)])
    assert answer["ok"], answer
    first, second = (a["result"] for a in answer["result"]["statements"][1:3])
    shown = [row["name"] for row in answer["result"]["statements"][3]["result"]["rows"]]
    assert shown == ["KEPT", f"query{second['id']}.sink"]
    # DROP ... WHERE matching both kinds drops the catalog sink (and its query) only.
    [dropped] = run_pass(
        activities, 2, [m.ExecuteStatement("DROP SINK WHERE created_version = 1 CASCADE")]
    )
    assert dropped["ok"], dropped
    result = dropped["result"]["statements"][0]["result"]
    assert (result["sinks"], result["queries"]) == (["KEPT"], [first["id"]])
    [left] = run_pass(activities, 3, [m.ListSinks()])
    assert names(left) == [f"query{second['id']}.sink"]
