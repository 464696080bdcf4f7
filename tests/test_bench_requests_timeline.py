"""``bench requests`` counts the passes in history, those that ran as local activities too.

A small pass runs as a local activity (``LOCAL_PASS_MAX_MESSAGES``); history holds no activity
events for it, only the SDK core's marker. In a recorded history with such passes, each of
those markers counts as a pass, and no other marker does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory

from streamctl.bench.requests import is_local_pass

pytestmark = pytest.mark.quick

HISTORY = Path(__file__).parent / "histories" / "9684877-requests.json"


def test_local_passes_are_counted_from_their_markers() -> None:
    history = WorkflowHistory.from_json("requests", json.loads(HISTORY.read_text()))
    markers = [e for e in history.events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
    local = [
        e for e in markers if e.marker_recorded_event_attributes.marker_name.endswith("_activity")
    ]
    assert local, "the history holds passes that ran as local activities"
    assert [e for e in markers if is_local_pass(e)] == local
