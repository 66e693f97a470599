"""capture.py: when a cached snapshot entry still shows its workload as it is."""

from __future__ import annotations

import dataclasses

import pytest

from scheduler.api import Workload, decode_object
from scheduler.core.config import SchedulerConfig
from scheduler.core.ingest import workload_state
from scheduler.core.workload import QUOTA_RESERVED, OwnerRef, StoredObject, WorkloadState
from scheduler.runtime.capture import EntryCache, entry_is_current, make_entry
from tests.unit.core.builders import START, workload


def _state() -> WorkloadState:
    doc = workload("ns", "w", "lq", {"cpu": "1"}, priority=5)
    doc["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u-1", "controller": True}
    ]
    obj = decode_object(doc)
    assert isinstance(obj, Workload)
    return workload_state(obj, SchedulerConfig(), START, keep_object=False)


def test_an_entry_shares_the_core_owner_tuple() -> None:
    wl = _state()
    entry = make_entry(wl)
    assert entry.owners is wl.raw  # the runtime keeps the owner tuple itself
    assert entry.owners == (OwnerRef("batch/v1", "Job", "j", "u-1"),)
    assert entry.key == ("ns", "w")
    assert entry_is_current(entry, wl)


@pytest.mark.parametrize(
    "change",
    [
        {"creation": START + 1},
        {"priority": 6},
        {"queue_name": "other"},
        {"raw": (OwnerRef("batch/v1", "Job", "k", "u-2"),)},
        {"raw": StoredObject(None, b"[]", (OwnerRef("batch/v1", "Job", "k", "u-2"),))},
    ],
)
def test_a_changed_shown_field_makes_the_entry_stale(change: dict[str, object]) -> None:
    wl = _state()
    entry = make_entry(wl)
    assert not entry_is_current(entry, dataclasses.replace(wl, **change))  # type: ignore[arg-type]


def test_the_quota_reserved_condition_is_compared_in_full() -> None:
    wl = _state()
    entry = make_entry(wl)
    wl.conditions.set(QUOTA_RESERVED, "False", "Pending", "no quota", START + 10)
    assert not entry_is_current(entry, wl)
    entry = make_entry(wl)
    assert entry_is_current(entry, wl)
    wl.conditions.set(QUOTA_RESERVED, "False", "Pending", "still no quota", START + 20)
    assert not entry_is_current(entry, wl)  # the message moved
    entry = make_entry(wl)
    wl.conditions.set(QUOTA_RESERVED, "False", "Inadmissible", "still no quota", START + 30)
    assert not entry_is_current(entry, wl)  # the reason moved
    entry = make_entry(wl)
    # Same status, reason and message: lastTransitionTime stays, and so does the entry.
    wl.conditions.set(QUOTA_RESERVED, "False", "Inadmissible", "still no quota", START + 40)
    assert entry_is_current(entry, wl)
    # Reserved: no longer pending for a reason; the entry would show none.
    wl.conditions.set(QUOTA_RESERVED, "True", "QuotaReserved", "", START + 50)
    assert not entry_is_current(entry, wl)
    assert entry_is_current(make_entry(wl), wl)


def test_the_cache_rebuilds_only_stale_entries() -> None:
    cache = EntryCache()
    wl = _state()
    first = cache.entry(wl)
    assert cache.entry(wl) is first
    wl.priority = 7
    second = cache.entry(wl)
    assert second is not first and second.priority == 7
