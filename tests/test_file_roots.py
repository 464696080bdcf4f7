"""File sources and sinks confined to the file roots, in the pass, on both catalogs: catalog
objects made by typed requests and by statements name only paths under the files directory or
``STREAMCTL_FILE_ROOTS``; relative paths resolve into the files directory, ``..`` and symbolic
links do not lead out, and what is stored is the resolved absolute path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from test_pass_activity import codes, run_pass

from streamctl.activities.pass_activity import CatalogWork
from streamctl.planner.options import SINK_OPTIONS, SOURCE_OPTIONS
from streamctl.protocol import messages as m

pytestmark = pytest.mark.quick

COLUMNS = (m.ColumnSpec("id", "UINT64", False),)


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The files directory; ``tmp_path/shared`` is the one other root (this replaces the
    session's temp-dir root, so paths elsewhere under ``tmp_path`` are outside)."""
    directory = tmp_path / "files"
    monkeypatch.setenv("STREAMCTL_FILES_DIR", str(directory))
    monkeypatch.setenv("STREAMCTL_FILE_ROOTS", str(tmp_path / "shared"))
    return directory


def generator(schema: str, **extra: Any) -> dict[str, Any]:
    return {"generator_schema": schema, "stop_when": "ALL", **extra}


def test_paths_outside_the_roots_are_refused_by_requests_and_statements(catalog_url, files):
    activities = CatalogWork(catalog_url)
    elsewhere = files.parent / "elsewhere"
    answers = run_pass(
        activities,
        1,
        [
            m.CreateLogicalSource("s", COLUMNS),
            m.CreatePhysicalSource("s", "FILE", {"file_path": "/etc/passwd"}),
            m.CreatePhysicalSource("s", "FILE", {"file_path": str(elsewhere), "format": "JSON"}),
            m.CreatePhysicalSource(
                "s", "File", {"SOURCE.FILE_PATH": "/etc", "PARSER.TYPE": "PARQUET"}
            ),
            m.CreateSink("o", COLUMNS, "FILE", {"file_path": "/etc/cron.d"}),
            m.CreateSink("c", COLUMNS, "CHECKSUM", {"file_path": str(elsewhere)}),
            m.CreatePhysicalSource("s", "GENERATOR", generator("WORDLIST /etc/passwd")),
            m.CreatePhysicalSource(
                "s", "GENERATOR", generator("WORDLIST w.txt", data_dir=str(elsewhere))
            ),
            m.ExecuteStatement(
                "CREATE PHYSICAL SOURCE FOR s TYPE File SET('/etc/passwd' AS `SOURCE`.FILE_PATH)"
            ),
            m.ExecuteStatement(
                "CREATE SINK k(id UINT64 NOT NULL) TYPE File SET('/etc' AS `SINK`.FILE_PATH)"
            ),
            m.ListPhysicalSources(),
            m.ListSinks(),
        ],
    )
    assert codes(answers) == ["ok"] + ["INVALID_REQUEST"] * 9 + ["ok", "ok"]
    messages = [answer["error_message"] for answer in answers[1:10]]
    assert messages[0].startswith("the FILE source's path '/etc/passwd' is outside")
    assert f"the FILE source's path {str(elsewhere)!r}" in messages[1]
    assert "the FILE sink 'o': its path '/etc/cron.d' is outside" in messages[3]
    assert "the CHECKSUM sink 'c': its path" in messages[4]
    assert "WORDLIST file '/etc/passwd'" in messages[5]
    assert f"data_dir {str(elsewhere)!r}" in messages[6]
    assert messages[7].startswith("the FILE source's path '/etc/passwd' is outside")
    assert "the FILE sink 'K': its path '/etc' is outside" in messages[8]
    for message in messages:  # every refusal names the allowed directories and the way out
        assert str(files) in message and str(files.parent / "shared") in message, message
        assert "STREAMCTL_FILE_ROOTS" in message
    assert [answer["result"] for answer in answers[10:]] == [[], []]


def test_relative_paths_resolve_into_the_files_directory(catalog_url, files):
    activities = CatalogWork(catalog_url)
    answers = run_pass(
        activities,
        1,
        [
            m.CreateLogicalSource("s", COLUMNS),
            m.CreatePhysicalSource("s", "FILE", {"file_path": "in/a.csv"}),
            m.CreateSink("o", COLUMNS, "FILE", {"file_path": "out"}),
            m.CreatePhysicalSource(
                "s", "GENERATOR", generator("SEQUENCE UINT64 0 3 1, WORDLIST words/w.txt")
            ),
            m.ExecuteStatement(
                "CREATE PHYSICAL SOURCE FOR s TYPE File SET('./in/./b.csv' AS `SOURCE`.FILE_PATH);"
                "CREATE SINK k(id UINT64 NOT NULL) TYPE Checksum SET('sums' AS `SINK`.FILE_PATH)"
            ),
            m.CreateSink("p", COLUMNS, "FILE"),  # no path: the agent's own default
        ],
    )
    assert codes(answers) == ["ok"] * 6
    assert answers[1]["result"]["config"]["file_path"] == str(files / "in" / "a.csv")
    assert answers[2]["result"]["config"]["file_path"] == str(files / "out")
    assert answers[3]["result"]["config"]["generator_schema"] == (
        f"SEQUENCE UINT64 0 3 1, WORDLIST {files / 'words' / 'w.txt'}"
    )
    source, sink = (s["result"] for s in answers[4]["result"]["statements"])
    assert source["config"]["file_path"] == str(files / "in" / "b.csv")
    assert sink["config"]["file_path"] == str(files / "sums")
    assert answers[5]["result"]["config"]["file_path"] is None
    [stored] = run_pass(activities, 2, [m.GetPhysicalSource(answers[1]["result"]["id"])])
    assert stored["result"]["config"]["file_path"] == str(files / "in" / "a.csv")


def test_dot_dot_and_symbolic_links_do_not_lead_out(catalog_url, files, tmp_path: Path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    files.mkdir()
    (files / "link").symlink_to(outside)
    (files / "inner").symlink_to(files / "real")
    activities = CatalogWork(catalog_url)
    answers = run_pass(
        activities,
        1,
        [
            m.CreateLogicalSource("s", COLUMNS),
            m.CreatePhysicalSource("s", "FILE", {"file_path": "../elsewhere/a.csv"}),
            m.CreatePhysicalSource("s", "FILE", {"file_path": f"{files}/in/../../elsewhere"}),
            m.CreateSink("o", COLUMNS, "FILE", {"file_path": "link/out"}),
            m.CreatePhysicalSource("s", "GENERATOR", generator("WORDLIST ../../w.txt")),
            m.CreatePhysicalSource("s", "FILE", {"file_path": "in/../a.csv"}),  # stays inside
            m.CreateSink("i", COLUMNS, "FILE", {"file_path": "inner/out"}),  # a link inside
        ],
    )
    assert codes(answers) == ["ok"] + ["INVALID_REQUEST"] * 4 + ["ok", "ok"]
    assert f"(resolved: {outside / 'a.csv'})" in answers[1]["error_message"]
    assert f"(resolved: {outside / 'out'})" in answers[3]["error_message"]
    assert answers[5]["result"]["config"]["file_path"] == str(files / "a.csv")
    assert answers[6]["result"]["config"]["file_path"] == str(files / "real" / "out")


def test_a_configured_root_is_allowed(catalog_url, files, tmp_path: Path):
    shared = tmp_path / "shared"
    activities = CatalogWork(catalog_url)
    answers = run_pass(
        activities,
        1,
        [
            m.CreateLogicalSource("s", COLUMNS),
            m.CreatePhysicalSource("s", "FILE", {"file_path": str(shared / "in")}),
            m.CreatePhysicalSource(
                "s", "GENERATOR", generator("WORDLIST w.txt", data_dir=str(shared / "words"))
            ),
            m.ExecuteStatement(
                f"CREATE SINK k(id UINT64 NOT NULL) TYPE File SET('{shared}' AS `SINK`.FILE_PATH)"
            ),
        ],
    )
    assert codes(answers) == ["ok"] * 4
    assert answers[1]["result"]["config"]["file_path"] == str(shared / "in")
    generated = answers[2]["result"]["config"]
    assert generated["data_dir"] == str(shared / "words")
    assert generated["generator_schema"] == f"WORDLIST {shared / 'words' / 'w.txt'}"
    [sink] = answers[3]["result"]["statements"]
    assert sink["result"]["config"]["file_path"] == str(shared)


def test_every_path_like_option_is_confined_or_deliberately_not():
    """A new option naming a file must be marked ``path`` (or join the exempt list here)."""
    not_confined = {"ssl_truststore_location", "ssl_keystore_location"}  # Kafka TLS material
    for specs in (*SOURCE_OPTIONS.values(), *SINK_OPTIONS.values()):
        for spec in specs:
            names_a_path = "path" in spec.allowed or spec.key.endswith(("_path", "_dir"))
            if names_a_path and spec.key not in not_confined:
                assert spec.path, spec.key
            if spec.path:
                assert names_a_path, spec.key
