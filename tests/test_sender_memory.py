"""The ``events`` signal's de-duplication by sender (:mod:`streamctl.workflows.sender_memory`)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamctl.limits import INT64_MAX, INT64_MIN, MAX_CARRIED_SENDER_BYTES
from streamctl.workflows.sender_memory import SenderMemory, sender_bytes, seq_fits

pytestmark = pytest.mark.quick


def memory(bounded: bool = True) -> tuple[SenderMemory, list[int]]:
    asked: list[int] = []

    def is_bounded() -> bool:
        asked.append(1)
        return bounded

    return SenderMemory({}, {}, is_bounded), asked


def test_a_batch_not_above_its_senders_last_is_delivered_before() -> None:
    senders, _ = memory()
    assert not senders.delivered_before("a", 1)
    senders.remember("a", 3, now=10.0)
    assert senders.delivered_before("a", 3)
    assert senders.delivered_before("a", 2)
    assert not senders.delivered_before("a", 4)
    assert not senders.delivered_before("b", 1)
    assert senders.delivered_before("b", 0)  # numbers start at 1


def test_it_works_on_the_carried_maps_in_place() -> None:
    seqs: dict[str, int] = {"old": 7}
    seen_at: dict[str, float] = {"old": 1.0}
    senders = SenderMemory(seqs, seen_at, lambda: True)
    senders.remember("new", 1, now=5.0)
    assert seqs == {"old": 7, "new": 1}
    assert seen_at == {"old": 1.0, "new": 5.0}
    senders.forget_older_than(2.0)
    assert seqs == {"new": 1}
    assert seen_at == {"new": 5.0}


def test_the_patch_is_asked_only_for_a_new_sender() -> None:
    senders, asked = memory()
    senders.remember("a", 1, now=1.0)
    senders.remember("a", 2, now=2.0)
    senders.remember("b", 1, now=3.0)
    assert len(asked) == 2


def test_past_its_bytes_the_sender_heard_least_recently_is_forgotten() -> None:
    senders, _ = memory()
    per_sender = sender_bytes("sender-0000")
    fits = MAX_CARRIED_SENDER_BYTES // per_sender
    for n in range(fits + 5):
        senders.remember(f"sender-{n:04d}", 1, now=float(n))
    assert len(senders.seen_at) == fits
    assert "sender-0000" not in senders.seqs
    assert f"sender-{fits + 4:04d}" in senders.seqs
    assert set(senders.seqs) == set(senders.seen_at)


def test_an_unbounded_run_remembers_every_sender() -> None:
    senders, _ = memory(bounded=False)
    fits = MAX_CARRIED_SENDER_BYTES // sender_bytes("sender-0000")
    for n in range(fits + 5):
        senders.remember(f"sender-{n:04d}", 1, now=float(n))
    assert len(senders.seen_at) == fits + 5


@settings(max_examples=50)
@given(st.lists(st.text(min_size=1, max_size=40), min_size=1, max_size=60))
def test_the_remembered_senders_fit_their_bytes_as_json_writes_them(names: list[str]) -> None:
    senders, _ = memory()
    for now, name in enumerate(names):
        senders.remember(name, INT64_MAX, now=1e9 + now)
    carried = json.dumps(senders.seqs) + json.dumps(senders.seen_at)
    assert len(carried.encode()) <= max(MAX_CARRIED_SENDER_BYTES, sender_bytes(names[-1]))
    assert names[-1] in senders.seqs  # the latest is always kept


def test_only_64_bit_numbers_fit() -> None:
    assert seq_fits(INT64_MAX) and seq_fits(INT64_MIN) and seq_fits(1)
    assert not seq_fits(INT64_MAX + 1)
    assert not seq_fits(INT64_MIN - 1)
