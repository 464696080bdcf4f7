"""The registry of ``workflow.patched`` ids (:mod:`streamctl.workflows.patches`): its strings
never change, every recorded marker is in it, and the workflows name no id but through it."""

from __future__ import annotations

import ast
import base64
import itertools
import json
from pathlib import Path

import pytest

from streamctl.workflows import patches

pytestmark = pytest.mark.quick

WORKFLOWS = Path(patches.__file__).parent
PACKAGE_ROOT = WORKFLOWS.parent
HISTORIES = Path(__file__).parent / "histories"

RECORDED_IDS = {
    "PASS_ISOLATION": "pass-isolation",
    "LOCAL_SMALL_PASSES": "local-small-passes",
    "BOUNDED_PASS_EVENTS": "bounded-pass-events",
    "BOUNDED_EVENT_NESTING": "bounded-event-nesting",
    "DROP_OVERSIZED_EVENTS": "drop-oversized-events",
    "BOUNDED_SENDER_MEMORY": "bounded-sender-memory",
    "BOUNDED_CONTINUE_AS_NEW_STATE": "bounded-continue-as-new-state",
    "SERVE_WHILE_DRAINING": "serve-while-draining",
    "DEFER_CONTINUE_AS_NEW_FOR_STARTS": "defer-continue-as-new-for-starts",
    "QUIET_CONTINUE_AS_NEW": "quiet-continue-as-new",
    "CALM_CONTINUE_AS_NEW": "calm-continue-as-new",
    "BOUNDED_ACTIONS_UNDER_WAY": "bounded-actions-under-way",
    "STOP_UNTIL_STOPPED": "stop-until-stopped",
    "STOP_AFTER_FAILED_START": "stop-after-failed-start",
    "UNCONFIRMED_STOP_STAYS_STOPPING": "unconfirmed-stop-stays-stopping",
}
"""Every id as running coordinators and recorded histories know it: a string here never
changes (a changed one makes every run recorded with its marker replay differently)."""


def test_every_id_keeps_its_string() -> None:
    assert {name: getattr(patches, name) for name in RECORDED_IDS} == RECORDED_IDS
    assert sorted(patches.ALL_PATCHES) == sorted(RECORDED_IDS.values())
    assert len(set(patches.ALL_PATCHES)) == len(patches.ALL_PATCHES)


def test_every_id_says_what_it_guards() -> None:
    tree = ast.parse((WORKFLOWS / "patches.py").read_text())
    body = tree.body
    documented = set()
    for statement, following in itertools.pairwise(body):
        if (
            isinstance(statement, ast.Assign)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
            and len(following.value.value) > 40
        ):
            documented |= {t.id for t in statement.targets if isinstance(t, ast.Name)}
    assert set(RECORDED_IDS) <= documented


def _recorded_patch_ids() -> set[str]:
    found = set()
    for path in HISTORIES.glob("*.json"):
        for event in json.loads(path.read_text())["events"]:
            marker = event.get("markerRecordedEventAttributes")
            if marker and marker["markerName"] == "core_patch":
                for payload in marker["details"]["patch-data"]["payloads"]:
                    found.add(json.loads(base64.b64decode(payload["data"]))["id"])
    return found


def test_every_marker_of_the_recorded_histories_is_registered() -> None:
    recorded = _recorded_patch_ids()
    assert recorded, "the recorded histories hold patch markers"
    assert recorded <= set(patches.ALL_PATCHES)


def _patch_calls(path: Path) -> list[ast.Call]:
    return [
        node
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("patched", "deprecate_patch")
    ]


def test_every_patched_call_names_a_registered_constant() -> None:
    calls = 0
    for path in sorted(WORKFLOWS.glob("*.py")):
        for call in _patch_calls(path):
            calls += 1
            [argument] = call.args
            assert isinstance(argument, ast.Attribute), f"{path.name}:{call.lineno}"
            assert isinstance(argument.value, ast.Name), f"{path.name}:{call.lineno}"
            assert argument.value.id == "patches", f"{path.name}:{call.lineno}"
            assert argument.attr in RECORDED_IDS, f"{path.name}:{call.lineno}"
    assert calls >= len(RECORDED_IDS)


def test_no_id_is_spelled_out_anywhere_else() -> None:
    ids = set(patches.ALL_PATCHES)
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        if path == WORKFLOWS / "patches.py":
            continue
        literals = {
            node.value
            for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        }
        assert not literals & ids, path
