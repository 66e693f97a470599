"""StoredObject (scheduler/core/workload.py): what a workload keeps of its API object."""

from __future__ import annotations

import dataclasses

import orjson
import pytest

from scheduler.api import Workload, decode_object
from scheduler.core.config import SchedulerConfig
from scheduler.core.ingest import workload_state
from scheduler.core.visibility import owner_references
from scheduler.core.workload import OwnerRef, StoredObject
from tests.unit.core.builders import START, pod_set, workload


def _decoded(name: str, **kwargs: object) -> Workload:
    obj = decode_object(workload("ns", name, "lq", **kwargs))  # type: ignore[arg-type]
    assert isinstance(obj, Workload)
    return obj


def _owned_by_job() -> Workload:
    doc = workload("ns", "w", "lq", {"cpu": "1"})
    doc["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u-1", "controller": True}
    ]
    obj = decode_object(doc)
    assert isinstance(obj, Workload)
    return obj


def test_stored_object_gives_back_the_dump_without_status_key_order_included() -> None:
    obj = _decoded(
        "w",
        pod_sets=[pod_set({"cpu": "1"}, name="a"), pod_set({"cpu": "2"}, name="b")],
        labels={"team": "x"},
        priority=3,
    )
    wl = workload_state(obj, SchedulerConfig(), START)
    assert isinstance(wl.raw, StoredObject)
    expected = obj.model_dump(mode="json", by_alias=True, exclude_none=True)
    expected.pop("status")
    got = wl.raw.to_json()
    assert got == expected
    assert list(got["spec"]) == list(expected["spec"])
    # Each call is a fresh dict: callers may change it.
    got["spec"]["podSets"].clear()
    assert wl.raw.to_json() == expected


def test_workloads_of_one_shape_share_pod_sets_and_their_json() -> None:
    a = workload_state(_decoded("a", requests={"cpu": "1"}), SchedulerConfig(), START)
    b = workload_state(_decoded("b", requests={"cpu": "1"}), SchedulerConfig(), START)
    c = workload_state(_decoded("c", requests={"cpu": "2"}), SchedulerConfig(), START)
    assert a.pod_sets is b.pod_sets
    assert a.pod_sets is not c.pod_sets
    assert a.raw is not None and b.raw is not None
    assert a.raw.to_json()["metadata"]["name"] == "a"
    assert b.raw.to_json()["metadata"]["name"] == "b"


def test_owner_references_come_from_the_stored_object() -> None:
    obj = _owned_by_job()
    wl = workload_state(obj, SchedulerConfig(), START)
    assert owner_references(wl.raw) == (("batch/v1", "Job", "j", "u-1"),)
    assert owner_references(wl.raw) == owner_references(obj)


def test_a_body_orjson_cannot_encode_is_kept_as_a_dict() -> None:
    body = {"metadata": {"name": "w"}, "spec": {"podSets": [], "big": 2**70}}
    stored = StoredObject(body, b'[{"name":"main"}]', ())
    assert stored.to_json() == {
        "metadata": {"name": "w"},
        "spec": {"podSets": [{"name": "main"}], "big": 2**70},
    }


def test_without_the_object_only_owner_references_are_kept() -> None:
    obj = _owned_by_job()
    kept = workload_state(obj, SchedulerConfig(), START)
    lean = workload_state(obj, SchedulerConfig(), START, keep_object=False)
    assert isinstance(kept.raw, StoredObject) and kept.raw.kept
    # The runtime keeps the owner tuple itself, no object around it.
    assert lean.raw == (("batch/v1", "Job", "j", "u-1"),)
    assert owner_references(lean.raw) is lean.raw
    assert owner_references(lean.raw) == owner_references(kept.raw) == owner_references(obj)
    # What the scheduler reads is the same either way (and the pod sets are shared).
    assert lean.pod_sets is kept.pod_sets
    assert (lean.key, lean.creation, lean.priority, lean.queue_name) == (
        kept.key,
        kept.creation,
        kept.priority,
        kept.queue_name,
    )


def test_the_key_is_made_once_and_follows_a_replaced_name() -> None:
    wl = workload_state(_decoded("w"), SchedulerConfig(), START)
    assert wl.key == "ns/w"
    assert wl.key is wl.key  # a field, not a new string per read
    renamed = dataclasses.replace(wl, name="v")
    assert renamed.key == "ns/v" and wl.key == "ns/w"
    wl.conditions.set("QuotaReserved", "False", "Pending", "tried", START)
    sibling = wl.sibling("s", "uid-s", START + 1)
    assert (sibling.key, sibling.uid, sibling.creation) == ("ns/s", "uid-s", START + 1)
    assert sibling.pod_sets is wl.pod_sets
    assert sibling.conditions.items() == [] and wl.conditions.is_false("QuotaReserved")


def test_workloads_kept_without_objects_or_owners_keep_nothing_of_their_own() -> None:
    a = workload_state(_decoded("a"), SchedulerConfig(), START, keep_object=False)
    b = workload_state(_decoded("b"), SchedulerConfig(), START, keep_object=False)
    assert a.raw == () and a.raw is b.raw  # the one empty tuple
    assert owner_references(a.raw) == ()
    owner = OwnerRef("batch/v1", "Job", "j", "u")
    owned = StoredObject(None, b"[]", (owner,))
    assert not owned.kept and owned.owners == (owner,)
    with pytest.raises(LookupError):
        owned.to_json()
    kept = StoredObject({"spec": {"podSets": []}}, b'[{"name": "a"}]', ())
    assert kept.kept and kept.to_json() == {"spec": {"podSets": [{"name": "a"}]}}


def test_owner_api_versions_and_kinds_read_from_text_are_one_string_each() -> None:
    def parsed(name: str) -> Workload:
        doc = workload("ns", name, "lq", {"cpu": "1"})
        doc["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": f"u-{name}"}
        ]
        obj = decode_object(orjson.loads(orjson.dumps(doc)))  # new strings, as a file gives
        assert isinstance(obj, Workload)
        return obj

    a, b = (workload_state(parsed(n), SchedulerConfig(), START, keep_object=False) for n in "ab")
    (ra,), (rb,) = owner_references(a.raw), owner_references(b.raw)
    assert (ra.api_version, ra.kind) == (rb.api_version, rb.kind) == ("batch/v1", "Job")
    assert ra.api_version is rb.api_version and ra.kind is rb.kind
    assert (ra.name, ra.uid, rb.name, rb.uid) == ("a", "u-a", "b", "u-b")
