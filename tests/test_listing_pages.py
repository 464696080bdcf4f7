"""Paged listings (``List*`` with ``limit``/``after``, ``SHOW`` with ``ExecuteStatement.limit``)
on both catalogs, as the protocol in :mod:`streamctl.protocol.messages` states it:

* walking the pages from the first to the last answers every object that exists throughout
  the walk exactly once, in key order, also when objects are created and dropped between the
  pages and inside the pass that answers a page (the pass sees its own changes);
* a page never holds more than ``limit`` items, nor more than ``MAX_PAGE_BYTES`` of them;
* a bad ``limit`` or cursor is refused with ``INVALID_REQUEST`` and changes nothing.
"""

from __future__ import annotations

import contextlib
import itertools
import string
from operator import itemgetter
from typing import Any

import psycopg
import pytest
from conftest import fresh_pg_database
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_pass_activity import run_pass

from streamctl.activities.pass_activity import CatalogWork
from streamctl.client import paging
from streamctl.client.paging import complete_show_pages
from streamctl.domain import listing, passes
from streamctl.limits import MAX_PAGE_ROWS
from streamctl.protocol import messages as m

SCHEMA = (m.ColumnSpec("id", "UINT64", False),)
_passes = itertools.count(1)

# Names whose code-point order differs from a natural-language collation's: case, '_', '$'.
names = st.text(alphabet=string.ascii_letters + "_", min_size=1, max_size=3).map(
    lambda tail: "n" + tail
) | st.sampled_from(["A", "a", "B", "b", "_", "Z_", "Z$", "za", "ZA", "a_b", "aB", "a0"])


def _ok(answer: dict[str, Any]) -> Any:
    assert answer["ok"], answer
    return answer["result"]


def _all_sources(activities: CatalogWork) -> set[str]:
    [answer] = run_pass(activities, next(_passes), [m.ListLogicalSources()])
    return {row["name"] for row in _ok(answer)}


@pytest.mark.quick
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    initial=st.sets(names, min_size=0, max_size=25),
    limit=st.integers(1, 6),
    churn=st.lists(
        st.lists(st.tuples(st.sampled_from(["create", "drop"]), names), max_size=4), max_size=10
    ),
    churn_before_page=st.booleans(),
)
def test_walking_the_pages_answers_each_stable_object_once_in_key_order(
    catalog_url: str,
    initial: set[str],
    limit: int,
    churn: list[list[tuple[str, str]]],
    churn_before_page: bool,
) -> None:
    activities = CatalogWork(catalog_url)
    try:
        for answer in run_pass(
            activities, next(_passes), [m.CreateLogicalSource(n, SCHEMA) for n in initial]
        ):
            _ok(answer)
        existing = _all_sources(activities)
        ever = set(existing)
        stable = set(existing)
        walked: list[str] = []
        request: m.ListLogicalSources | None = m.ListLogicalSources(limit=limit)
        changes = iter(churn)
        while request is not None:
            # Some changes per page, in the same pass as the page (before or after it there).
            churn_requests: list[m.Request] = []
            for verb, name in next(changes, []):
                if verb == "create":
                    churn_requests.append(m.CreateLogicalSource(name, SCHEMA))
                    ever.add(name)
                else:
                    churn_requests.append(m.DropLogicalSource(name))
                    stable.discard(name)
            batch = [*churn_requests, request] if churn_before_page else [request, *churn_requests]
            answers = run_pass(activities, next(_passes), batch)
            page = _ok(answers[len(churn_requests)] if churn_before_page else answers[0])
            items = [row["name"] for row in page["items"]]
            assert len(items) <= limit
            walked.extend(items)
            assert (page["next"] is None) or page["next"] == items[-1]
            request = None if page["next"] is None else m.ListLogicalSources(limit, page["next"])
        assert walked == sorted(walked) and len(walked) == len(set(walked)), walked
        assert stable <= set(walked), sorted(stable - set(walked))
        assert set(walked) <= ever
    finally:
        drops = [m.DropLogicalSource(n) for n in _all_sources(activities)]
        run_pass(activities, next(_passes), drops)


ICU_DATABASE = "TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
"""A database whose default collation is ICU's natural-language order while its libc locale
(``datcollate``) is ``C.UTF-8``, which alone would say code-point order."""


@pytest.mark.postgres
def test_a_walk_on_a_database_collating_with_icu_answers_each_name_once_in_key_order() -> None:
    names = ["a", "B", "_x", "Z_", "aB", "ab", "A0", "b", "Z$", "za"]
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(fresh_pg_database(ICU_DATABASE))
        except psycopg.Error as error:  # a server built without ICU
            pytest.skip(f"no ICU database here: {error}")
        activities = CatalogWork(url)
        for answer in run_pass(activities, 1, [m.CreateLogicalSource(n, SCHEMA) for n in names]):
            _ok(answer)
        walked: list[str] = []
        request: m.ListLogicalSources | None = m.ListLogicalSources(limit=2)
        for pass_no in itertools.count(2):
            if request is None:
                break
            [answer] = run_pass(activities, pass_no, [request])
            page = _ok(answer)
            walked.extend(row["name"] for row in page["items"])
            request = None if page["next"] is None else m.ListLogicalSources(2, page["next"])
        assert walked == sorted(names), walked  # Python's str order: by code point


@pytest.mark.quick
def test_pages_of_queries_and_sinks_by_id_and_name_and_show_pages(catalog_url: str) -> None:
    activities = CatalogWork(catalog_url)
    setup: list[m.Request] = [
        m.CreateLogicalSource("src", SCHEMA),
        m.CreatePhysicalSource("src", "FILE", {"file_path": "src.csv"}),
        *(m.CreateSink(f"out{i:02}", SCHEMA, "Print") for i in range(7)),
    ]
    for answer in run_pass(activities, 1, setup):
        _ok(answer)
    created = [
        _ok(a)["id"]
        for a in run_pass(
            activities, 2, [m.CreateQuery(f"SELECT id FROM src INTO out{i:02}") for i in range(7)]
        )
    ]
    # a query dropped in the pass that lists is not listed; one created there is
    dropped, *kept = created
    answers = run_pass(
        activities,
        3,
        [
            m.DropQuery(dropped),
            m.ListQueries(limit=3),
            m.CreateQuery("SELECT id FROM src INTO out00"),
        ],
    )
    first = _ok(answers[1])
    assert [q["id"] for q in first["items"]] == kept[:3] and first["next"] == kept[2]
    late = _ok(answers[2])["id"]
    ids: list[int] = [q["id"] for q in first["items"]]
    request: m.ListQueries | None = m.ListQueries(limit=3, after=first["next"])
    pass_no = 4
    while request is not None:
        [answer] = run_pass(activities, pass_no, [request])
        pass_no += 1
        page = _ok(answer)
        ids.extend(q["id"] for q in page["items"])
        request = None if page["next"] is None else m.ListQueries(3, page["next"])
    assert ids == [*kept, late]

    [sinks] = run_pass(activities, pass_no, [m.ListSinks(limit=5, after="out02")])
    assert [s["name"] for s in _ok(sinks)["items"]] == ["out03", "out04", "out05", "out06"]

    # A lone SHOW with a limit answers a page and the cursor of the next; following them
    # gives every row, as the unpaged SHOW does
    def ask(request: m.Request) -> Any:
        nonlocal pass_no
        pass_no += 1
        [answer] = run_pass(activities, pass_no, [request])
        return _ok(answer)

    for text in ("SHOW QUERIES", "SHOW SINKS", "SHOW PHYSICAL SOURCES FOR src"):
        request = m.ExecuteStatement(text, limit=2)
        paged = ask(request)
        first_show = paged["statements"][0]["result"]
        assert len(first_show["rows"]) <= 2
        whole = ask(m.ExecuteStatement(text))["statements"][0]["result"]
        completed = complete_show_pages(ask, request, paged)["statements"][0]["result"]
        assert completed["rows"] == whole["rows"] and completed["next"] is None
        assert whole["next"] is None
    assert [
        q["id"] for q in ask(m.ExecuteStatement("SHOW QUERIES"))["statements"][0]["result"]["rows"]
    ] == [*kept, late]

    # in a script a SHOW is not paged: it lists every row where it stands, so later
    # statements cannot change what it answers
    script = ask(m.ExecuteStatement("SHOW SINKS; DROP SINK out06 CASCADE; SHOW SINKS", limit=2))
    before, _, after = (s["result"] for s in script["statements"])
    assert len(before["rows"]) == 7 and len(after["rows"]) == 6
    assert before["next"] is None and after["next"] is None


@pytest.mark.quick
@pytest.mark.parametrize(
    "request_",
    [
        m.ListQueries(limit=0),
        m.ListQueries(limit=MAX_PAGE_ROWS + 1),
        m.ListSinks(limit=-5),
        m.ListPhysicalSources(logical_source="nope", limit=0),
        m.ExecuteStatement("SHOW QUERIES", limit=0),
        m.ExecuteStatement("SHOW QUERIES", after="3"),  # a cursor without a limit
        m.ListQueries(after=3),
        m.ListLogicalSources(after="A"),
        m.ListPhysicalSources(logical_source="nope", after=3),
        m.ExecuteStatement("SHOW QUERIES; SHOW SINKS", limit=2, after="3"),
        m.ExecuteStatement("SHOW QUERIES", limit=2, after="not-an-id"),
        m.ExecuteStatement("SHOW QUERIES", limit=2, after="9223372036854775808"),
        m.ExecuteStatement("SHOW PHYSICAL SOURCES", limit=2, after="-99999999999999999999"),
        m.ExecuteStatement("SHOW QUERIES", limit=2, after="1_0"),
    ],
)
def test_bad_limits_and_cursors_are_refused_with_invalid_request(
    catalog_url: str, request_: m.Request
) -> None:
    activities = CatalogWork(catalog_url)
    [answer] = run_pass(activities, 1, [request_])
    assert not answer["ok"] and answer["error_code"] == "INVALID_REQUEST", answer
    assert "limit" in answer["error_message"] or "after" in answer["error_message"]


@pytest.mark.quick
def test_a_page_stops_before_its_items_reach_the_byte_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(listing, "MAX_PAGE_BYTES", 1000)
    rows = [{"k": i, "blob": "x" * 300} for i in range(10)]
    page = listing.page_of(rows, 8, dict, itemgetter("k"))
    assert [r["k"] for r in page["items"]] == [0, 1, 2] and page["next"] == 2
    # one item larger than the budget is still answered alone, so a walk always advances
    huge = [{"k": 0, "blob": "x" * 5000}, {"k": 1, "blob": ""}]
    page = listing.page_of(huge, 8, dict, itemgetter("k"))
    assert [r["k"] for r in page["items"]] == [0] and page["next"] == 0
    last = listing.page_of(rows[:2], 8, dict, itemgetter("k"))
    assert len(last["items"]) == 2 and last["next"] is None


def test_a_lone_show_that_does_not_fit_the_pass_is_asked_again_not_refused(
    catalog_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A SHOW changes nothing: when its page does not fit what is left of a pass's answers,
    it is ``UNAVAILABLE`` (ask again), as a listing is, not ``TOO_LARGE``."""
    # The setup's 600 long creates in one pass may take longer than a pass applies requests.
    monkeypatch.setattr(passes, "MAX_PASS_WORK_SECONDS", 3600.0)
    activities = CatalogWork(catalog_url)
    padding = " AND ".join(f"v != {n}" for n in range(110))
    schema = (*SCHEMA, m.ColumnSpec("v", "INT64", False))
    setup: list[m.Request] = [
        m.CreateLogicalSource("src", schema),
        m.CreatePhysicalSource("src", "FILE", {"file_path": "src.csv"}),
        m.CreateSink("out", schema, "Print"),
        *(
            m.CreateQuery(f"SELECT id, v FROM src WHERE {padding} AND v != -{n} INTO out")
            for n in range(600)
        ),
    ]
    assert all(a["ok"] for a in run_pass(activities, 1, setup))
    shows = run_pass(activities, 2, [m.ExecuteStatement("SHOW QUERIES", limit=500)] * 5)
    codes = ["ok" if a["ok"] else a["error_code"] for a in shows]
    assert "TOO_LARGE" not in codes and codes[0] == "ok" and "UNAVAILABLE" in codes, codes


@pytest.mark.quick
def test_unset_paging_fields_stay_out_of_the_body() -> None:
    """An older coordinator refuses unknown fields: a request that does not page sends none."""
    assert m.ListQueries().body() == {}
    assert m.ExecuteStatement("SHOW QUERIES").body() == {"text": "SHOW QUERIES"}
    assert m.ListSinks(limit=5, after="a").body() == {"limit": 5, "after": "a"}
    assert m.ListChanges().body()["limit"] == 100


@pytest.mark.quick
@pytest.mark.parametrize("limit", [0, -1, MAX_PAGE_ROWS + 1, 2.0, "2", True, None, float("nan")])
def test_a_client_walk_refuses_a_page_size_it_cannot_ask_for(limit: Any) -> None:
    with pytest.raises(ValueError, match="a page holds"):
        paging.first_page(m.ListSinks(), limit)


@pytest.mark.quick
def test_a_client_walk_stops_at_a_cursor_that_does_not_advance() -> None:
    # a coordinator moves the cursor on with every page; one that names the same page again
    # (a bug, a hostile server) would keep the walk asking forever
    request = paging.first_page(m.ListSinks(), 2)
    second = paging.next_page(request, {"items": [{"name": "a"}], "next": "a"})
    assert second is not None and second.after == "a"
    with pytest.raises(RuntimeError, match="names itself next"):
        paging.next_page(second, {"items": [{"name": "a"}], "next": "a"})
