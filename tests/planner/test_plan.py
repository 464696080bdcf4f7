"""Plan IR tests: exact JSON round trips, canonical text, validation of what is read."""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

import pytest
from conformance import needs_suite
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.systest_files import queries_with_catalog, read_systest, suite_files
from streamctl.error_codes import INVALID_STATEMENT
from streamctl.planner import plan
from streamctl.planner.binder import bind_query
from streamctl.planner.parser import parse_query
from streamctl.planner.planning_errors import PlannerError

pytestmark = pytest.mark.quick


def suite_plans() -> list[plan.QueryPlan]:
    plans = []
    for path in suite_files("guide", "operator", "function"):
        for query, lookup in queries_with_catalog(read_systest(path)):
            with contextlib.suppress(PlannerError):
                plans.append(bind_query(parse_query(query.text), lookup).plan)  # type: ignore[arg-type]
    return plans


PLANS = suite_plans()


@needs_suite
def test_every_suite_plan_round_trips_through_json_text() -> None:
    assert len(PLANS) > 200
    for query_plan in PLANS:
        text = query_plan.to_json_text()
        assert json.loads(text) == query_plan.to_json()
        restored = plan.QueryPlan.from_json_text(text)
        assert restored == query_plan
        assert restored.to_json_text() == text


@needs_suite
def test_json_is_plain_data() -> None:
    def check(value: Any) -> None:
        if isinstance(value, dict):
            assert all(isinstance(key, str) for key in value)
            for item in value.values():
                check(item)
        elif isinstance(value, list):
            for item in value:
                check(item)
        else:
            assert value is None or isinstance(value, str | bool | int)

    for query_plan in PLANS:
        check(query_plan.to_json())


def test_uint64_constants_keep_every_digit() -> None:
    literal = plan.LiteralExpr(str(2**64 - 1), "UINT64")
    root = plan.Project(
        plan.Scan("s", ("a",), (plan.Field("A", "UINT64", False),)),
        (plan.NamedExpr("X", literal), plan.NamedExpr("Y", plan.LiteralExpr("0.1", "FLOAT64"))),
    )
    restored = plan.QueryPlan.from_json_text(plan.QueryPlan(root).to_json_text())
    assert restored.root.columns[0].expr.value == "18446744073709551615"  # type: ignore[union-attr]
    assert restored == plan.QueryPlan(root)


@needs_suite
def test_explain_names_every_operator() -> None:
    text = "\n".join(query_plan.explain() for query_plan in PLANS)
    for word in ("SCAN", "FILTER", "PROJECT", "UNION", "WINDOW AGGREGATE", "WINDOW JOIN"):
        assert word in text


def _mutations(document: Any) -> list[Any]:
    """Copies of a plan document, each broken in one place."""
    broken: list[Any] = []
    if isinstance(document, dict):
        for key in document:
            replacements: tuple[Any, ...] = (None, 7, "x", [], {})
            for replacement in replacements:
                copied = copy.deepcopy(document)
                copied[key] = replacement
                broken.append(copied)
            copied = copy.deepcopy(document)
            del copied[key]
            broken.append(copied)
    return broken


@needs_suite
def test_malformed_plans_raise_planner_errors() -> None:
    document = PLANS[0].to_json()
    candidates: list[Any] = [None, [], "plan", {"version": 2, "root": document["root"]}]
    stack = [document]
    while stack:
        current = stack.pop()
        candidates.extend(_mutations(current))
        if isinstance(current, dict):
            stack.extend(v for v in current.values() if isinstance(v, dict))
    for candidate in candidates:
        whole = (
            candidate
            if candidate is None or "root" in candidate
            else {
                "version": 1,
                "root": candidate,
            }
        )
        try:
            plan.QueryPlan.from_json(whole)
        except PlannerError as error:
            assert error.code == INVALID_STATEMENT


def test_deeply_nested_plan_json_is_refused() -> None:
    text = '{"version": 1, "root": ' + '{"op": "filter", "input": ' * 50_000 + "{}" + "}" * 50_001
    with pytest.raises(PlannerError):
        plan.QueryPlan.from_json_text(text)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["op", "kind", "input", "fields", "name", "type", "args", "function", "root"]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(_JSON)
def test_random_json_raises_only_planner_errors(document: Any) -> None:
    with contextlib.suppress(PlannerError):
        plan.QueryPlan.from_json({"version": 1, "root": document})
