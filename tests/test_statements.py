"""``ExecuteStatement`` in the pass, on both catalogs: NebulaStream statements run in order
through the same handlers as the typed requests; errors point at line and column of the whole
text; the first failing statement stops the script."""

from __future__ import annotations

from typing import Any

import pytest
from test_pass_activity import run_pass

from streamctl.activities.pass_activity import CatalogWork
from streamctl.protocol import messages as m

pytestmark = pytest.mark.quick

SCRIPT = """
CREATE LOGICAL SOURCE orders(id UINT64 NOT NULL, amount INT64 NOT NULL, ts UINT64 NOT NULL);
CREATE PHYSICAL SOURCE FOR orders TYPE File
    SET('data/orders/' AS `SOURCE`.FILE_PATH, '|' AS PARSER.FIELD_DELIMITER);
CREATE SINK big(id UINT64 NOT NULL, amount INT64 NOT NULL) TYPE File
    SET('out/big.csv' AS `SINK`.FILE_PATH, 'CSV' AS `SINK`.INPUT_FORMAT);
CREATE WORKER w1 SET(2 AS CAPACITY);
SELECT id, amount FROM orders WHERE amount > 10 INTO big;
"""


def execute(activities: CatalogWork, pass_no: int, text: str) -> dict[str, Any]:
    [answer] = run_pass(activities, pass_no, [m.ExecuteStatement(text)])
    return answer


def test_a_script_creates_everything_in_order_and_show_lists_it(catalog_url):
    activities = CatalogWork(catalog_url)
    answer = execute(activities, 1, SCRIPT)
    assert answer["ok"], answer
    statements = answer["result"]["statements"]
    assert [(s["statement"], s["line"]) for s in statements] == [
        ("CREATE LOGICAL SOURCE", 2),
        ("CREATE PHYSICAL SOURCE", 3),
        ("CREATE SINK", 5),
        ("CREATE WORKER", 7),
        ("SELECT", 8),
    ]
    physical = statements[1]["result"]
    assert (physical["logical_source"], physical["config"]["field_delimiter"]) == ("ORDERS", "|")
    assert statements[3]["result"]["state"] == "UNREGISTERED"
    query = statements[4]["result"]
    assert query["statement"] == "SELECT id, amount FROM orders WHERE amount > 10 INTO big"
    assert query["current_state"] == "CREATED"  # w1 is declared, not registered: no agent yet

    # The declared worker's agent registers: the waiting query is placed on it.
    run_pass(activities, 2, [], events=(m.RegisterWorker("W1", capacity=2),))
    shown = execute(
        activities,
        3,
        "SHOW QUERIES WHERE state = 'starting' FORMAT JSON; SHOW WORKERS; "
        "SHOW PHYSICAL SOURCES FOR orders",
    )
    assert shown["ok"], shown
    queries, workers, physical_sources = (s["result"] for s in shown["result"]["statements"])
    assert queries["format"] == "JSON"
    assert [(q["id"], q["worker"]) for q in queries["rows"]] == [(query["id"], "W1")]
    assert [(w["name"], w["state"], w["capacity"]) for w in workers["rows"]] == [("W1", "ALIVE", 2)]
    assert [p["id"] for p in physical_sources["rows"]] == [physical["id"]]

    explained = execute(activities, 4, "EXPLAIN SELECT id, amount FROM orders INTO big")
    assert explained["ok"], explained
    [explain] = explained["result"]["statements"]
    assert explain["result"]["placement"] == "W1" and explain["result"]["sources"] == ["ORDERS"]

    # DROP ... WHERE drops every match; CASCADE takes dependents along.
    dropped = execute(
        activities, 5, f"DROP QUERY WHERE id = {query['id']}; DROP LOGICAL SOURCE orders CASCADE"
    )
    assert dropped["ok"], dropped
    first, second = (s["result"] for s in dropped["result"]["statements"])
    assert first == {"queries": [query["id"]]}
    assert second["logical_sources"] == ["ORDERS"] and second["physical_sources"] == [
        physical["id"]
    ]
    [listed] = run_pass(activities, 6, [m.ListQueries()])
    assert listed["result"] == []


def test_errors_point_into_the_whole_text_and_stop_the_script(catalog_url):
    activities = CatalogWork(catalog_url)
    assert execute(activities, 1, SCRIPT)["ok"]

    syntax = execute(activities, 2, "SHOW SINKS;\nCREATE SINK x(id UINT64) TYPE;")
    assert (syntax["ok"], syntax["error_code"]) == (False, "SYNTAX_ERROR")
    assert "line 2" in syntax["error_message"]

    unknown_column = execute(
        activities,
        3,
        "CREATE SINK small(id UINT64 NOT NULL) TYPE Void;\n\nSELECT price FROM orders INTO small;",
    )
    assert unknown_column["error_code"] == "UNKNOWN_COLUMN"
    message = unknown_column["error_message"]
    assert message.startswith("statement 2 of 2 failed (statements 1-1 before it were applied")
    assert "line 3, column 8: unknown column 'PRICE'" in message
    # the statement before the failing one stays applied
    [sink] = run_pass(activities, 4, [m.GetSink("SMALL")])
    assert sink["ok"]

    answers = {
        "SHOW QUERIES WHERE colour = 'red'": ("INVALID_STATEMENT", "no attribute 'colour'"),
        "DROP SINK WHERE name = 'nothing'": ("NOT_FOUND", "no sink has name = 'nothing'"),
        "DROP SINK big": ("HAS_DEPENDENTS", "drop them first or ask for CASCADE"),
        "CREATE WORKER w1": ("ALREADY_EXISTS", "worker 'W1' already exists"),
        "CREATE WORKER w2 SET(-1 AS CAPACITY)": ("INVALID_STATEMENT", "capacity"),
        "CREATE WORKER 'host:9090'": ("INVALID_NAME", "host:9090"),
        "SELECT id FROM File('/etc/passwd' AS `SOURCE`.FILE_PATH) INTO big": (
            "INVALID_STATEMENT",
            "line 1, column 16",
        ),
        "  ;  ": ("INVALID_REQUEST", "no statement"),
    }
    for number, (text, (code, fragment)) in enumerate(answers.items(), start=5):
        answer = execute(activities, number, text)
        assert (answer["ok"], answer["error_code"]) == (False, code), (text, answer)
        assert fragment in answer["error_message"], (text, answer["error_message"])


def test_a_declared_worker_is_dropped_with_its_pinned_sources_only_on_cascade(catalog_url):
    activities = CatalogWork(catalog_url)
    created = execute(
        activities,
        1,
        "CREATE WORKER edge; CREATE LOGICAL SOURCE s(id UINT64);"
        "CREATE PHYSICAL SOURCE FOR s TYPE File SET('d' AS `SOURCE`.FILE_PATH, 'EDGE' AS WORKER)",
    )
    assert created["ok"], created
    assert created["result"]["statements"][2]["result"]["worker"] == "EDGE"
    refused = execute(activities, 2, "DROP WORKER edge")
    assert refused["error_code"] == "HAS_DEPENDENTS"
    dropped = execute(activities, 3, "DROP WORKER edge CASCADE")
    assert dropped["ok"], dropped
    assert dropped["result"]["statements"][0]["result"]["workers"] == ["EDGE"]
    run_pass(activities, 4, [], events=(m.RegisterWorker("alive"),))
    serving = execute(activities, 5, "DROP WORKER WHERE name = 'alive'")
    assert (
        serving["error_code"] == "HAS_DEPENDENTS" and "stop its agent" in serving["error_message"]
    )


def test_every_scalar_attribute_of_a_listing_can_be_filtered(catalog_url):
    from streamctl.domain.statements import FILTER_ATTRIBUTES, SHOW_LISTINGS

    activities = CatalogWork(catalog_url)
    run_pass(activities, 1, [], events=(m.RegisterWorker("w1"),))
    assert execute(activities, 2, SCRIPT)["ok"]
    for pass_no, (subject, listing) in enumerate(SHOW_LISTINGS.items(), start=3):
        [answer] = run_pass(activities, pass_no, [listing])
        row = answer["result"][0]
        mappings = {"statistics"}  # None until the query reports, then a mapping
        scalar = {k for k, v in row.items() if not isinstance(v, dict | list)} - mappings
        assert scalar == FILTER_ATTRIBUTES[subject], subject
