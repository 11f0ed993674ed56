"""The API's slots for requests that wait on workers: a tenant's share, the process's total,
and a slot given back however its call ends."""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from api.capacity import WaitSlots
from common.errors import Unavailable
from common.service import OverQuota
from common.settings import ApiSettings


def test_a_tenant_past_its_share_is_rate_limited_and_the_process_past_its_slots_unavailable() -> (
    None
):
    slots = WaitSlots(ApiSettings(wait_slots=3, waits_per_tenant=2))
    with ExitStack() as held:
        held.enter_context(slots.slot("a"))
        held.enter_context(slots.slot("a"))
        with pytest.raises(OverQuota, match="api.waits_per_tenant") as over:
            held.enter_context(slots.slot("a"))
        assert over.value.retry_after == 5
        held.enter_context(slots.slot("b"))
        assert slots.full and slots.taken == 3
        with pytest.raises(Unavailable, match="api.wait_slots"):
            held.enter_context(slots.slot("c"))
    assert not slots.full and slots.taken == 0


def test_a_slot_is_given_back_when_its_call_fails() -> None:
    slots = WaitSlots(ApiSettings(wait_slots=1, waits_per_tenant=1))
    gate = slots.gate("a")
    with pytest.raises(TimeoutError), gate():
        raise TimeoutError("no worker")
    with gate():  # free again
        assert slots.full
